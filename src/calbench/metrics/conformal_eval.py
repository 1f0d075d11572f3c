"""The conformal metrics of a test split: random divisions into a conformal-calibration and an evaluation part.

The calibrator never saw the test split, so its rows are exchangeable with each other but not with the
calibrator's own calibration rows: the threshold is computed on part of the test split (``cal_fraction`` of its
rows, 50 % by default) and the sets are measured on the rest. One division is noisy, so the metrics average
:data:`DIVISIONS` random divisions (20 by default), drawn from the metric seed alone: every method of a run is
divided alike, so their differences are paired. Per division, on the evaluation rows:

* coverage, the fraction of sets holding the true label, and its gap to 1 − α (signed);
* the mean and the median set size;
* SSCV, the size-stratified coverage violation (Angelopoulos et al. 2021, §3, Eq. 6): the largest |coverage −
  (1 − α)| over the set-size strata {0–1, 2–3, 4–6, 7–10, 11–100, 101–1000, > 1000} that hold a row;
* the class-conditional coverage gaps of Dabah & Tirer (ICML 2025, §2, their code's AvgCovGap and TopCovGap):
  the mean over classes of |coverage of class c − (1 − α)|, and the mean of its largest max(⌊0.05 K⌋, 1) values.

``resampled`` gives the same metrics on bootstrap resamples given as row counts [R, N] (the tables' paired
bootstrap): each resample keeps the divisions, recomputes the threshold as the weighted quantile of its
conformal-calibration rows (weights = counts; all-ones counts give the estimate exactly) and weights its
evaluation rows by their counts; RAPS keeps the k_reg and λ chosen on the rows themselves. Recomputing a
resample's drawn rows instead would let copies of one row fall into both parts (a leak that raises coverage),
so every id has this form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from calbench.metrics.conformal import (
    RAPS_TUNING_FRACTION,
    adaptive_scores,
    class_quantiles,
    conformal_quantile,
    penalty,
    raps_parameters,
    sort_rows,
    true_label_scores,
)

#: Random divisions of the test split per metric seed.
DIVISIONS = 20
#: Fraction of the test split that calibrates the sets (the rest evaluates them).
CAL_FRACTION = 0.5
#: SSCV's set-size strata (Angelopoulos et al. 2021 §3; their code's ``strata``), upper ends inclusive.
SSCV_UPPER = np.array([1, 3, 6, 10, 100, 1000])
#: Dabah & Tirer's TopCovGap averages the largest ``max(int(TOP_FRACTION · K), 1)`` class gaps.
TOP_FRACTION = 0.05
#: The metric families of one (construction, α), by the id's first part.
KINDS = ("coverage", "coverage_gap", "set_size", "set_size_median", "sscv", "cc_gap", "cc_gap_top")
#: The kinds whose bootstrap values :func:`resampled_values` computes at once: every kind but the median and SSCV
#: share one pass over the rows (their per-resample thresholds, coverage and set sizes); those two add histograms.
GROUPS = (("coverage", "coverage_gap", "cc_gap", "cc_gap_top", "set_size"), KINDS)


def divisions(n: int, *, count: int = DIVISIONS, cal_fraction: float = CAL_FRACTION,
              seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(conformal-calibration rows [count, n_cal], evaluation rows [count, n − n_cal]) of ``count`` random
    divisions of ``n`` test rows, n_cal = round(cal_fraction · n), drawn from ``seed`` alone."""
    if not 0 < cal_fraction < 1:
        raise ValueError(f"cal_fraction={cal_fraction!r}: the conformal-calibration share must lie in (0, 1)")
    n_cal = int(round(cal_fraction * n))
    if n_cal < 1 or n_cal >= n:
        raise ValueError(f"{n} test rows cannot be divided into a conformal-calibration part of {cal_fraction:.0%} "
                         "and a non-empty evaluation part: the conformal metrics need at least 2 test rows")
    perms = np.argsort(np.random.default_rng([seed, 5501]).random((count, n)), axis=1)
    return perms[:, :n_cal], perms[:, n_cal:]


@dataclass(frozen=True)
class DivisionSets:
    """The sets of one division's evaluation rows: ``rows`` [m] (into the test split), ``covered`` [m] bool,
    ``sizes`` [m] int; and what the resamples need: the calibration rows ``cal_rows`` and their scores
    ``cal_scores`` [n_cal], the evaluation rows' inclusion scores ``set_scores`` [m, K] and true-label inclusion
    scores ``true_scores`` [m]."""

    rows: np.ndarray
    covered: np.ndarray
    sizes: np.ndarray
    cal_rows: np.ndarray
    cal_scores: np.ndarray
    set_scores: np.ndarray
    true_scores: np.ndarray


def division_sets(probs, labels, construction: str, alpha: float, *, seed: int = 0, count: int = DIVISIONS,
                  cal_fraction: float = CAL_FRACTION) -> list[DivisionSets]:
    """The sets of ``construction`` at ``alpha`` on each of ``count`` random divisions of the test rows
    ``probs``/``labels`` (rows sorted once for all divisions; one u ~ U(0, 1) per row and division)."""
    probs = np.asarray(probs, dtype=np.float64)
    n, num_classes = probs.shape
    cal, ev = divisions(n, count=count, cal_fraction=cal_fraction, seed=seed)
    draws = np.random.default_rng([seed, 5502]).random((count, n))
    if construction in ("lac", "lac_cc"):
        scores = 1.0 - probs
        true = scores[np.arange(n), labels]
    else:
        rows = sort_rows(probs)
    out = []
    for d in range(count):  # one vectorised pass per division
        c, e = cal[d], ev[d]
        if construction in ("lac", "lac_cc"):
            set_scores, cal_scores, true_scores = scores[e], true[c], true[e]
            q = (conformal_quantile(cal_scores, alpha) if construction == "lac"
                 else class_quantiles(cal_scores, labels[c], num_classes, alpha))
            bound = q if construction == "lac" else q[None, :]
            covered = true_scores <= (q if construction == "lac" else q[labels[e]])
            out.append(DivisionSets(e, covered, np.sum(set_scores <= bound, axis=1), c, cal_scores, set_scores,
                                    true_scores))
            continue
        randomised = construction in ("aps", "raps")
        u = draws[d]
        pen = None
        if construction.startswith("raps"):
            tune = math.ceil(RAPS_TUNING_FRACTION * c.size)
            k_reg, lam = raps_parameters(rows.rows(c[:tune]), labels[c[:tune]], alpha,
                                         u[c[:tune]] if randomised else None)
            pen, c = penalty(num_classes, lam, k_reg), c[tune:]
        cal_scores = true_label_scores(rows, labels[c], u[c] if randomised else 1.0, pen, index=c)
        q = conformal_quantile(cal_scores, alpha)
        ev_rows = rows.rows(e)
        set_scores = adaptive_scores(ev_rows, u[e] if randomised else 0.0, pen)
        true_scores = set_scores[np.arange(e.size), ev_rows.rank[np.arange(e.size), labels[e]]]
        out.append(DivisionSets(e, true_scores <= q, np.sum(set_scores <= q, axis=1), c, cal_scores, set_scores,
                                true_scores))
    return out


def _stratum(sizes):
    return np.searchsorted(SSCV_UPPER, sizes, side="left")


def summaries(sets: DivisionSets, labels, alpha: float, num_classes: int) -> dict[str, float]:
    """Every :data:`KINDS` value of one division's sets."""
    covered, sizes, y = sets.covered, sets.sizes, labels[sets.rows]
    coverage = float(np.mean(covered))
    out = {"coverage": coverage, "coverage_gap": coverage - (1 - alpha), "set_size": float(np.mean(sizes)),
           "set_size_median": float(np.median(sizes))}
    strata = _stratum(sizes)
    held = np.bincount(strata, minlength=SSCV_UPPER.size + 1)
    hits = np.bincount(strata, weights=covered, minlength=SSCV_UPPER.size + 1)
    out["sscv"] = float(np.max(np.abs(hits[held > 0] / held[held > 0] - (1 - alpha))))
    out["cc_gap"], out["cc_gap_top"] = _class_gaps(np.bincount(y, weights=covered, minlength=num_classes)[None, :],
                                                   np.bincount(y, minlength=num_classes)[None, :], alpha)
    return {k: float(np.ravel(v)[0]) for k, v in out.items()}


def _class_gaps(hits, held, alpha):
    """(mean, top-5 % mean) over the classes present of |coverage − (1 − α)|, per row of ``hits``/``held`` [R, K]
    (the top share over the classes present where fewer are present than it names)."""
    present = held > 0
    gaps = np.where(present, np.abs(hits / np.where(present, held, 1) - (1 - alpha)), -np.inf)
    mean = np.sum(np.where(present, gaps, 0.0), axis=1) / np.sum(present, axis=1)
    top = max(int(TOP_FRACTION * held.shape[1]), 1)
    largest = -np.sort(-gaps, axis=1)[:, :top]
    return mean, np.nanmean(np.where(np.isfinite(largest), largest, np.nan), axis=1)


def conformal_values(probs, labels, construction: str, alpha: float, *, seed: int = 0, count: int = DIVISIONS,
                     cal_fraction: float = CAL_FRACTION) -> dict[str, float]:
    """``{kind: mean over the divisions}`` for every :data:`KINDS` (module docstring)."""
    labels = np.asarray(labels)
    per = [summaries(s, labels, alpha, np.shape(probs)[1]) for s in
           division_sets(probs, labels, construction, alpha, seed=seed, count=count, cal_fraction=cal_fraction)]
    return {kind: float(np.mean([p[kind] for p in per])) for kind in KINDS}


def resampled_values(sets_list: list[DivisionSets], labels, alpha: float, counts, construction: str,
                     num_classes: int, kinds=KINDS) -> dict[str, np.ndarray]:
    """``{kind: [R] values}`` of ``kinds`` on bootstrap resamples ``counts`` [R, N] (module docstring), from each
    division's weighted sums (:func:`_division_sums`); the median and SSCV's histograms only where asked."""
    kinds = list(kinds)
    detail = bool({"set_size_median", "sscv"} & set(kinds))
    sums = {kind: np.zeros(np.shape(counts)[0]) for kind in kinds}
    for sets in sets_list:
        part = _division_sums(sets, labels, alpha, counts, construction, num_classes, detail)
        values = {"coverage": part.covered / part.total, "set_size": part.size / part.total}
        values["coverage_gap"] = values["coverage"] - (1 - alpha)
        if {"cc_gap", "cc_gap_top"} & set(kinds):
            values["cc_gap"], values["cc_gap_top"] = _class_gaps(part.hits, part.held, alpha)
        if detail:
            values["set_size_median"] = _weighted_median(part.hist)
            values["sscv"] = _weighted_sscv(part.strata_held, part.strata_hits, alpha)
        for kind in kinds:
            sums[kind] += values[kind]
    return {kind: sums[kind] / len(sets_list) for kind in kinds}


@dataclass(frozen=True)
class _Sums:
    """One division's evaluation rows summed under each of R resamples, weighted by the rows' counts: ``total``,
    ``covered`` and ``size`` (Σ w · set size) [R]; per class ``held`` and ``hits`` [R, K]; the weighted histogram of
    set sizes ``hist`` [R, K + 1] and the SSCV strata's ``strata_held`` and ``strata_hits`` [R, S] (None where not
    asked)."""

    total: np.ndarray
    covered: np.ndarray
    size: np.ndarray
    held: np.ndarray
    hits: np.ndarray
    hist: np.ndarray | None = None
    strata_held: np.ndarray | None = None
    strata_hits: np.ndarray | None = None


def _division_sums(sets: DivisionSets, labels, alpha, counts, construction, num_classes, detail) -> _Sums:
    """:class:`_Sums` of one division: one threshold per resample (the weighted conformal quantile of the
    calibration rows' scores) in compiled passes over the rows with the resamples as lanes
    (:mod:`calbench.kernels.resampled_sets`); ``lac_cc``'s per-class thresholds in dense arrays [R, m]."""
    if construction == "lac_cc":
        return _class_threshold_sums(sets, labels, alpha, counts, num_classes, detail)
    from calbench.kernels.resampled_bins import integer
    from calbench.kernels.resampled_sets import division_sums, weighted_quantile_positions
    from calbench.metrics.row_counts import lanes

    order = np.argsort(sets.cal_scores, kind="stable")
    cal_rows, cal_scores = sets.cal_rows[order], sets.cal_scores[order]
    chunks = lanes(counts)
    positions = np.zeros(np.shape(counts)[0], dtype=np.int64)
    for first, chunk in chunks:
        weighted_quantile_positions(cal_rows, alpha, chunk, integer(chunk),
                                    positions[first:first + chunk.shape[1]])
    q = np.where(positions >= 0, cal_scores[positions], np.inf)
    thresholds, lane_threshold = np.unique(q, return_inverse=True)
    m, width = sets.set_scores.shape
    # a row's set size at each distinct threshold: its scores counted at the first threshold ≥ them, then summed up
    first = np.searchsorted(thresholds, sets.set_scores.ravel(), side="left")
    table = np.bincount(np.repeat(np.arange(m) * (thresholds.size + 1), width) + first,
                        minlength=m * (thresholds.size + 1)).reshape(m, -1)
    sizes = np.cumsum(table, axis=1)[:, :thresholds.size]
    resamples, strata = positions.size, SSCV_UPPER.size + 1
    out = [np.zeros((3, resamples)), np.zeros((2, num_classes, resamples)),
           np.zeros((num_classes + 1 if detail else 0, resamples)), np.zeros((2, strata if detail else 0, resamples))]
    y = labels[sets.rows]
    for first_lane, chunk in chunks:
        lanes_of = slice(first_lane, first_lane + chunk.shape[1])
        dtype = np.int64 if integer(chunk) else np.float64  # row counts summed exactly as integers
        parts = [np.zeros((3, chunk.shape[1]), dtype), np.zeros((2, num_classes, chunk.shape[1]), dtype),
                 np.zeros((out[2].shape[0], chunk.shape[1]), dtype),
                 np.zeros((2, out[3].shape[1], chunk.shape[1]), dtype)]
        division_sums(sets.rows, y, sets.true_scores, sizes, lane_threshold[lanes_of], thresholds,
                      _stratum(np.arange(width + 1)), chunk, *parts[0], *parts[1], parts[2], *parts[3])
        for whole, part in zip(out, parts):
            whole[..., lanes_of] = part
    by_resample = lambda a: None if a.shape[0] == 0 else np.ascontiguousarray(a.T)  # noqa: E731 ([R, ...])
    return _Sums(*out[0], by_resample(out[1][0]), by_resample(out[1][1]), by_resample(out[2]),
                 by_resample(out[3][0]), by_resample(out[3][1]))


def _class_threshold_sums(sets, labels, alpha, counts, num_classes, detail) -> _Sums:
    """:class:`_Sums` of one division of ``lac_cc``, whose thresholds are per class: dense [R, m] arrays."""
    from calbench.metrics.row_counts import as_float

    weights = as_float(counts)
    w_cal, w = weights[:, sets.cal_rows], weights[:, sets.rows]  # [R, n_cal], [R, m]
    y = labels[sets.rows]
    q = _class_thresholds(sets, labels, w_cal, alpha, num_classes)  # [R, K]
    covered = sets.true_scores[None, :] <= q[:, y]
    hits = w * covered
    onehot = y[:, None] == np.arange(num_classes)[None, :]
    sizes = _sizes_under_classes(sets.set_scores, q)  # [R, m]
    sums = _Sums(w.sum(axis=1), hits.sum(axis=1), np.einsum("rm,rm->r", w, sizes), w @ onehot, hits @ onehot)
    if not detail:
        return sums
    resamples, strata = w.shape[0], SSCV_UPPER.size + 1
    by_size = (np.arange(resamples)[:, None] * (num_classes + 1) + sizes).ravel()
    by_stratum = (np.arange(resamples)[:, None] * strata + _stratum(sizes)).ravel()
    per = lambda index, values, width: np.bincount(index, weights=values.ravel(),  # noqa: E731
                                                   minlength=resamples * width).reshape(resamples, width)
    return replace(sums, hist=per(by_size, w, num_classes + 1), strata_held=per(by_stratum, w, strata),
                   strata_hits=per(by_stratum, hits, strata))


def _class_thresholds(sets, labels, w_cal, alpha, num_classes):
    """[R, K]: each class's threshold under each resample (``w_cal`` [R, n_cal]): the weighted conformal quantile
    of that class's calibration rows (one sort by (class, score); each resample's
    cumulative weights offset so that one searchsorted finds every (resample, class) rank)."""
    y_cal = labels[sets.cal_rows]
    order = np.lexsort((sets.cal_scores, y_cal))
    resamples, n = w_cal.shape
    cum = np.cumsum(w_cal[:, order], axis=1)
    per_class = w_cal @ (y_cal[:, None] == np.arange(num_classes)[None, :])
    before = np.cumsum(per_class, axis=1) - per_class
    rank = np.ceil((per_class + 1) * (1 - alpha) - 1e-9)
    step = cum[:, -1].max() + 1.0
    offsets = np.arange(resamples)[:, None] * step
    flat = np.searchsorted((cum + offsets).ravel(), (before + rank + offsets).ravel(), side="left")
    position = np.minimum(flat.reshape(resamples, num_classes) - np.arange(resamples)[:, None] * n, n - 1)
    return np.where((rank <= per_class) & (per_class > 0), sets.cal_scores[order][position], np.inf)


def _sizes_under_classes(set_scores, thresholds, budget: int = 2**24):
    """[R, m]: each row's number of labels k with score ≤ the resample's threshold of class k (``thresholds``
    [R, K]), in blocks of resamples of at most ``budget`` comparisons."""
    m, num_classes = set_scores.shape
    block = max(1, budget // (m * num_classes))
    return np.concatenate([np.sum(set_scores[None, :, :] <= thresholds[start:start + block, None, :], axis=2)
                           for start in range(0, thresholds.shape[0], block)])


def _weighted_median(hist):
    """[R]: np.median of each resample's multiset of set sizes, from its weighted histogram ``hist`` [R, K + 1]."""
    cum = np.cumsum(hist, axis=1)
    total = cum[:, -1]
    low = np.argmax(cum >= np.floor((total + 1) / 2)[:, None], axis=1)
    high = np.argmax(cum >= np.floor(total / 2 + 1)[:, None], axis=1)
    return (low + high) / 2.0


def _weighted_sscv(held, covered, alpha):
    """[R]: SSCV of each resample from its per-stratum weights ``held`` and covered weights ``covered`` [R, S]."""
    gaps = np.where(held > 0, np.abs(covered / np.where(held > 0, held, 1) - (1 - alpha)), -np.inf)
    return np.max(gaps, axis=1)
