"""The affine-softmax calibrators σ(W x + b) (:class:`AffineSoftmax`, the base of vector/matrix scaling and
Dirichlet calibration) and the paper grids of their penalties; the solver is :mod:`calbench.solvers.affine_softmax_fit`
(docs/methods_parametric.md)."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import log_softmax

from calbench.convergence import NoFiniteOptimumWarning, NotConvergedWarning
from calbench.fitted_state import Array, Record, Scalar
from calbench.methods.base import Calibrator, clone
from calbench.methods.constraints import Interval, Options
from calbench.scores import Scores
from calbench.solvers.affine_objective import affine_logits, affine_probs
from calbench.solvers.affine_path_state import PathState
from calbench.solvers.affine_penalty import REG_SCALES, Penalty, check_reg_scale, odir_penalty
from calbench.solvers.affine_softmax_fit import LBFGS_ITERS_BEFORE_NEWTON_CG, NEWTON_MAX_PARAMS, fit_affine_softmax
from calbench.solvers.temperature_fit import fit_inverse_temperature
from calbench.solvers.warm_start_path import PathPredictor, warm_start_order

#: A fit whose training objective (mean log-loss plus penalty) ends below this has separated its calibration data:
#: no finite minimiser exists there (the digits ResNet's 397 calibration rows under ODIR: 1.5e-10, test NLL 3.7
#: against the uncalibrated 0.066), and the solver stops only because the decrease has become tiny.
SEPARABLE_LOSS = 1e-6
#: Rows per block of :func:`separated_classes` (bounds its copy of the features).
SEPARATION_BLOCK_ROWS = 4096
#: ``shrink_to`` of the penalised maps (ms_odir, dir_odir, dir_l2): "temperature" centres the penalty at the
#: temperature-scaling map W = βI, b = 0 (β fitted on the same rows), so that a strong penalty gives temperature
#: scaling; "paper" is the Dirichlet paper's penalty (ODIR: diagonal free; L2: around W = 0, the uniform map).
SHRINK_TARGETS = ("temperature", "paper")


def separated_classes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The classes j present in ``y`` whose own feature column x[:, j] separates their rows from all others
    (every row of class j above, or below, every other row's x[:, j]). Where W's diagonal and b are unpenalised
    (vs, ms, dir, dir_diag), raising w_jj and moving b_j to keep the gap's threshold lowers every row's loss, so
    the log-loss has no finite minimiser even where other classes overlap (the default run's digits ViT, seed-0
    split: class 0, vs weight 96, intercept −419, test NLL 0.54 against 0.17 uncalibrated)."""
    n, k = x.shape
    own = x[np.arange(n), y]
    own_low, own_high = np.full(k, np.inf), np.full(k, -np.inf)
    np.minimum.at(own_low, y, own)
    np.maximum.at(own_high, y, own)
    other_low, other_high = np.full(k, np.inf), np.full(k, -np.inf)
    for start in range(0, n, SEPARATION_BLOCK_ROWS):
        block, labels = x[start:start + SEPARATION_BLOCK_ROWS].copy(), y[start:start + SEPARATION_BLOCK_ROWS]
        rows = np.arange(labels.size)
        block[rows, labels] = np.inf
        np.minimum(other_low, block.min(axis=0), out=other_low)
        block[rows, labels] = -np.inf
        np.maximum(other_high, block.max(axis=0), out=other_high)
    present = np.bincount(y, minlength=k) > 0
    return np.flatnonzero(present & ((own_low > other_high) | (own_high < other_low)))


#: The solver's report of a fit (:meth:`AffineSoftmax.fitted_summary` shows it).
FIT_INFO = Record({"iterations": Scalar(int), "converged": Scalar(bool), "loss": Scalar(float), "solver": Scalar(str)})

class AffineSoftmax(Calibrator):
    """Base class: σ(W x + b) with x the logits (``uses_log_probs = False``) or the clipped ln q̂.

    Subclasses set ``diagonal`` (W restricted to its diagonal) and ``uses_log_probs``, take their
    hyperparameters in ``__init__`` (always ``max_iter`` and ``tol``, plus ``eps`` on log-probabilities)
    and override :meth:`penalty`. Fitted attributes: ``weights_`` [k, k], ``intercept_`` [k], ``fit_info_``
    (and its ``n_iter_``, scikit-learn's name for the solver's iteration count).
    """

    #: The map's parameters (W is C × C also where it is diagonal), the L2 penalty's centre when it shrinks towards
    #: the temperature-scaled diagonal (``shrink_to``), and the solver's report.
    _fitted_state = {"weights_": Array(float, ("C", "C")), "intercept_": Array(float, ("C",)),
                     "penalty_centre_": Scalar(float, none=True), "fit_info_": FIT_INFO}

    diagonal: bool = False
    uses_log_probs: bool = False
    #: L-BFGS iterations before truncated Newton finishes a full map of 17–200 classes (fit_affine_softmax).
    newton_cg_after: int = LBFGS_ITERS_BEFORE_NEWTON_CG
    #: Full maps of this many classes or more run truncated Newton with the large-map preconditioner
    #: (fit_affine_softmax; None: its LARGE_MAP_CLASSES).
    large_map_classes: int | None = None
    # λ only: the μ list runs from an intercept all but unpenalised (μ_code = 10⁻⁵ at 10 classes) to one pinned
    # at 0 (10⁶), so an end of it is not a sign of the optimum beyond (CIFAR-10 VGG-19 ms_odir: lowest at the
    # weakest μ, 0.4 % below the next, five decades away)
    open_ended_params = ("reg_lambda",)
    _parameter_constraints = {"max_iter": [Interval("int", 1)], "tol": [Interval("real", 0)],
                              "eps": [Interval("real", 0, 1, closed="neither")], "reg_lambda": [Interval("real", 0)],
                              "reg_mu": [Interval("real", 0)], "reg_scale": [Options(*REG_SCALES)],
                              "shrink_to": [Options(*SHRINK_TARGETS)]}
    _torch_mirrors = {**Calibrator._torch_mirrors, "output_logits": "torch_stage", "features": "torch_features"}

    def penalty(self, k: int) -> Penalty:
        return Penalty()

    def _penalty_centre(self, scores: Scores, y: np.ndarray) -> float | None:
        """β of temperature scaling fitted on these rows where the penalty shrinks towards it
        (``shrink_to="temperature"``), else None (the fit's ``penalty_centre_``)."""
        if getattr(self, "shrink_to", "paper") != "temperature":
            return None
        return fit_inverse_temperature(scores.logits, y)

    def features(self, scores: Scores) -> np.ndarray:
        """Logits, or ln q̂ clipped below at ln(eps) (Dirichlet paper §3 clips q̂ before the log; we use
        :data:`calbench.scores.PROB_EPS` = 1e-12 by default, the paper 2.2e-308, the authors' Keras code 2.2e-16)."""
        if not self.uses_log_probs:
            return scores.logits
        if not 0 < self.eps < 1:
            raise ValueError(f"eps: expected the log-probability clip in (0, 1), got {self.eps!r}")
        # Scores.log_probs, but not cached on ``scores``: the fit holds one n × k copy, not two (a fold's
        # 20,000 × 1,000 rows: 160 MB each)
        log_probs = log_softmax(scores.logits, axis=1)
        return np.maximum(log_probs, np.log(self.eps), out=log_probs)

    def torch_features(self):
        """:meth:`features` as a torch module."""
        from calbench.methods.torch_stages import ClippedLogProbs, Logits

        return ClippedLogProbs(self.eps) if self.uses_log_probs else Logits()

    def torch_stage(self):
        from calbench.methods.torch_stages import Affine

        return Affine(self.torch_features(), self.weights_, self.intercept_, self.diagonal)

    def _solve(self, x, y, init=None, path=None):
        penalty = self.penalty(x.shape[1])
        weights, intercept, info = fit_affine_softmax(x, y, penalty, self.diagonal, init=init,
                                                      max_iter=self.max_iter, tol=self.tol, path=path,
                                                      newton_cg_after=self.newton_cg_after,
                                                      large_map_classes=self.large_map_classes)
        class_scales_free = penalty.diag == 0 and penalty.bias == 0  # W's diagonal and b (separated_classes)
        if not info["converged"]:
            warnings.warn(self._not_converged_message(info), NotConvergedWarning, stacklevel=2)
        elif info["loss"] < SEPARABLE_LOSS:
            warnings.warn(self._separable_message(info), NoFiniteOptimumWarning, stacklevel=2)
        elif class_scales_free and (classes := separated_classes(x, y)).size:
            warnings.warn(self._separated_classes_message(classes), NoFiniteOptimumWarning, stacklevel=2)
        return weights, intercept, info

    def _diagonal_start(self, x, y):
        """(W, b) of the diagonal map under this penalty (the limit of a strong off-diagonal penalty): a warm
        start for a grid path's first full fit where Newton finishes the diagonal fit (up to 150 classes; one
        CIFAR-100 fold, λ_code = μ_code = 10⁶: 26 full L-BFGS iterations from the identity, 0.50 CPU-s; 12
        diagonal and 2 full ones from this, 0.22 CPU-s). Full maps of
        :data:`~calbench.solvers.affine_softmax_fit.LARGE_MAP_CLASSES` classes or more start from the diagonal
        map inside :func:`fit_affine_softmax` (truncated Newton fits it there: at 1,000 classes × 20,000 rows
        of ln q̂, 47 iterations and 32 CPU-s, where L-BFGS alone had not finished in 1,000, 255 CPU-s)."""
        return fit_affine_softmax(x, y, self.penalty(x.shape[1]), True, max_iter=self.max_iter, tol=self.tol)[:2]

    #: The likely cause and fix in :meth:`_not_converged_message`: a weak penalty leaves the log-loss without a finite
    #: minimiser on separable data, so the fit runs to ``max_iter`` and the weights grow without bound.
    not_converged_advice = ("Where the penalty is weak the weights keep growing and the map overfits: use a stronger "
                            "penalty (larger reg_lambda) or the default grid; otherwise raise max_iter.")

    def _not_converged_message(self, info: dict) -> str:
        """Names the method, its settings and :attr:`not_converged_advice`."""
        method, settings = self._described()
        return (f"{method}: the fit did not converge in max_iter={self.max_iter} iterations{settings} (training "
                f"loss {info['loss']:.4g}); the result is the last iterate, not the optimum. "
                f"{self.not_converged_advice}")

    def _described(self) -> tuple[str, str]:
        """The method's name and " at reg_…=…" (its penalty settings), for the warnings."""
        settings = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if k.startswith("reg_"))
        return getattr(self, "method_name", type(self).__name__), f" at {settings}" if settings else ""

    def _separable_message(self, info: dict) -> str:
        """Names the method, its settings and the fix where the objective has no finite minimiser."""
        method, settings = self._described()
        return (f"{method}: the training objective fell to {info['loss']:.3g}{settings}: the calibration data "
                f"are separable by this map, so its unpenalised parameters (ODIR: the diagonal of W; vs/ms: all) "
                f"grow without bound and the fitted map is overconfident rather than calibrated. Use more "
                f"calibration data, or a method that penalises every parameter (dir_l2) or has one (ts).")

    def _separated_classes_message(self, classes: np.ndarray) -> str:
        """Names the method, the separated classes and the fix (:func:`separated_classes`)."""
        method, _ = self._described()
        feature = "log-probability" if self.uses_log_probs else "logit"
        return (f"{method}: the calibration rows of class(es) {classes.tolist()} are separated from all others by "
                f"their own {feature}, so those classes' scale and intercept grow without bound (the fit stopped "
                f"at an arbitrary, overconfident point: test rows of other classes near the gap get them with "
                f"probability ≈ 1). Use more calibration data, or a method that penalises the diagonal or the "
                f"intercept (ms_odir, dir_odir, dir_l2) or has one parameter (ts).")

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        self.penalty_centre_ = self._penalty_centre(scores, y)
        self._set_fitted(*self._solve(self.features(scores), y), scores.num_classes)

    @property
    def n_iter_(self) -> int:
        return self.fit_info_["iterations"]

    def _set_fitted(self, weights, intercept, info, num_classes):
        self.weights_, self.intercept_, self.fit_info_, self.num_classes_ = weights, intercept, info, num_classes
        return self

    def output_logits(self, scores: Scores) -> np.ndarray:
        return affine_logits(self.features(scores), self.weights_, self.intercept_, self.diagonal)

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return affine_probs(self.features(scores), self.weights_, self.intercept_, self.diagonal)

    def transform(self, scores) -> Scores:
        scores = self._check_scores(scores)
        return scores.with_logits(self.output_logits(scores))

    def predict_grid(self, points: list[dict], train: Scores, y_train: np.ndarray, val: Scores, start=()):
        """Fit every grid point on ``train`` along :func:`warm_start_order`, each warm-started from a
        prediction built from the solutions already found (:class:`PathPredictor`) and sharing the solver's
        work on ``train`` (a :class:`~calbench.solvers.affine_path_state.PathState`); yield
        (point index, probabilities on ``val``, the fitted model) in that order. ``start``: models fitted on
        the same rows, in path order, that the path continues from (a grid's extension past its end)."""
        path, state = PathPredictor(), PathState()
        for model in start:
            path.add(model.reg_lambda, getattr(model, "reg_mu", 0.0), (model.weights_, model.intercept_))
        centre = self._penalty_centre(train, y_train)
        features = self.features(train)
        for i in warm_start_order(points):
            est = clone(self).set_params(**points[i])
            est.penalty_centre_ = centre
            lam, mu = points[i].get("reg_lambda", 0.0), points[i].get("reg_mu", 0.0)
            init = path.predict(lam, mu)
            if init is None and not self.diagonal and 2 * features.shape[1] <= NEWTON_MAX_PARAMS:
                init = est._diagonal_start(features, y_train)  # the path's first, strongest point
            weights, intercept, info = est._solve(features, y_train, init=init, path=state)
            path.add(lam, mu, (weights, intercept))
            est._set_fitted(weights, intercept, info, train.num_classes)
            yield i, est.predict_proba(val), est

    def fitted_summary(self) -> dict:
        k = self.weights_.shape[0]
        off = self.weights_ - np.diag(np.diagonal(self.weights_))
        summary = {**self.fit_info_, "diag_mean": float(np.mean(np.diagonal(self.weights_))),
                   "offdiag_abs_max": float(np.max(np.abs(off))),
                   "intercept_abs_max": float(np.max(np.abs(self.intercept_)))}
        if getattr(self, "penalty_centre_", None) is not None:
            summary["penalty_centre"] = self.penalty_centre_
        if k <= 10:
            summary |= {"weights": self.weights_.tolist(), "intercept": self.intercept_.tolist()}
        return summary


def authors_odir_grid(num_classes: int, reg_scale: str = "paper", with_mu: bool = True) -> dict:
    """The (λ, μ) grid of the Dirichlet paper's deep-network runs (§4.2; the authors' tune_cal_odir.py;
    docs/methods_parametric.md).

    Code scale: λ ∈ {0.25, 0.5, 1}·10^i, μ ∈ 10^i for i = s … 6, with s = −5 for 10 classes and s = −2 for
    100 classes (we use s = −2 from 100 classes on, −5 below): 36 × 12 and 27 × 9 points. ``reg_scale="paper"``
    converts the values with λ_paper = k(k−1)·λ_code, μ_paper = k·μ_code. ``with_mu=False`` gives the Dir-L2
    grid (``--no_mus``: one λ on all weights and the intercept; λ_paper = k(k+1)·λ_code).
    """
    check_reg_scale(reg_scale)
    k = num_classes
    start = -2 if k >= 100 else -5
    powers = [10.0**i for i in range(start, 7)]
    lams = sorted(m * p for p in powers for m in (1.0, 0.25, 0.5))
    if not with_mu:
        factor = k * (k + 1) if reg_scale == "paper" else 1.0
        return {"reg_lambda": [factor * v for v in lams], "reg_scale": [reg_scale]}
    lam_factor, mu_factor = (k * (k - 1), k) if reg_scale == "paper" else (1.0, 1.0)
    return {"reg_lambda": [lam_factor * v for v in lams], "reg_mu": [mu_factor * v for v in powers],
            "reg_scale": [reg_scale]}


def _grid_start(num_classes: int, odir: bool) -> int:
    """The authors' lowest power s: −5 below 100 classes, −2 from 100 (tune_cal_odir.py). From 1,000 classes
    the ODIR grid starts at +1, continuing their 3 decades per decade of k (they stopped at 100); the L2
    grid keeps −2, since a strong L2 penalty also shrinks the diagonal and so the whole map to uniform."""
    return -5 if num_classes < 100 else -2 if num_classes < 1000 or not odir else 1


def _mu_powers(num_classes: int) -> list[int]:
    """The powers of the default μ list: the range's ends and middle, s, round((s + 6)/2) and 6, below 1,000
    classes; from 1,000 classes s = 1 alone. There μ_code ≥ 10 gives each intercept a penalty curvature 2μ ≥ 20
    against the mean log-loss's at most 1/4 (mean pₐ(1 − pₐ), about 1/k on balanced classes), so every μ of the
    range holds bₐ within |∂loss/∂bₐ|/(2μ) of 0, and the three values fit the same map. One fold of the
    1,000-class synthetic task (20,000 + 5,000 rows): validation log-loss equal to 2e-7 across them at every λ
    for ``ms_odir``; for ``dir_odir`` to 2e-5 at λ_code ≥ 10² and 1.4e-4 at 10, where λ_code = 10 and 10²
    differ by 1.3e-2."""
    start = _grid_start(num_classes, odir=True)
    return [start] if num_classes >= 1000 else [start, round((start + 6) / 2), 6]


def coarse_odir_grid(num_classes: int, reg_scale: str = "paper", with_mu: bool = True) -> dict:
    """The default (λ, μ) grid: the authors' range (:func:`authors_odir_grid`) at one λ per decade and, below
    1,000 classes, three μ (the range's ends and middle). λ_code = 10^i, i = s … 6; μ_code = 10^i
    (:func:`_mu_powers`): 12 × 3 points at 10 classes (authors: 36 × 12), 9 × 3 at 100 (27 × 9), 6 × 1 from
    1,000 classes (:func:`_grid_start`). ``with_mu=False``: the
    Dir-L2 λ list (9 values at 100 classes, authors' 27).

    Why: on CIFAR-100 ResNet-20 (seed-0 split, 5-fold CV) the authors' grid's CV log-loss changes by < 4e-4
    across all 9 μ at every λ and by < 0.01 between neighbouring λ multiples (0.25, 0.5, 1)·10^i near the
    optimum, and is flat (± 1e-4) for λ_code ≥ 10³, where W is diagonal; the coarse grid picks λ_code = 100
    there, as the full one does, at a ninth of the fits."""
    check_reg_scale(reg_scale)
    k = num_classes
    lams = [10.0**i for i in range(_grid_start(k, odir=with_mu), 7)]
    if not with_mu:
        factor = k * (k + 1) if reg_scale == "paper" else 1.0
        return {"reg_lambda": [factor * v for v in lams], "reg_scale": [reg_scale]}
    mus = [10.0**i for i in _mu_powers(k)]
    lam_factor, mu_factor = (k * (k - 1), k) if reg_scale == "paper" else (1.0, 1.0)
    return {"reg_lambda": [lam_factor * v for v in lams], "reg_mu": [mu_factor * v for v in mus],
            "reg_scale": [reg_scale]}


def odir_default_grid(num_classes: int, reg_scale: str = "paper") -> dict:
    """Default grid of ``ms_odir``/``dir_odir``: :func:`coarse_odir_grid` in the estimator's ``reg_scale``
    (which :func:`~calbench.methods.tuning.without_fixed` passes in when the user sets it)."""
    grid = coarse_odir_grid(num_classes, reg_scale)
    del grid["reg_scale"]
    return grid


def l2_default_grid(num_classes: int, reg_scale: str = "paper") -> dict:
    """Default grid of ``dir_l2``, as :func:`odir_default_grid`."""
    grid = coarse_odir_grid(num_classes, reg_scale, with_mu=False)
    del grid["reg_scale"]
    return grid


class ODIRTuned:
    """Mixin of ``ms_odir`` and ``dir_odir``: the ODIR penalty of :func:`odir_penalty` from the estimator's
    ``reg_lambda``, ``reg_mu`` and ``reg_scale``, tuned over :func:`coarse_odir_grid` by 5-fold CV with the
    fold models averaged (Dirichlet paper §4.2). List it before :class:`AffineSoftmax`."""

    default_grid = staticmethod(odir_default_grid)
    default_cv = {"folds": 5, "ensemble": True}

    def penalty(self, k: int) -> Penalty:
        return odir_penalty(self.reg_lambda, self.reg_mu, k, self.reg_scale, self.penalty_centre_)
