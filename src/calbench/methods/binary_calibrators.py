"""Calibrators built from the binary maps of :mod:`calbench.maps1d`.

* One-vs-rest (Dirichlet paper §4.1; docs/methods_nonparametric.md): class j's map is fitted on
  (p̂_j, 1[y = j]) and the calibrated columns are divided by their sum (:class:`OneVsRest`):
  ``platt`` (σ(a·logit p + b)), ``beta`` (Kull et al. 2017 "abm"), ``quad_scaling`` (σ(a + b·ℓ + c·ℓ²),
  ℓ = logit p: probmetrics' quadratic scaling), ``pl_ovr`` and ``pl3_ovr`` (the fit-on-test paper's PL / PL3
  with CV-chosen pieces and fold-model averaging).
* Confidence (fit-on-test paper §3.3 (ii), top-label): one map fitted on (max p̂, 1[argmax p̂ = y]);
  the top probability becomes ĉ(max p̂) and the other classes share 1 − ĉ(max p̂) in proportion
  to their original probabilities (computed as the softmax of their logits, so that the shares stay
  exact when max p̂ rounds to 1): ``pl_conf`` and ``pl3_conf``.
  The predicted class can change when ĉ(max p̂) falls below another class's rescaled probability.
PL and PL3 take ``loss`` "ce" (the paper's headline) or "mse", and the CV settings ``n_folds`` (10)
and ``max_pieces`` (default: the paper's min(n // 200, 15) + 1).
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from calbench.fitted_state import Instance, ListOf
from calbench.maps1d import Beta, PiecewiseLinearCV, Platt, Quadratic
from calbench.maps1d.one_vs_rest import fit_per_class, predict_per_class
from calbench.maps1d.piecewise import LOSSES
from calbench.methods.base import Calibrator, MissingClass
from calbench.methods.constraints import Interval, Options
from calbench.methods.registry import register
from calbench.scores import Scores


def with_confidence(logits: np.ndarray, new_conf: np.ndarray) -> np.ndarray:
    """Probabilities whose top class (the argmax of ``logits``) gets ``new_conf``; the other classes share
    1 − ``new_conf`` in proportion to their original probabilities. Those proportions p_j / (1 − p_top) are
    the softmax of the other classes' own logits: computing 1 − p_top by subtraction cancels to 0 or a few
    ulps when p_top ≈ 1, which would make the other classes' probabilities 0."""
    rows = np.arange(logits.shape[0])
    top = logits.argmax(axis=1)
    others = logits.copy()
    others[rows, top] = -np.inf
    out = softmax(others, axis=1) * (1.0 - new_conf)[:, None]
    out[rows, top] = new_conf
    return out


class OneVsRest(Calibrator):
    """Base of the one-vs-rest calibrators (:mod:`calbench.maps1d.one_vs_rest`): a subclass defines the binary map
    of one column by :meth:`fit_binary` and :meth:`apply_binary`, which the top-versus-all forms
    (:class:`calbench.methods.tva.BinaryTopVersusAll`) apply to the confidence alone."""

    #: A class without calibration examples gets a map fitted on all-zero targets: refused.
    on_missing_class = MissingClass.REFUSE

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        self.binary_maps_ = fit_per_class(self.fit_binary, scores.probs, y)

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return predict_per_class(self.apply_binary, self.binary_maps_, scores.probs)

    def fit_binary(self, p: np.ndarray, hits: np.ndarray):
        """The fitted map of one class (any object) from probabilities ``p`` [N] and binary targets ``hits`` [N]."""
        raise NotImplementedError

    def apply_binary(self, fitted, p: np.ndarray) -> np.ndarray:
        """The map ``fitted`` (from :meth:`fit_binary`) evaluated at the probabilities ``p`` [N]."""
        raise NotImplementedError


class _MapOneVsRest(OneVsRest):
    _torch_mirrors = {**OneVsRest._torch_mirrors, "_new_map": "torch_stage", "apply_binary": "torch_stage"}

    def _new_map(self):
        raise NotImplementedError

    def fit_binary(self, p, hits):
        return self._new_map().fit(p, hits)

    def apply_binary(self, fitted, p):
        return fitted.predict(p)

    def fitted_summary(self) -> dict:
        return {"classes": [m.summary() for m in self.binary_maps_]}


@register("platt")
class PlattOneVsRest(_MapOneVsRest):
    """Platt scaling per class on the logit of p̂_j, renormalised."""

    _fitted_state = {"binary_maps_": ListOf(Instance(Platt), "C")}

    def _new_map(self):
        return Platt()

    def torch_stage(self):
        from calbench.methods.torch_stages import OneVsRestMaps

        a = [m.a_ for m in self.binary_maps_]
        return OneVsRestMaps(a, a, [m.b_ for m in self.binary_maps_])


@register("beta")
class BetaOneVsRest(_MapOneVsRest):
    """Beta calibration per class (a, b ≥ 0), renormalised."""

    _fitted_state = {"binary_maps_": ListOf(Instance(Beta), "C")}

    def _new_map(self):
        return Beta()

    def torch_stage(self):
        from calbench.methods.torch_stages import OneVsRestMaps

        maps = self.binary_maps_
        return OneVsRestMaps([m.a_ for m in maps], [m.b_ for m in maps], [m.c_ for m in maps])


@register("quad_scaling")
class QuadraticScalingOneVsRest(_MapOneVsRest):
    """Quadratic scaling per class, σ(a + b·ℓ + c·ℓ²) on ℓ = logit p̂_j (probmetrics' ``quadratic-scaling``, one
    binary map per class as its one-vs-rest wrapper), renormalised; ridge strengths ``lambda_intercept`` on a
    and ``lambda_quadratic`` on c (0: unregularised, probmetrics' default)."""

    _fitted_state = {"binary_maps_": ListOf(Instance(Quadratic), "C")}

    _parameter_constraints = {"lambda_intercept": [Interval("real", 0)], "lambda_quadratic": [Interval("real", 0)]}

    def __init__(self, *, lambda_intercept: float = 0.0, lambda_quadratic: float = 0.0):
        self.lambda_intercept, self.lambda_quadratic = lambda_intercept, lambda_quadratic

    def _new_map(self):
        return Quadratic(self.lambda_intercept, self.lambda_quadratic)

    def torch_stage(self):
        from calbench.maps1d.maps import LOG_CLIP
        from calbench.methods.torch_stages import OneVsRestQuadratic

        maps = self.binary_maps_
        return OneVsRestQuadratic([m.a_ for m in maps], [m.b_ for m in maps], [m.c_ for m in maps], LOG_CLIP)


class _PiecewiseMixin:
    logit_space = False
    _parameter_constraints = {"loss": [Options(*LOSSES)], "seed": [Interval("int", 0)],
                              "n_folds": [Interval("int", 1)], "max_pieces": [None, Interval("int", 1)]}

    def _new_map(self):
        return PiecewiseLinearCV(logit_space=self.logit_space, loss=self.loss, seed=self.seed, n_folds=self.n_folds,
                                 max_pieces=self.max_pieces)


@register("pl_ovr")
class PLOneVsRest(_PiecewiseMixin, _MapOneVsRest):
    """PL (fit-on-test §4.4) per class, renormalised."""

    _fitted_state = {"binary_maps_": ListOf(Instance(PiecewiseLinearCV), "C")}

    def __init__(self, *, loss: str = "ce", seed: int = 0, n_folds: int = 10, max_pieces: int | None = None):
        self.loss, self.seed, self.n_folds, self.max_pieces = loss, seed, n_folds, max_pieces


@register("pl3_ovr")
class PL3OneVsRest(PLOneVsRest):
    """PL3 (piecewise linear in logit–logit space) per class, renormalised."""

    logit_space = True


@register("pl_conf")
class PLConfidence(_PiecewiseMixin, Calibrator):
    """PL fitted on the confidence (top-label) task; the other classes are rescaled."""

    _fitted_state = {"map_": Instance(PiecewiseLinearCV)}

    def __init__(self, *, loss: str = "ce", seed: int = 0, n_folds: int = 10, max_pieces: int | None = None):
        self.loss, self.seed, self.n_folds, self.max_pieces = loss, seed, n_folds, max_pieces

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        probs = scores.probs
        self.map_ = self._new_map().fit(probs.max(axis=1), (probs.argmax(axis=1) == y).astype(np.float64))

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return with_confidence(scores.logits, self.map_.predict(scores.probs.max(axis=1)))

    def fitted_summary(self) -> dict:
        return self.map_.summary()


@register("pl3_conf")
class PL3Confidence(PLConfidence):
    """PL3 fitted on the confidence (top-label) task; the other classes are rescaled."""

    logit_space = True
