"""Label-shift adaptation of calibrated probabilities (docs/label_shift.md): class weights w = π_t/π_s estimated
without labels, and the probabilities re-weighted by them.

Under label shift p_t(x | y) = p_s(x | y), so a calibrated source posterior becomes the target posterior by Bayes'
rule, p_t(y | x) ∝ p_s(y | x) w(y), w = π_t/π_s (Saerens, Latinne & Decaestecker 2002, Eq. 2.4; :func:`reweight`).
The weights come from (the estimators of Alexandari, Kundaje & Shrikumar 2020, §4 and Tables 1–2):

* ``em``: the EM of Saerens et al. (2002, Eqs. 2.9–2.10), maximum likelihood of π_t on the unlabelled test
  outputs; w = π_t/π_s with π_s the mean calibrated probability on the calibration split (Alexandari et al.: then
  EM returns π_s where nothing has shifted, however the calibrator errs on the label frequencies);
* ``bbse``: black-box shift estimation with hard predictions (Lipton, Wang & Smola 2018): w = Ĉ⁻¹ μ̂, Ĉ the joint
  frequencies of (hard prediction, label) on the calibration split, μ̂ the shifted set's frequencies of hard
  predictions;
* ``bbse_soft``: the same with the calibrated probabilities in place of the hard predictions (Alexandari et al.
  2020, §4: Ĉ[i, j] = mean over calibration rows of p_i(x)·[y = j], μ̂ the mean calibrated probability);
* ``rlls`` and ``rlls_hard``: regularized learning under label shift (Azizzadenesheli, Liu, Yang & Anandkumar
  2019, Eq. 4), soft (calibrated probabilities, as Alexandari et al. run it on calibrated outputs) and hard
  (:mod:`calbench.metrics.rlls`);
* ``oracle``: the shifted set's true label frequencies over EM's π_s (a bound: adaptation with the priors known).

**Floor.** An estimated weight below :data:`WEIGHT_FLOOR` is raised to it inside the adaptation (BBSE's and RLLS's
weights can be negative or 0, EM's priors drift towards 0): a class estimated absent keeps a thousandth of its
odds, so that a row of that class costs a finite log-loss, not the log-loss clip. ``floor_share.<estimator>``
reports the share of rows whose class is at the floor, beside the scores.

**Collapse** (:func:`collapsed`): an adaptation that puts more than :data:`COLLAPSE_MASS` of the estimated prior on
classes that the unadapted predictions rarely choose (for fewer than :data:`COLLAPSE_RARE`/k of the rows), or that
predicts one class for at least :data:`COLLAPSE_ONE_CLASS` of the rows where the unadapted predictions did not.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from calbench.convergence import NotConvergedWarning
from calbench.metrics.rlls import rlls_weights
from calbench.metrics.row_counts import row_sums

#: EM stops when no floored class weight max(π/π_s, WEIGHT_FLOOR) changes by more than EM_TOL relative to its
#: value in an iteration (the adapted probabilities are p ⊙ w renormalised, so they then change by less than about
#: 2·EM_TOL relative), and warns after EM_MAX_ITER iterations (the cap), returning the last iterate.
#: tests/unit/test_label_shift_reference.py checks that tightening EM_TOL tenfold moves nll.em and acc.em by < 1e-4 on
#: the shared CIFAR logits.
EM_TOL = 1e-6
EM_MAX_ITER = 10_000
#: The smallest weight π_t/π_s an estimated adaptation applies (see the module docstring).
WEIGHT_FLOOR = 1e-3
#: Collapse: a class is rarely chosen when the unadapted predictions choose it for fewer than COLLAPSE_RARE / k of
#: the rows (a tenth of the uniform share); more than COLLAPSE_MASS of the estimated prior on such classes, or one
#: class predicted for COLLAPSE_ONE_CLASS of the rows after adaptation (and not before), flags the cell.
COLLAPSE_RARE = 0.1
COLLAPSE_MASS = 0.5
COLLAPSE_ONE_CLASS = 0.99
ESTIMATORS = ("em", "bbse", "bbse_soft", "rlls", "rlls_hard", "oracle")
#: The estimators whose weights are estimated (floored, collapse-checked): all but the oracle.
ESTIMATED = ESTIMATORS[:-1]


@dataclass(frozen=True)
class LabelShiftInputs:
    """What adaptation reads beside a shifted set's calibrated probabilities, from the calibrated outputs on the
    calibration split: their mean ``source_priors`` (π_s of EM), the joint (hard prediction, label) frequencies
    ``confusion`` [pred, label] (BBSE, RLLS hard), the joint (probability, label) means ``soft_confusion`` (BBSE-
    and RLLS soft), the number of calibration rows ``cal_rows`` (RLLS's regulariser); and the shifted set's true
    priors (the oracle and the error metrics)."""

    source_priors: np.ndarray
    confusion: np.ndarray
    true_priors: np.ndarray | None
    soft_confusion: np.ndarray | None = None
    cal_rows: int = 0

    @classmethod
    def from_calibration(cls, cal_probs: np.ndarray, cal_labels: np.ndarray, true_priors: np.ndarray | None):
        n, k = cal_probs.shape
        onehot = np.eye(k)[cal_labels]
        hard = np.eye(k)[np.argmax(cal_probs, axis=1)]
        return cls(cal_probs.mean(axis=0), hard.T @ onehot / n, true_priors, cal_probs.T @ onehot / n, n)

    @property
    def label_frequencies(self) -> np.ndarray:
        """The calibration split's label frequencies (the source priors of BBSE's and RLLS's weights)."""
        return self.confusion.sum(axis=0)

    def ideal_weights(self) -> np.ndarray:
        """The true weights, the set's priors over the calibration labels' frequencies (Alexandari et al.'s
        ``ideal_shift_weights``); NaN for a class absent from the calibration labels."""
        freq = self.label_frequencies
        return np.divide(self.true_priors, freq, out=np.full_like(freq, np.nan), where=freq > 0)


def reweight(probs: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """p ⊙ ratio, each row renormalised (Saerens et al. 2002, Eq. 2.4); a row that the ratio zeroes keeps p.
    ``ratio`` [k], or [n, k]: a ratio per row."""
    out = probs * ratio
    sums = out.sum(axis=1, keepdims=True)
    empty = sums[:, 0] <= 0
    if empty.any():
        out[empty], sums[empty] = probs[empty], 1.0
    out /= sums
    return out


def em_priors(probs: np.ndarray, source_priors: np.ndarray, tol: float | None = None,
              max_iter: int = EM_MAX_ITER, weights: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Saerens et al. (2002) EM: π ← mean over rows of p ⊙ (π / π_s) renormalised, from π = π_s, until no floored
    weight max(π/π_s, :data:`WEIGHT_FLOOR`) changes by more than ``tol`` (default :data:`EM_TOL`) relative to its
    value in an EM step; warns (:class:`NotConvergedWarning`) after ``max_iter`` EM steps. Returns (π_t, EM steps).
    With s = p / π_s, a step is πⱼ ← πⱼ · mean_i(s_ij / (s_i · π)), one pass over the rows of non-zero weight.

    The steps are accelerated by SQUAREM (Varadhan & Roland 2008, Scand. J. Statist. 35, scheme S3): from π₀, two
    steps π₁, π₂, r = π₁ − π₀, v = π₂ − π₁ − r, α = min(−‖r‖/‖v‖, −1), π' = π₀ − 2αr + α²v, then one step from π'.
    It converges to the same fixed point in far fewer steps where a prior decays slowly towards 0 (EM's linear rate
    near 1); where π' leaves the simplex or lowers the log-likelihood, the cycle keeps the plain step π₂ (α = −1),
    so every cycle is at least as good as two EM steps. ``weights`` [R, n] (bootstrap row weights) runs R weighted
    EMs and returns [R, k], each from π_s and stopped by the same criterion; the steps count of the longest. Every
    EM runs in one compiled loop over its rows of non-zero weight, gathered once
    (:func:`calbench.kernels.label_shift.em_redraws`)."""
    from calbench.kernels.label_shift import em_redraws  # lazy: numba only where EM runs

    tol = EM_TOL if tol is None else tol
    single = weights is None
    weights = np.ones((1, probs.shape[0])) if single else np.asarray(weights, dtype=np.float64)
    source = np.asarray(source_priors, dtype=np.float64)
    safe = np.where(source > 0, source, 1.0)
    indptr, cols, vals = redraw_rows(weights)
    priors, steps, changes = np.empty((weights.shape[0], source.size)), np.empty(weights.shape[0], np.int64), \
        np.empty(weights.shape[0])
    em_redraws(np.ascontiguousarray(probs / safe, dtype=np.float64), safe, indptr, cols, vals, row_sums(weights),
               source, WEIGHT_FLOOR, tol, max_iter, priors, steps, changes)
    unconverged = changes > tol
    if unconverged.any():
        warnings.warn(f"label-shift EM: the weights still changed by {changes[unconverged].max():.3g} relative "
                      f"(> {tol:g}) after {steps.max()} iterations; the estimate is the last iterate. A flat "
                      "likelihood (a class the calibrated outputs hardly separate) converges slowly: check that "
                      "class's calibration", NotConvergedWarning, stacklevel=2)
    return (priors[0] if single else priors), int(steps.max())


def redraw_rows(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, columns, weights) of the non-zero entries of row weights ``weights`` [R, n], by redraw
    (:func:`calbench.kernels.label_shift.sparse_rows`), made once per weights array for EM and the adapted metrics
    (:func:`calbench.metrics.row_counts.counts_form`)."""
    from calbench.kernels.label_shift import sparse_rows
    from calbench.metrics.row_counts import counts_form

    return counts_form(weights, "non-zero rows", lambda: sparse_rows(weights))


def _predicted(probs: np.ndarray, weights: np.ndarray | None, soft: bool) -> np.ndarray:
    """μ̂ of the set, [1, k] or [R, k] for row weights [R, n]: the mean probability (soft) or the frequencies of
    the hard predictions."""
    k = probs.shape[1]
    rows = probs if soft else np.eye(k)[np.argmax(probs, axis=1)]
    if weights is None:
        return rows.mean(axis=0)[None, :]
    return weights @ rows / row_sums(weights)[:, None]


def bbse_weights(probs: np.ndarray, confusion: np.ndarray, weights: np.ndarray | None = None,
                 soft: bool = False) -> np.ndarray:
    """Lipton et al. (2018) BBSE, w = Ĉ⁻¹ μ̂ (least squares where Ĉ is singular: a class never predicted on the
    calibration split), unclipped; ``soft``: μ̂ the mean probability and ``confusion`` the soft one (Alexandari et
    al. 2020 §4). [k], or [R, k] for row weights [R, n]."""
    predicted = _predicted(probs, weights, soft)
    found = np.linalg.lstsq(confusion, predicted.T, rcond=None)[0].T
    return found[0] if weights is None else found


def bbse_priors(probs: np.ndarray, confusion: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """π_t of hard BBSE: the weights clipped at 0 times Ĉ's label marginal, renormalised."""
    return weights_to_priors(bbse_weights(probs, confusion, weights), confusion.sum(axis=0))


def weights_to_priors(found: np.ndarray, source: np.ndarray) -> np.ndarray:
    """π_t = max(w, 0) ⊙ π_s renormalised (π_s where every weight is ≤ 0)."""
    priors = np.maximum(found, 0.0) * source
    total = priors.sum(axis=-1, keepdims=True)
    return np.where(total > 0, priors / np.where(total > 0, total, 1.0), source)


def class_weights(probs: np.ndarray, inputs: LabelShiftInputs, estimator: str, weights: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(the raw weights w = π_t/π_s of ``estimator``, the source priors π_s they multiply): [k], or [R, k] for
    bootstrap row weights ``weights`` [R, n] (the true priors unchanged: the resampled sets keep the set's class
    counts). EM's π_s is the mean calibrated probability; BBSE's and RLLS's the calibration labels' frequencies."""
    if estimator == "em":
        source = inputs.source_priors
        priors = em_priors(probs, source, weights=weights)[0]
        return np.divide(priors, source, out=np.zeros_like(priors), where=source > 0), source
    if estimator in ("bbse", "bbse_soft"):
        soft = estimator == "bbse_soft"
        confusion = inputs.soft_confusion if soft else inputs.confusion
        return bbse_weights(probs, confusion, weights, soft), inputs.label_frequencies
    if estimator in ("rlls", "rlls_hard"):
        soft = estimator == "rlls"
        confusion = inputs.soft_confusion if soft else inputs.confusion
        mean_cal = inputs.source_priors if soft else inputs.confusion.sum(axis=1)
        found = rlls_weights(confusion, _predicted(probs, weights, soft), mean_cal, inputs.cal_rows)
        return (found[0] if weights is None else found), inputs.label_frequencies
    if estimator == "oracle":
        source = inputs.source_priors
        ratio = np.divide(inputs.true_priors, source, out=np.zeros_like(source), where=source > 0)
        return (ratio if weights is None else np.tile(ratio, (weights.shape[0], 1))), source
    raise ValueError(f"label-shift estimator {estimator!r}: expected one of {ESTIMATORS}")


def applied(found: np.ndarray, estimator: str) -> np.ndarray:
    """The weights the adaptation applies: an estimated weight floored at :data:`WEIGHT_FLOOR`; the oracle's as
    they are."""
    return found if estimator == "oracle" else np.maximum(found, WEIGHT_FLOOR)


def target_priors(probs: np.ndarray, inputs: LabelShiftInputs, estimator: str, weights: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(π_t of ``estimator``: w ⊙ π_s with negative weights clipped at 0, renormalised; the raw weights)."""
    found, source = class_weights(probs, inputs, estimator, weights)
    return weights_to_priors(found, source), found


def adapt(probs: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """The probabilities re-weighted by the class weights ``ratio`` (:func:`reweight`)."""
    return reweight(probs, ratio)


def estimate(probs: np.ndarray, inputs: LabelShiftInputs, estimator: str) -> tuple[np.ndarray, np.ndarray]:
    """(π_t, the adapted probabilities) of ``estimator`` (one of :data:`ESTIMATORS`)."""
    priors, found = target_priors(probs, inputs, estimator)
    return priors, adapt(probs, applied(found, estimator))


def floored_rows(found: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """1 where the row's class weight is at the floor (raw weight ≤ :data:`WEIGHT_FLOOR`), else 0: [n], or [R, n]
    for weights [R, k]."""
    return (found[..., labels] <= WEIGHT_FLOOR).astype(np.float64)


def collapsed(probs: np.ndarray, adapted: np.ndarray, priors: np.ndarray) -> bool:
    """Whether an adaptation collapsed (module docstring): more than :data:`COLLAPSE_MASS` of the estimated prior
    ``priors`` on the classes that the unadapted predictions (argmax of ``probs``) choose for fewer than
    :data:`COLLAPSE_RARE`/k of the rows, or one class predicted for at least :data:`COLLAPSE_ONE_CLASS` of the rows
    of ``adapted`` where the unadapted predictions chose it for fewer."""
    n, k = probs.shape
    before = np.bincount(np.argmax(probs, axis=1), minlength=k) / n
    after = np.bincount(np.argmax(adapted, axis=1), minlength=k) / n
    top = int(np.argmax(after))
    rare_mass = priors[before < COLLAPSE_RARE / k].sum()
    return bool(rare_mass > COLLAPSE_MASS or (after[top] >= COLLAPSE_ONE_CLASS > before[top]))
