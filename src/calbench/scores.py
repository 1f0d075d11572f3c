"""The `Scores` container: what a calibration method may read about a set of predictions.

A classifier's output reaches every method as logits ``[N, C]`` (probabilities are derived once,
on demand) and, where the source has them, penultimate-layer embeddings ``[N, D]``.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
from scipy.special import log_softmax, softmax

#: Floor of probabilities whose logarithm becomes logits (``Scores.from_probs``, imported
#: ``scores: probs`` files): the smallest positive normal float64, ln = −708.4. Only exact zeros (and
#: subnormals) move; every representable probability keeps its own log, so log-probabilities
#: survive the round trip (a floor of 1e-12 would tie small probabilities and change accuracy and ECE).
PROB_FLOOR = float(np.finfo(np.float64).tiny)

#: Floor of the calibrated probabilities of a chain's *intermediate* stage (``Calibrator.transform``
#: of non-parametric methods such as LECE or isotonic regression, whose outputs contain exact
#: zeros) and of the binary maps' logits: ``log(1e-12) = -27.6`` keeps such zeros finite without
#: dominating a linear map fitted on them by the next stage.
PROB_EPS = 1e-12


class ProbabilitiesAsLogitsWarning(UserWarning):
    """Scores given as logits look like probabilities (every row in [0, 1] and summing to 1).

    Softmax of probabilities is not the classifier's distribution: wrap them with
    :meth:`Scores.from_probs` (workflow: ``scores: probs``). Silence it, for scores that really are
    such logits, with ``warnings.simplefilter("ignore", calbench.ProbabilitiesAsLogitsWarning)``.
    """


def looks_like_probs(arr: np.ndarray, atol: float = 1e-3) -> bool:
    """True when every row of the ``[N, C]`` array lies in [0, 1] and sums to 1 within ``atol``."""
    return bool(arr.min() >= 0 and arr.max() <= 1
                and np.allclose(arr.sum(axis=1), 1.0, rtol=0, atol=atol))


#: How far a row of probabilities may sum from 1, and an entry fall below 0, and still count as a distribution.
DISTRIBUTION_TOL = 1e-6


class NotDistributionsError(ValueError):
    """A loaded calibrator computed rows that are not probability distributions (its file holds values no fit
    makes): :func:`non_distributions` counts them."""


def non_distributions(probs: np.ndarray) -> int:
    """How many rows of ``probs`` ``[N, C]`` are not probability distributions: a NaN or infinite entry, an entry
    below −:data:`DISTRIBUTION_TOL`, or a sum more than :data:`DISTRIBUTION_TOL` from 1."""
    probs = np.asarray(probs)
    if probs.ndim != 2:
        return len(probs) if probs.ndim else 1
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~np.isfinite(probs).all(axis=1) | (probs.min(axis=1, initial=np.inf) < -DISTRIBUTION_TOL) \
            | (np.abs(probs.sum(axis=1) - 1.0) > DISTRIBUTION_TOL)
    return int(np.count_nonzero(bad))


class CoarseProbabilitiesWarning(UserWarning):
    """Probabilities carry too little precision to calibrate on: rounded on export (every value a multiple of
    10⁻ᵈ) or holding many exact zeros. Methods fitted on their logarithm see an exact zero as a log-probability
    of ln(:data:`PROB_FLOOR`) = −708 and fit the rounding instead of the classifier."""


#: Share of rows with an exact-zero probability above which :func:`coarse_probs_text` warns (float32
#: softmax outputs of the CIFAR networks in ../shared/data hold none).
ZERO_ROWS_WARN = 0.01
#: Decimals up to which rounding is detected (every value equal to its rounding to that many decimals).
ROUNDED_MAX_DECIMALS = 6
#: What a user can do about coarse probabilities.
COARSE_FIX = "export the logits, or the probabilities unrounded (float32 or float64, as the softmax returns them)"

#: Per kind of scores a calibrator was fitted on, what to do when it is given the other kind.
KIND_FIX = {
    "logits": "pass the classifier's logits, or refit it on probabilities (`calbench fit --probs`; in Python "
              "calbench.save(cal, path, input_kind='probs'))",
    "probs": "pass the classifier's probabilities (the softmax of its logits), or refit it on logits "
             "(`calbench fit` without --probs)",
}


def looks_like_percentages(arr: np.ndarray, atol: float = 0.1) -> bool:
    """True when every row of the ``[N, C]`` array lies in [0, 100] and sums to 100 within ``atol`` (and it is
    not already a probability matrix)."""
    return bool(arr.min() >= 0 and arr.max() <= 100 and arr.max() > 1
                and np.allclose(arr.sum(axis=1), 100.0, rtol=0, atol=atol))


def rounded_decimals(probs: np.ndarray) -> int | None:
    """The fewest decimals ``d`` ≤ :data:`ROUNDED_MAX_DECIMALS` to which every entry is rounded (equal to
    ``round(p, d)`` to float32 precision), or None."""
    for decimals in range(ROUNDED_MAX_DECIMALS + 1):
        if np.allclose(probs, np.round(probs, decimals), rtol=1e-6, atol=0):
            return decimals
    return None


def rounded_probs_decimals(arr: np.ndarray) -> int | None:
    """The decimals ``d`` ≤ :data:`ROUNDED_MAX_DECIMALS` of a matrix of rounded probabilities, or None: every entry
    in [0, 1] and rounded to ``d`` decimals, every row summing to 1 within the rounding (C · 10⁻ᵈ / 2 for C
    classes), which a tolerance fixed for unrounded probabilities rejects at few decimals (10 classes rounded to
    2 decimals sum to 1 ± 0.05)."""
    if arr.size == 0 or arr.min() < 0 or arr.max() > 1:
        return None
    decimals = rounded_decimals(arr)
    if decimals is None:
        return None
    slack = arr.shape[1] * 0.5 * 10.0 ** -decimals + 1e-6
    return decimals if np.all(np.abs(arr.sum(axis=1) - 1.0) <= slack) else None


def rounded_floor(decimals: int) -> float:
    """Half the rounding step of probabilities rounded to ``decimals``: a floor for their exact zeros (an entry
    rounded to 0 was below it) in ``Scores.from_probs(p, floor=...)``."""
    return 0.5 * 10.0 ** -decimals


def coarse_probs_text(probs: np.ndarray) -> list[str]:
    """Why ``probs`` (``[N, C]`` probabilities) cannot support calibration, one short message per reason (none where
    they can): values rounded to at most :data:`ROUNDED_MAX_DECIMALS` decimals, else more than
    :data:`ZERO_ROWS_WARN` of the rows with an exact zero; and, for values rounded to 2 decimals or more, the floor
    that makes them usable (half the rounding step, :func:`rounded_floor`: on a CIFAR-10 network's probabilities
    rounded to 3 decimals it brings temperature scaling's NLL from 0.433 back to 0.249, against 0.222 from the
    logits; rounded to 4 decimals and unfloored, temperature scaling fits T = 3.6 instead of 1.6 and leaves a
    confidence ECE of 8.8 % instead of 1.4 %, worse than the uncalibrated 4.3 %)."""
    decimals = rounded_decimals(probs)
    zero_rows = float((probs == 0).any(axis=1).mean())
    fitted = "calibrators fitted on log-probabilities"
    if decimals is not None:
        found = [f"every value is rounded to {decimals} decimals: {fitted} fit the rounding, not the classifier; "
                 "export the logits or unrounded probabilities"]
        if decimals >= 2:
            found.append(f"rounded to {decimals} decimals: where only these exist, floor the zeros at half the "
                         f"rounding step, Scores.from_probs(p, floor={rounded_floor(decimals):g})")
        return found
    if zero_rows <= ZERO_ROWS_WARN:
        return []
    return [f"{zero_rows:.0%} of the rows hold exact zeros, which {fitted} see as ln p = {np.log(PROB_FLOOR):.0f} "
            "and fit, not the classifier; export the logits or unrounded probabilities"]


def convert_scores(values, declared: str, where: str, fix: str | None = None) -> np.ndarray:
    """Logits from scores declared as ``logits`` (checked, as they are) or ``probs`` (their logarithm, see
    :func:`log_of_probs`), checking that the declaration fits the data: probability rows declared as logits,
    percentages, or non-probabilities declared as ``probs`` are an error; coarse probabilities warn
    (:class:`CoarseProbabilitiesWarning`). ``fix`` is the advice that ends a mismatch message (default: the
    config key to change)."""
    arr = check_logits(values, name=where)  # numeric, 2-D, finite
    if declared not in ("logits", "probs"):
        raise ValueError(f"{where}: scores must be 'logits' or 'probs', got {declared!r}")
    def said(kind: str) -> str:  # a config declares the kind; a command or a loaded calibrator expects it
        return f"declared `scores: {kind}`" if fix is None else f"expected {kind}"

    if looks_like_percentages(arr):
        then = "" if declared == "probs" else ", then " + (fix or "declare `scores: probs`")
        raise ValueError(f"{where}: every row lies in [0, 100] and sums to 100, so these look like percentages; "
                         f"divide them by 100{then}")
    rounded = rounded_probs_decimals(arr)
    if declared == "probs":
        if not looks_like_probs(arr) and rounded is None:
            raise ValueError(f"{where}: {said('probs')} but rows are not probability vectors "
                             "(values outside [0, 1] or rows not summing to 1); "
                             + (fix or "declare `scores: logits`"))
        for coarse in coarse_probs_text(arr):
            warnings.warn(f"{where}: {coarse}", CoarseProbabilitiesWarning, stacklevel=2)
        return log_of_probs(arr)
    if arr.shape[0] > 1 and (looks_like_probs(arr) or rounded is not None):
        what = "a probability vector" if rounded is None else (
            f"a probability vector rounded to {rounded} decimals (rows sum to 1 within the rounding); rounded "
            f"probabilities lose what calibration needs ({COARSE_FIX})")
        raise ValueError(f"{where}: {said('logits')} but every row is {what}; "
                         + (fix or "declare `scores: probs` so they are converted to log-probabilities"))
    return arr


def input_scores(values, kind: str, embeddings=None, *, where: str = "scores",
                 owner: str = "this calibrator") -> "Scores":
    """Scores of a saved calibrator's input: ``values`` of the ``kind`` it was fitted on (``logits``/``probs``),
    converted as at fit time; the other kind is an error naming the fix. ``calbench apply`` and a loaded
    calibrator's ``predict_proba`` both read their input here."""
    fix = f"{owner} was fitted on {kind}: {KIND_FIX[kind]}"
    return Scores(convert_scores(values, kind, where, fix), embeddings)


def log_of_probs(probs: np.ndarray, floor: float = PROB_FLOOR) -> np.ndarray:
    """``log(max(p, floor))``: log-probabilities used as logits (see :data:`PROB_FLOOR`)."""
    return np.log(np.maximum(probs, floor))


def check_logits(logits, *, name: str = "logits") -> np.ndarray:
    """Return ``logits`` as a finite float64 ``[N, C]`` array or raise a ``ValueError`` naming it."""
    arr = np.asarray(logits)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name}: expected a numeric array, got dtype {arr.dtype}; save the scores as float32/float64")
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array [n_samples, n_classes], got shape {arr.shape}")
    if arr.shape[1] < 2:
        raise ValueError(f"{name}: expected at least 2 classes (columns), got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name}: contains NaN or infinite values (first at row {bad[0]}, column {bad[1]}); "
            "clean the classifier outputs before calibrating"
        )
    return arr


def labels_shape_problem(shape: tuple, num_classes: int | None, n: int | None = None) -> str | None:
    """What is wrong with a label array of ``shape`` beside ``n`` rows of ``num_classes`` scores, with the fix;
    None for a vector of ``n`` entries. Read from shapes alone, so that ``snakemake -n`` checks it from the
    ``.npy`` headers."""
    if len(shape) == 2 and shape[1] == 1:
        return (f"expected a 1-D vector of class indices, got shape {shape}; save the labels as a vector "
                "(labels.ravel())")
    if len(shape) == 2 and shape[1] == num_classes and shape[1] > 1:
        return (f"expected a 1-D vector of class indices, got shape {shape}, which looks one-hot; save the class "
                "indices (labels.argmax(axis=1))")
    if len(shape) != 1:
        return f"expected a 1-D vector of class indices, got shape {shape}"
    if n is not None and shape[0] != n:
        return f"has {shape[0]} entries but the scores have {n} rows; labels and scores must list the same rows"
    return None


def check_labels(labels, num_classes: int, n: int | None = None, *, name: str = "labels") -> np.ndarray:
    """Return ``labels`` as an int64 vector with values in ``[0, num_classes)`` or raise."""
    y = np.asarray(labels)
    problem = labels_shape_problem(y.shape, num_classes, n)
    if problem:
        raise ValueError(f"{name}: {problem}")
    if not np.issubdtype(y.dtype, np.integer):
        if np.issubdtype(y.dtype, np.floating) and np.all(np.mod(y, 1) == 0):
            y = y.astype(np.int64)
        else:
            raise ValueError(f"{name}: expected integer class indices, got dtype {y.dtype}; "
                             "store labels as integers 0..C-1 (not one-hot, not class names)")
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(
            f"{name}: values must lie in [0, {num_classes}) for {num_classes} classes, "
            f"found min {y.min()} and max {y.max()}; re-map the labels to class indices 0..{num_classes - 1}, "
            "or check that the scores have one column per class"
        )
    return y.astype(np.int64, copy=False)


class Derivation(NamedTuple):
    """How a chain's intermediate logits were made: the fitted ``steps`` applied in order to ``logits``.

    A saved LECE pool fitted inside ``ts+lece`` stores these instead of its own float64 logits, which are
    temperature-scaled and so not float32-exact (:class:`calbench.methods.lece.NeighbourPool`).
    """

    steps: tuple
    logits: np.ndarray

    def replay(self) -> np.ndarray:
        """The derived logits, recomputed by the steps' ``transform``."""
        scores = Scores(self.logits)
        for step in self.steps:
            scores = step.transform(scores)
        return scores.logits


@dataclass(frozen=True, eq=False)
class Scores:
    """Classifier outputs for ``N`` instances and ``C`` classes.

    Attributes
    ----------
    logits : float64 ``[N, C]``; any additive constant per row is irrelevant.
    embeddings : float ``[N, D]`` or None; the input of the classifier's last layer.
    derived_from : :class:`Derivation` or None; set by a chain on the scores its last stage is fitted on.
    """

    logits: np.ndarray
    embeddings: np.ndarray | None = None
    derived_from: Derivation | None = None

    def __post_init__(self):
        object.__setattr__(self, "logits", check_logits(self.logits))
        if self.logits.shape[0] > 1 and (looks_like_probs(self.logits) or rounded_probs_decimals(self.logits)
                                         is not None):
            warnings.warn("logits: every row lies in [0, 1] and sums to 1, so these look like probabilities; "
                          "wrap them with Scores.from_probs(probs) (workflow: `scores: probs`) so that their "
                          "logarithm is used as logits", ProbabilitiesAsLogitsWarning, stacklevel=3)
        if self.embeddings is not None:
            emb = np.asarray(self.embeddings)
            if emb.ndim != 2 or emb.shape[0] != self.logits.shape[0]:
                raise ValueError(
                    f"embeddings: expected shape [{self.logits.shape[0]}, D] to match the logits, got {emb.shape}"
                )
            object.__setattr__(self, "embeddings", emb)

    @classmethod
    def from_probs(cls, probs, embeddings=None, floor: float = PROB_FLOOR) -> "Scores":
        """Wrap probabilities; ``log(max(p, floor))`` serves as logits (see :data:`PROB_FLOOR`). Rounded or
        zero-heavy probabilities warn (:class:`CoarseProbabilitiesWarning`) unless ``floor`` is raised above the
        default (the fix for rounded probabilities: :func:`rounded_floor`)."""
        p = check_logits(probs, name="probs")
        if (p < 0).any() or (p > 1 + 1e-6).any():
            raise ValueError("probs: values must lie in [0, 1]; were logits passed as probabilities?")
        for coarse in coarse_probs_text(p) if floor == PROB_FLOOR else []:
            warnings.warn(f"probs: {coarse}", CoarseProbabilitiesWarning, stacklevel=2)
        return cls(log_of_probs(p, floor), embeddings)

    @cached_property
    def probs(self) -> np.ndarray:
        """Softmax of the logits, float64 ``[N, C]``."""
        return softmax(self.logits, axis=1)

    @cached_property
    def log_probs(self) -> np.ndarray:
        """Log-softmax of the logits (normalised log-probabilities)."""
        return log_softmax(self.logits, axis=1)

    @property
    def n(self) -> int:
        return self.logits.shape[0]

    @property
    def num_classes(self) -> int:
        return self.logits.shape[1]

    def subset(self, index) -> "Scores":
        """The rows ``index`` (an integer or boolean index array)."""
        emb = None if self.embeddings is None else self.embeddings[index]
        return Scores(self.logits[index], emb)

    def with_logits(self, logits) -> "Scores":
        """New logits, same embeddings (used between the stages of a chain)."""
        return Scores(logits, self.embeddings)

    def with_derivation(self, derivation: Derivation) -> "Scores":
        """The same arrays (no copy, no new checks), marked as made by ``derivation``."""
        scores = copy.copy(self)
        object.__setattr__(scores, "derived_from", derivation)
        return scores


def as_scores(x) -> Scores:
    """Accept a :class:`Scores` or a plain ``[N, C]`` array of logits."""
    return x if isinstance(x, Scores) else Scores(x)
