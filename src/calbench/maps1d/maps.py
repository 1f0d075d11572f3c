"""Parametric and isotonic binary calibration maps (fit-on-test paper Table 1 and App. C.4).

* Platt: ĉ(p) = σ(a·logit(p) + b), the logistic family fitted by log-loss on the logit of the
  probability (the fit-on-test paper fits Platt "on a logit-transformed input"; Platt 1999 on scores).
* Beta ("abm", Kull et al. 2017; Dirichlet paper §4.1): ĉ(p) = σ(a·ln p − b·ln(1 − p) + c) with
  a, b ≥ 0, fitted by logistic regression on (ln p, −ln(1 − p)); a negative a (or b) is fixed to 0
  and the model refitted, as Kull et al. prescribe to keep the map monotone.
* Isotonic: the non-decreasing step function minimising the squared error (pool adjacent
  violators), linearly interpolated between its steps and clipped outside the fitted range.

Probabilities are clipped to ``[PROB_EPS, 1 − PROB_EPS]`` before taking logarithms.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logit

from calbench.fitted_state import Array, Scalar
from calbench.scores import PROB_EPS

#: Ridge penalty on the slopes of the logistic fits: negligible, but keeps separable data finite.
RIDGE = 1e-6


def check_binary(p, y=None) -> tuple[np.ndarray, np.ndarray | None]:
    """``p`` as float64 [N] in [0, 1] and ``y`` as float64 {0, 1}, or a ValueError naming the problem."""
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"binary map input: expected a 1-D array of probabilities, got shape {p.shape}")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("binary map input: probabilities must lie in [0, 1] (got values outside or NaN)")
    if y is None:
        return p, None
    y = np.asarray(y, dtype=np.float64)
    if y.shape != p.shape or not np.all((y == 0) | (y == 1)):
        raise ValueError(f"binary map targets: expected {p.shape[0]} values in {{0, 1}}, got shape {y.shape}")
    return p, y


def _clip(p):
    return np.clip(p, PROB_EPS, 1.0 - PROB_EPS)


def fit_logistic(features: np.ndarray, y: np.ndarray, max_iter: int = 100, tol: float = 1e-10,
                 penalty=None) -> np.ndarray:
    """Weights w (last = intercept) of σ(features·w[:-1] + w[-1]) minimising the mean log-loss (Newton), plus
    Σ_k ``penalty``[k]/2 · w_k² where given (one strength per weight, intercept last)."""
    x = np.column_stack([features, np.ones(features.shape[0])])
    n, d = x.shape
    ridge = np.full(d, RIDGE)
    ridge[-1] = 0.0
    if penalty is not None:
        ridge = ridge + np.asarray(penalty, dtype=np.float64)
    w = np.zeros(d)
    for _ in range(max_iter):
        q = expit(x @ w)
        grad = x.T @ (q - y) / n + ridge * w
        hess = (x * (q * (1 - q))[:, None]).T @ x / n + np.diag(ridge + 1e-12)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < tol:
            break
    return w


class Platt:
    """ĉ(p) = σ(a·logit(p) + b) fitted by log-loss."""

    _fitted_state = {"a_": Scalar(float), "b_": Scalar(float)}

    def fit(self, p, y) -> "Platt":
        p, y = check_binary(p, y)
        self.a_, self.b_ = fit_logistic(logit(_clip(p))[:, None], y)
        return self

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        return expit(self.a_ * logit(_clip(p)) + self.b_)

    def summary(self) -> dict:
        return {"a": float(self.a_), "b": float(self.b_)}


#: ln p and ln(1 − p) of quadratic scaling are clipped at ± this (ln of the smallest normal float32, as probmetrics).
LOG_CLIP = float(np.log(np.finfo(np.float32).tiny))


def quadratic_logit(p: np.ndarray) -> np.ndarray:
    """ℓ = ln p − ln(1 − p), each logarithm clipped to [``LOG_CLIP``, −``LOG_CLIP``] (probmetrics'
    ``binary_probs_to_logits``): the ℓ² term makes the fit sensitive to where ℓ is cut, so it is cut as the reference
    cuts it, far below ``PROB_EPS``."""
    with np.errstate(divide="ignore"):
        return np.clip(np.log(p), LOG_CLIP, -LOG_CLIP) - np.clip(np.log1p(-p), LOG_CLIP, -LOG_CLIP)


class Quadratic:
    """Quadratic scaling ĉ(p) = σ(a + b·ℓ + c·ℓ²), ℓ = logit p (probmetrics' ``quadratic-scaling``, Berta et al.
    2025), fitted by log-loss plus ``lambda_intercept``/2·a² + ``lambda_quadratic``/2·c² (the ridge form of
    probmetrics' ``RegularizedQuadraticScalingCalibrator``; 0 and 0: its unregularised ``quadratic-scaling``)."""

    _fitted_state = {"a_": Scalar(float), "b_": Scalar(float), "c_": Scalar(float)}

    #: Its settings, checked when a saved map is loaded.
    _declared_settings = {"lambda_intercept": Scalar(float, within="[0, inf)"),
                          "lambda_quadratic": Scalar(float, within="[0, inf)")}

    def __init__(self, lambda_intercept: float = 0.0, lambda_quadratic: float = 0.0):
        self.lambda_intercept, self.lambda_quadratic = lambda_intercept, lambda_quadratic

    def fit(self, p, y) -> "Quadratic":
        p, y = check_binary(p, y)
        ell = quadratic_logit(p)
        w = fit_logistic(np.column_stack([ell, ell * ell]), y, penalty=[0.0, self.lambda_quadratic,
                                                                         self.lambda_intercept])
        self.b_, self.c_, self.a_ = w
        return self

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        ell = quadratic_logit(p)
        return expit(self.a_ + self.b_ * ell + self.c_ * ell * ell)

    def summary(self) -> dict:
        return {"a": float(self.a_), "b": float(self.b_), "c": float(self.c_)}


class Beta:
    """Beta calibration ĉ(p) = σ(a·ln p − b·ln(1 − p) + c), a, b ≥ 0 (Kull et al. 2017, "abm")."""

    _fitted_state = {"a_": Scalar(float), "b_": Scalar(float), "c_": Scalar(float)}

    def fit(self, p, y) -> "Beta":
        p, y = check_binary(p, y)
        p = _clip(p)
        features = np.column_stack([np.log(p), -np.log1p(-p)])
        w = fit_logistic(features, y)
        if w[0] < 0 or w[1] < 0:
            keep = 1 if w[0] < w[1] else 0  # drop the more negative slope, refit on the other feature
            w_keep = fit_logistic(features[:, [keep]], y)
            w = np.zeros(3)
            w[keep], w[2] = max(w_keep[0], 0.0), w_keep[1]
            if w_keep[0] < 0:  # both slopes negative: the constant map (base rate)
                w[keep], w[2] = 0.0, fit_logistic(np.zeros((p.size, 0)), y)[0]
        self.a_, self.b_, self.c_ = w
        return self

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        p = _clip(p)
        return expit(self.a_ * np.log(p) - self.b_ * np.log1p(-p) + self.c_)

    def summary(self) -> dict:
        return {"a": float(self.a_), "b": float(self.b_), "c": float(self.c_)}


def target_runs(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, mean target, weight) standing in for (p, y) in a weighted isotonic fit, with the same solution.

    Along sorted p, a run of consecutive equal targets is kept as its first and last value (weights 1
    and the rest of the run). The L2 isotonic fit is constant on such a run (averaging a run's fitted
    values keeps monotonicity and does not raise the loss), so PAV's solution and its knots — the
    ends of its constant segments — are unchanged. Where equal p straddle two runs, equal p are first
    pooled (mean target, weighted by their count: what PAV does first) and runs are taken over them.
    Memory: the sort order and the sorted targets; p is only read at the runs' ends.
    """
    order = np.argsort(p, kind="stable")
    y_sorted = y[order]
    starts = np.concatenate([[0], np.flatnonzero(y_sorted[1:] != y_sorted[:-1]) + 1])
    if np.any(p[order[starts[1:]]] == p[order[starts[1:] - 1]]):  # ties across a change of target
        x, counts = np.unique(p, return_counts=True)
        target = np.add.reduceat(y_sorted.astype(np.float64), np.concatenate([[0], np.cumsum(counts)[:-1]])) / counts
        return _runs_of(x, target, counts.astype(np.float64))
    ends = np.append(starts[1:], y_sorted.size) - 1
    return _runs_of(p[order[starts]], y_sorted[starts].astype(np.float64), np.diff(np.append(starts, y_sorted.size)),
                    last=p[order[ends]])


def _runs_of(x, target, weight, last=None):
    """First (and, where the run spans two or more values, last) point of each run of equal ``target``."""
    if last is None:  # runs over pooled values: merge consecutive equal targets
        start = np.flatnonzero(np.concatenate([[True], target[1:] != target[:-1]]))
        end = np.append(start[1:], target.size) - 1
        x, last, first_weight = x[start], x[end], weight[start]
        target, weight = target[start], np.add.reduceat(weight, start)
    else:
        first_weight = np.ones_like(weight, dtype=np.float64)
    two = last > x
    points = np.concatenate([x, last[two]])
    keep = np.argsort(points, kind="stable")
    weights = np.concatenate([np.where(two, first_weight, weight), weight[two] - first_weight[two]])
    return points[keep], np.concatenate([target, target[two]])[keep], weights[keep].astype(np.float64)


class Isotonic:
    """Isotonic regression of y on p (PAV), clipped to the fitted range, outputs in [0, 1].

    The fitted map is its knots ``knots_x_`` (increasing) and ``knots_y_`` (non-decreasing): the ends of
    PAV's constant segments, linearly interpolated and constant outside ``[knots_x_[0], knots_x_[-1]]``,
    as scikit-learn's ``IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")``, which this equals
    (tested) without its ~1 s import. PAV itself is ``scipy.optimize.isotonic_regression``.
    """

    #: The knots of the step function, as many x as y (rebuilt from the saved ``x``, ``y`` by ``_set_state``).
    _fitted_state = {"knots_x_": Array(float, ("n",)), "knots_y_": Array(float, ("n",), within="[0, 1]")}

    def fit(self, p, y) -> "Isotonic":
        return self.fit_checked(*check_binary(p, y))

    def fit_checked(self, p: np.ndarray, y: np.ndarray) -> "Isotonic":
        """Fit on valid ``p`` (float [N] in [0, 1]) and ``y`` (0/1, any dtype, e.g. bool to save memory).

        PAV runs on the runs of equal targets along sorted p (:func:`target_runs`): the least-squares
        isotonic fit is constant on such a run, so it and its segment ends — the knots of the
        interpolation — are those of the fit on all N points, at the memory of a few sorted copies.
        """
        self.knots_x_, self.knots_y_ = pav_knots(*target_runs(p, y))
        return self

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        return np.interp(p, self.knots_x_, self.knots_y_)

    def summary(self) -> dict:
        return {"steps": int(self.knots_x_.size)}

    def _get_state(self) -> dict:
        """For :mod:`calbench.persist`: the fitted step function's knots."""
        return {"x": self.knots_x_, "y": self.knots_y_}

    def _set_state(self, state: dict) -> None:
        """The knots from the saved ``x``, ``y``: float arrays (checked before any cast), x increasing, y
        non-decreasing."""
        if not all(isinstance(state[key], np.ndarray) and state[key].dtype.kind == "f" for key in ("x", "y")):
            raise ValueError("saved isotonic knots: x and y must be float arrays; refit the calibrator")
        x, y = (state[key].astype(np.float64, copy=False) for key in ("x", "y"))
        if x.ndim != 1 or x.shape != y.shape or x.size == 0 or np.any(np.diff(x) <= 0) or np.any(np.diff(y) < 0):
            raise ValueError("saved isotonic knots: need x increasing and y non-decreasing, of one length; "
                             "refit the calibrator")
        self.knots_x_, self.knots_y_ = x, y


class CenteredIsotonic(Isotonic):
    """Centred isotonic regression (Oron & Flournoy 2017, §2.2): the PAV fit with each constant block collapsed into
    one point at the block's mean input, interpolated linearly, so that the map is strictly increasing between block
    centres. As the reference implementation (``cir-model``, used by probmetrics' ``cir``): blocks at 0 or 1 keep
    both ends (the paper does not collapse them), and the first and last blocks keep their outer end, so the map
    spans the fitted range; constant outside it. Equal inputs are pooled first."""

    def fit_checked(self, p: np.ndarray, y: np.ndarray) -> "CenteredIsotonic":
        self.knots_x_, self.knots_y_ = cir_knots(p, y)
        return self


def cir_knots(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knots (increasing x, non-decreasing value) of the centred isotonic regression of ``y`` on ``p``."""
    from scipy.optimize import isotonic_regression

    values, inverse, counts = np.unique(p, return_inverse=True, return_counts=True)
    weight = counts.astype(np.float64)
    fit = isotonic_regression(np.bincount(inverse, y, minlength=values.size) / weight, weights=weight).x
    fit = np.clip(fit, 0.0, 1.0)
    starts = np.flatnonzero(np.concatenate([[True], fit[1:] != fit[:-1]]))
    ends = np.append(starts[1:], values.size) - 1
    level = fit[starts]
    centre = np.add.reduceat(weight * values, starts) / np.add.reduceat(weight, starts)
    flat = (level == 0.0) | (level == 1.0)
    x = np.concatenate([centre[~flat], values[starts[flat]], values[ends[flat]], values[[0, -1]]])
    v = np.concatenate([level[~flat], level[flat], level[flat], level[[0, -1]]])
    x, first = np.unique(x, return_index=True)  # a block of one value: its centre is its end
    return x, v[first]


def pav_knots(x: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Knots (x, fitted value) of the weighted least-squares non-decreasing fit of ``target`` on ``x``,
    clipped to [0, 1]: equal x are pooled first (weighted mean target), then PAV; only the two ends of each
    constant segment are kept."""
    from scipy.optimize import isotonic_regression

    weight = np.ones_like(target, dtype=np.float64) if weight is None else weight
    values, inverse = np.unique(x, return_inverse=True)
    pooled_weight = np.bincount(inverse, weight)
    pooled_target = np.bincount(inverse, weight * target) / pooled_weight
    fit = np.clip(isotonic_regression(pooled_target, weights=pooled_weight).x, 0.0, 1.0)
    keep = np.ones(fit.size, dtype=bool)
    keep[1:-1] = (fit[1:-1] != fit[:-2]) | (fit[1:-1] != fit[2:])
    return values[keep], fit[keep]
