"""Top-versus-All (TvA): confidence calibration as one binary problem (Le Coz, Herbin & Adjed, NeurIPS 2024).

The multiclass classifier is replaced by the surrogate binary one "is the top prediction correct?": inputs
the confidence c = max_j p̂_j (or the logits that produce it), target t = 1[argmax p̂ = y]. A calibrator is
fitted on that problem with the binary cross-entropy −[t ln ĉ + (1 − t) ln(1 − ĉ)] (scaling methods) or its
own binary fitting rule (binning, isotonic), and only the confidence changes: the top class gets ĉ and the
other classes share 1 − ĉ as :func:`keep_prediction` says (their original proportions, flattened towards
uniform just enough to stay ≤ ĉ), so the predicted class is kept wherever ĉ ≥ 1/k (``tva_ts`` returns σ(z / T)).

* ``tva_ts``: temperature scaling with T fitted by the TvA BCE of max σ(z / T);
* ``tva_vs``: vector scaling σ(w ⊙ z + b), fitted by the BCE of its probability of the original top class
  plus the paper's L2 regularisation, here ``reg``·(Σⱼ (wⱼ − w̄)² + Σⱼ bⱼ²) (shrinking towards temperature
  scaling, whose common scale stays free);
  ``reg`` = 1e-3 by default (our choice: the best of 1e-3, 1e-2, 1e-1 in confidence ECE on CIFAR-100
  ResNet-20, seed 0; unregularised, L-BFGS needs 1,000+ iterations there); ``grid: {reg: [...]}`` tunes it by CV;
* ``tva_hist``: histogram binning (equal-mass bins) of the confidence;
* ``tva_iso``: isotonic regression of the confidence;
* ``tlhb``: top-label histogram binning (Gupta & Ramdas, ICLR 2022), one binning per predicted class.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import logsumexp

from calbench.fitted_state import Array, DictOf, Instance, Items, Record, Scalar
from calbench.maps1d.maps import Isotonic
from calbench.methods.base import Calibrator
from calbench.methods.binary_calibrators import with_confidence
from calbench.methods.constraints import Interval
from calbench.methods.histogram import BINNED_MAP, HistogramBinning
from calbench.methods.isotonic import IsotonicOneVsRest
from calbench.methods.registry import register
from calbench.methods.temperature import TemperatureScaling
from calbench.scores import Scores
from calbench.solvers.temperature_fit import BETA_MAX, BETA_MIN


def top_label_problem(scores: Scores, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(predicted class ŷ, confidence max p̂, correctness 1[ŷ = y]) of every row: TvA's binary problem."""
    probs = scores.probs
    top = probs.argmax(axis=1)
    return top, probs[np.arange(top.size), top], (top == y).astype(np.float64)


def log_top_and_rest(s: np.ndarray, top: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ln σ(s)_ŷ and ln(1 − σ(s)_ŷ) per row, both without cancellation (the rest through a masked logsumexp)."""
    rows = np.arange(top.size)
    norm = logsumexp(s, axis=1)
    masked = s.copy()
    masked[rows, top] = -np.inf
    return s[rows, top] - norm, logsumexp(masked, axis=1) - norm


def keep_prediction(logits: np.ndarray, new_conf: np.ndarray) -> np.ndarray:
    """The softmax of ``logits`` with the top probability replaced by ĉ = ``new_conf`` and the predicted class
    kept (TvA changes only the confidence): the other classes share 1 − ĉ as (1 − α)·r + α·uniform, r their
    original proportions, with the smallest α ∈ [0, 1] that keeps every one of them ≤ ĉ (α = 0 wherever the
    plain rescaling already does; where ĉ < 1/k no split can, and α = 1)."""
    k = logits.shape[1]
    out = with_confidence(logits, new_conf)
    rows, top = np.arange(logits.shape[0]), logits.argmax(axis=1)
    rest = 1.0 - new_conf
    runner_up = np.max(np.where(np.arange(k) == top[:, None], -np.inf, out), axis=1)
    uniform = rest / (k - 1)
    target = new_conf * (1.0 - 1e-9)  # strictly below ĉ: a tie would hand the argmax to the lower class index
    excess = runner_up - target
    alpha = np.clip(np.where(excess > 0, excess / np.maximum(runner_up - uniform, 1e-300), 0.0), 0.0, 1.0)
    out = (1.0 - alpha)[:, None] * out + (alpha * uniform)[:, None]
    out[rows, top] = new_conf
    return out


def bce(log_c: np.ndarray, log_rest: np.ndarray, t: np.ndarray) -> float:
    return float(-np.mean(t * log_c + (1.0 - t) * log_rest))


@register("tva_ts")
class TopVersusAllTS(TemperatureScaling):
    """TvA temperature scaling: T minimises the BCE of max σ(z / T) against correctness; preserves the argmax."""

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        z = scores.logits
        top, _, t = top_label_problem(scores, y)

        def loss(log_beta):
            return bce(*log_top_and_rest(np.exp(log_beta) * z, top), t)

        from scipy.optimize import minimize_scalar  # lazy: calibrate jobs of other methods skip its import

        result = minimize_scalar(loss, bounds=(np.log(BETA_MIN), np.log(BETA_MAX)), method="bounded",
                                 options={"xatol": 1e-10})
        self.temperature_ = float(np.exp(-result.x))


@register("tva_vs")
class TopVersusAllVS(Calibrator):
    """TvA vector scaling: (w, b) minimise the BCE of σ(w ⊙ z + b)_ŷ (ŷ the original prediction) plus
    ``reg``·(‖w − w̄‖² + ‖b‖²); the calibrated confidence replaces max p̂."""

    _fitted_state = {"weights_": Array(float, ("C",)), "intercept_": Array(float, ("C",)),
                     "fit_info_": Record({"iterations": Scalar(int), "converged": Scalar(bool), "loss": Scalar(float)})}

    _parameter_constraints = {"reg": [Interval("real", 0)], "max_iter": [Interval("int", 1)],
                              "tol": [Interval("real", 0)]}

    def __init__(self, *, reg: float = 1e-3, max_iter: int = 1000, tol: float = 1e-10):
        self.reg = reg
        self.max_iter = max_iter
        self.tol = tol

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        z = scores.logits - scores.logits.max(axis=1, keepdims=True)
        n, k = z.shape
        top, _, t = top_label_problem(scores, y)
        rows = np.arange(n)

        def objective(theta):
            w, b = theta[:k], theta[k:]
            s = z * w + b
            log_c, log_rest = log_top_and_rest(s, top)
            spread = w - w.mean()
            value = bce(log_c, log_rest, t) + self.reg * (np.sum(spread**2) + np.sum(b**2))
            # d BCE / d s = g (e_ŷ − p), g = (1 − t) c / (1 − c) − t
            g = (1.0 - t) * np.exp(np.minimum(log_c - log_rest, 700.0)) - t
            grad_s = -np.exp(s - logsumexp(s, axis=1, keepdims=True))
            grad_s[rows, top] += 1.0
            grad_s *= g[:, None] / n
            grad = np.concatenate([np.einsum("ij,ij->j", grad_s, z) + 2 * self.reg * spread,
                                   grad_s.sum(axis=0) + 2 * self.reg * b])
            return value, grad

        from scipy.optimize import minimize  # lazy: calibrate jobs of other methods skip its import

        start = np.concatenate([np.ones(k), np.zeros(k)])
        result = minimize(objective, start, jac=True, method="L-BFGS-B",
                          options={"maxiter": self.max_iter, "ftol": self.tol, "gtol": 1e-10})
        if not result.success and result.nit >= self.max_iter:
            warnings.warn(f"tva_vs: L-BFGS stopped after max_iter={self.max_iter} iterations without converging "
                          f"({result.message}); raise max_iter", RuntimeWarning, stacklevel=2)
        self.weights_, self.intercept_ = result.x[:k], result.x[k:]
        self.fit_info_ = {"iterations": int(result.nit), "converged": bool(result.success), "loss": float(result.fun)}

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        z = scores.logits - scores.logits.max(axis=1, keepdims=True)
        top = z.argmax(axis=1)
        log_c, _ = log_top_and_rest(z * self.weights_ + self.intercept_, top)
        return keep_prediction(scores.logits, np.exp(log_c))

    def fitted_summary(self) -> dict:
        return {**self.fit_info_, "weight_mean": float(self.weights_.mean()),
                "intercept_abs_max": float(np.abs(self.intercept_).max())}


class BinaryTopVersusAll(Calibrator):
    """TvA of a one-vs-rest calibrator's binary map (``binary_class``): fitted once on (max p̂, correct)."""

    #: The unfitted one-vs-rest calibrator whose binary map ``map_`` is (each subclass declares its map's kind).
    _fitted_state = {"binary_": Instance(Calibrator, fitted=False, like="binary_class")}

    binary_class: type

    def _binary(self):
        return self.binary_class(**self.get_params(deep=False))

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        _, conf, t = top_label_problem(scores, y)
        self.binary_ = self._binary()
        self.map_ = self.binary_.fit_binary(conf, t)

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        probs = scores.probs
        conf = self.binary_.apply_binary(self.map_, probs.max(axis=1))
        return keep_prediction(scores.logits, np.clip(conf, 0.0, 1.0))


@register("tva_hist")
class TopVersusAllHistogram(BinaryTopVersusAll):
    """TvA histogram binning: ``n_bins`` equal-mass bins of the confidence, ĉ = accuracy of the bin
    (an empty bin keeps the confidence), binned as ``hist`` bins."""

    _fitted_state = {"map_": BINNED_MAP}

    binary_class = HistogramBinning
    _parameter_constraints = {"n_bins": HistogramBinning._parameter_constraints["n_bins"]}

    def __init__(self, *, n_bins: int = 15):
        self.n_bins = n_bins


@register("tva_iso")
class TopVersusAllIsotonic(BinaryTopVersusAll):
    """TvA isotonic regression: PAV on (max p̂, correct), interpolated and clipped as ``irova``."""

    _fitted_state = {"map_": Instance(Isotonic)}

    binary_class = IsotonicOneVsRest


@register("tlhb")
class TopLabelHistogramBinning(Calibrator):
    """Top-label histogram binning, the M2B reduction of Gupta & Ramdas (ICLR 2022, Algorithm 2): for each class l,
    the rows predicted l are binned by confidence into ⌊n_l / ``points_per_bin``⌋ (≥ 1) equal-mass bins and
    ĉ = the frequency of y = l in the bin (``hist``'s binning); a class never predicted keeps its confidence."""

    #: Per predicted class: the (unfitted) histogram binning with that class's bin count, and its fitted bins.
    _fitted_state = {"maps_": DictOf(int, Items(Instance(HistogramBinning, fitted=False), BINNED_MAP))}

    _parameter_constraints = {"points_per_bin": [Interval("int", 1)]}

    def __init__(self, *, points_per_bin: int = 50):
        self.points_per_bin = points_per_bin

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        top, conf, t = top_label_problem(scores, y)
        self.maps_ = {}
        for label in np.unique(top):
            rows = top == label
            binner = HistogramBinning(n_bins=max(1, int(rows.sum()) // self.points_per_bin))
            self.maps_[int(label)] = (binner, binner.fit_binary(conf[rows], t[rows]))

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        probs = scores.probs
        top = probs.argmax(axis=1)
        new_conf = probs[np.arange(top.size), top].copy()
        for label, (binner, fitted) in self.maps_.items():
            rows = top == label
            new_conf[rows] = binner.apply_binary(fitted, new_conf[rows])
        return keep_prediction(scores.logits, new_conf)

    def fitted_summary(self) -> dict:
        return {"bins_per_class": {label: binner.n_bins for label, (binner, _) in self.maps_.items()}}
