"""Split-conformal prediction sets on (calibrated) probabilities, vectorised over rows and classes.

Every construction is a pair of scores per row and class (in the row's order of decreasing probability, which
:func:`sort_rows` computes once): the *calibration score* of the true label, whose finite-sample quantile is the
threshold q̂ (:func:`conformal_quantile`), and the *inclusion score* of each label, the set being the labels whose
inclusion score is ≤ q̂. With p_(1) ≥ p_(2) ≥ … a row's sorted probabilities, ρ_k = p_(1) + … + p_(k−1) the mass
ranked above position k and u ~ U(0, 1) one draw per row:

* ``lac`` (Sadinle, Lei & Wasserman 2019, "least ambiguous set-valued classifiers", Eq. 2; THR in TorchCP):
  score 1 − p_(k) for both.
* ``lac_cc``: the class-conditional (Mondrian) version of LAC (Sadinle et al. 2019 §4.2; Vovk 2012): one
  quantile per class, from the calibration rows of that class; label y is in the set when 1 − p_y ≤ q̂_y.
* ``aps`` (Romano, Sesia & Candès 2020, Eq. 5–7): randomised, both scores ρ_k + u·p_(k); the set can be empty.
* ``aps_nr``: APS without randomisation (Romano et al. 2020 with u = 1 for calibration, the generalised
  conditional quantile set L(x; π̂, τ) of their Eq. 5 for inclusion): calibration score ρ_k + p_(k), inclusion
  score ρ_k, i.e. the set runs up to and including the label whose cumulative mass crosses q̂ (conservative).
* ``raps`` (Angelopoulos, Bates, Malik & Jordan 2021, Algorithm 2): APS plus λ·(k − k_reg)⁺ in both scores.
* ``raps_nr``: RAPS without randomisation, as ``aps_nr`` (u = 1 to calibrate, u = 0 for inclusion).

RAPS chooses k_reg and λ on a tuning part of its conformal-calibration rows (Angelopoulos et al. 2021 §2.3 and
Appendix E; their code's ``pct_paramtune`` = 0.3): k_reg is the 1 − α quantile ("higher") of the tuning rows'
0-based true-label ranks plus one, and λ the value of {0.001, 0.01, 0.1, 0.2, 0.5} whose sets, calibrated on the
tuning rows, are smallest on average there; the quantile then uses the remaining rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: The set constructions by id (the metric ids' second part, docs/conformal.md).
CONSTRUCTIONS = ("lac", "lac_cc", "aps", "aps_nr", "raps", "raps_nr")
#: RAPS's λ grid (Angelopoulos et al. 2021, Appendix E; their ``pick_lamda_size``).
RAPS_LAMBDAS = (0.001, 0.01, 0.1, 0.2, 0.5)
#: Fraction of RAPS's conformal-calibration rows that choose k_reg and λ (their code's ``pct_paramtune``).
RAPS_TUNING_FRACTION = 0.3


def conformal_quantile(scores, alpha: float, *, axis: int = -1) -> np.ndarray:
    """The split-conformal threshold of calibration ``scores`` along ``axis``: the ⌈(n + 1)(1 − α)⌉-th smallest
    of the n scores (Vovk et al. 2005; Angelopoulos & Bates 2023, Eq. 1), +∞ where that rank exceeds n (then
    every label enters the set: the coverage guarantee needs it)."""
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.shape[axis]
    rank = math.ceil((n + 1) * (1 - alpha) - 1e-9)  # the 1e-9 keeps an exact product such as 0.9 × 10 exact
    if n == 0 or rank > n:
        return np.full(np.delete(scores.shape, axis % scores.ndim), np.inf)
    return np.partition(scores, rank - 1, axis=axis).take(rank - 1, axis=axis)


@dataclass(frozen=True)
class SortedRows:
    """A probability matrix sorted once per row (decreasing): ``order`` [N, K] the classes by position,
    ``probs`` [N, K] the sorted probabilities, ``above`` [N, K] the mass ranked above each position (ρ_k),
    ``rank`` [N, K] each class's 0-based position (the inverse of ``order``)."""

    order: np.ndarray
    probs: np.ndarray
    above: np.ndarray
    rank: np.ndarray

    def rows(self, index) -> "SortedRows":
        """The rows ``index`` of every field."""
        return SortedRows(self.order[index], self.probs[index], self.above[index], self.rank[index])


def sort_rows(probs) -> SortedRows:
    """:class:`SortedRows` of ``probs`` [N, K]: one stable argsort per row (ties keep the class order)."""
    probs = np.asarray(probs, dtype=np.float64)
    order = np.argsort(-probs, axis=1, kind="stable")
    ordered = np.take_along_axis(probs, order, axis=1)
    above = np.cumsum(ordered, axis=1) - ordered
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(probs.shape[1])[None, :], axis=1)
    return SortedRows(order, ordered, above, rank)


def penalty(num_classes: int, lam: float, k_reg: int) -> np.ndarray:
    """RAPS's penalty λ·(k − k_reg)⁺ at 1-based positions k = 1..K (Angelopoulos et al. 2021, Eq. 4)."""
    return lam * np.maximum(np.arange(1, num_classes + 1) - k_reg, 0)


def adaptive_scores(rows: SortedRows, u, pen=None) -> np.ndarray:
    """APS/RAPS scores ρ_k + u·p_(k) [+ λ(k − k_reg)⁺] [N, K] in sorted order; ``u`` [N] (or a scalar: 1 for the
    non-randomised calibration score, 0 for its inclusion score)."""
    u = np.asarray(u, dtype=np.float64)
    scores = rows.above + (u[:, None] if u.ndim else u) * rows.probs
    return scores if pen is None else scores + pen[None, :]


def true_label_scores(rows: SortedRows, labels, u, pen=None, *, index=None) -> np.ndarray:
    """The APS/RAPS score [N] of each row's true label (the calibration scores), without forming [N, K]; of the rows
    ``index`` of ``rows`` where given (as of ``rows.rows(index)``, without gathering their [N, K] fields)."""
    at = np.arange(labels.size) if index is None else np.asarray(index)
    position = rows.rank[at, labels]
    picked = rows.above[at, position] + np.asarray(u) * rows.probs[at, position]
    return picked if pen is None else picked + pen[position]


def raps_parameters(rows: SortedRows, labels, alpha: float, u) -> tuple[int, float]:
    """(k_reg, λ) chosen on tuning rows ``rows``/``labels`` as Angelopoulos et al. 2021 do (module docstring):
    k_reg from the true labels' ranks, then the λ of :data:`RAPS_LAMBDAS` whose sets, calibrated and measured on
    these rows with the draws ``u`` [N] (or u = 1/0 for the non-randomised version, ``u`` None), are smallest."""
    ranks = rows.rank[np.arange(labels.size), labels]
    k_reg = int(np.quantile(ranks, 1 - alpha, method="higher")) + 1 if labels.size else 1
    num_classes = rows.probs.shape[1]
    best, chosen = np.inf, RAPS_LAMBDAS[0]
    for lam in RAPS_LAMBDAS:  # five grid points, each a vectorised calibration and measurement
        pen = penalty(num_classes, lam, k_reg)
        q = conformal_quantile(true_label_scores(rows, labels, 1.0 if u is None else u, pen), alpha)
        size = np.mean(np.sum(adaptive_scores(rows, 0.0 if u is None else u, pen) <= q, axis=1))
        if size < best:
            best, chosen = size, lam
    return k_reg, chosen


def _check(probs_cal, labels_cal, probs_test, construction, alpha):
    if construction not in CONSTRUCTIONS:
        raise ValueError(f"construction {construction!r}: expected one of {', '.join(CONSTRUCTIONS)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r}: the miscoverage level must lie in (0, 1), e.g. 0.1")
    probs_cal = np.asarray(probs_cal, dtype=np.float64)
    probs_test = np.asarray(probs_test, dtype=np.float64)
    labels_cal = np.asarray(labels_cal)
    if probs_cal.ndim != 2 or probs_test.ndim != 2 or probs_cal.shape[1] != probs_test.shape[1]:
        raise ValueError(f"probs_cal {probs_cal.shape} and probs_test {probs_test.shape}: expected [n, K] and [m, K] "
                         "probability matrices with the same K")
    if labels_cal.shape != (probs_cal.shape[0],) or not np.issubdtype(labels_cal.dtype, np.integer):
        raise ValueError(f"labels_cal: expected {probs_cal.shape[0]} integer labels, got {labels_cal.dtype} "
                         f"{labels_cal.shape}")
    return probs_cal, labels_cal, probs_test


def prediction_sets(probs_cal, labels_cal, probs_test, construction: str, alpha: float, *, u_cal=None, u_test=None,
                    seed: int = 0, k_reg: int | None = None, lam: float | None = None) -> tuple[np.ndarray, dict]:
    """Split-conformal sets of ``construction`` (:data:`CONSTRUCTIONS`) at miscoverage ``alpha``: calibrated on
    ``probs_cal``/``labels_cal``, for each row of ``probs_test``; returns (boolean [m, K] membership in class order,
    ``{"q": threshold ([K] for lac_cc), "k_reg", "lam"}``).

    The randomised constructions draw u from ``default_rng(seed)`` (calibration rows first) unless ``u_cal`` [n]
    and ``u_test`` [m] are given. RAPS tunes k_reg and λ on the first ⌈0.3 n⌉ calibration rows unless both are
    given (then every row calibrates).
    """
    probs_cal, labels_cal, probs_test = _check(probs_cal, labels_cal, probs_test, construction, alpha)
    num_classes = probs_cal.shape[1]
    if construction in ("lac", "lac_cc"):
        scores_cal = 1.0 - probs_cal[np.arange(labels_cal.size), labels_cal]
        if construction == "lac":
            q = conformal_quantile(scores_cal, alpha)
            return 1.0 - probs_test <= q, {"q": float(q)}
        q = class_quantiles(scores_cal, labels_cal, num_classes, alpha)
        return 1.0 - probs_test <= q[None, :], {"q": q}
    randomised = construction in ("aps", "raps")
    if randomised and (u_cal is None or u_test is None):
        draws = np.random.default_rng(seed).random(labels_cal.size + probs_test.shape[0])
        u_cal, u_test = draws[:labels_cal.size], draws[labels_cal.size:]
    rows_cal, rows_test = sort_rows(probs_cal), sort_rows(probs_test)
    pen, info = None, {}
    if construction.startswith("raps"):
        if k_reg is None or lam is None:
            tune = math.ceil(RAPS_TUNING_FRACTION * labels_cal.size)
            k_reg, lam = raps_parameters(rows_cal.rows(slice(tune)), labels_cal[:tune], alpha,
                                         u_cal[:tune] if randomised else None)
            rows_cal, labels_cal = rows_cal.rows(slice(tune, None)), labels_cal[tune:]
            u_cal = u_cal[tune:] if randomised else None
        pen, info = penalty(num_classes, lam, k_reg), {"k_reg": int(k_reg), "lam": float(lam)}
    q = conformal_quantile(true_label_scores(rows_cal, labels_cal, u_cal if randomised else 1.0, pen), alpha)
    included = adaptive_scores(rows_test, u_test if randomised else 0.0, pen) <= q
    members = np.empty_like(included)
    np.put_along_axis(members, rows_test.order, included, axis=1)
    return members, {"q": float(q), **info}


def class_quantiles(scores, labels, num_classes: int, alpha: float) -> np.ndarray:
    """Per-class split-conformal thresholds [K] (Mondrian / class-conditional conformal prediction): class c's
    threshold is :func:`conformal_quantile` of the scores of its own rows (+∞ for a class with too few rows), for
    all classes at once from one sort by (class, score)."""
    order = np.lexsort((scores, labels))
    counts = np.bincount(labels, minlength=num_classes)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    ranks = np.ceil((counts + 1) * (1 - alpha) - 1e-9).astype(np.int64)
    found = (ranks <= counts) & (counts > 0)
    q = np.full(num_classes, np.inf)
    q[found] = scores[order][starts[found] + ranks[found] - 1]
    return q
