"""Binned ECE with debiasing and with the number of bins chosen by cross-validation.

Works on binary problems stacked as columns: ``scores`` and ``hits`` of shape [N, M] (confidence:
M = 1 column of top probabilities and correctness; classwise: column j = (p̂_j, 1[y = j])).

* **Debiased l1** (fit-on-test paper App. C.5, after Kumar et al. 2019): ECE_deb = 2·ECE − bias with
  bias = Σ_k (n_k/n)·E|p̄_k − R|, R ~ N(ȳ_k, ȳ_k(1 − ȳ_k)/n_k). The paper integrates numerically
  (10,000 points); here the expectation is the exact folded-normal mean. Bins with ȳ_k ∈ {0, 1}
  (σ = 0) are not debiased (their bias term is |p̄_k − ȳ_k|), as in the paper's code.
* **Debiased l2** (Kumar et al. 2019, Eq. in §5; fit-on-test App. C.5):
  sqrt(max(0, Σ_k (n_k/n)·[(ȳ_k − p̄_k)² − ȳ_k(1 − ȳ_k)/(n_k − 1)])); single-point bins get no
  correction. Clipping at 0 before the square root is Kumar et al.'s convention.
* **CV bins** (fit-on-test paper §4.6, App. C.2): for B = 1..40, 10-fold CV (shuffled, seed fixed
  to 1 as in the paper) builds the binning on the training folds and predicts the held-out fold with
  the *slope-1* map ĉ(p) = p + ȳ_k − p̄_k (Theorem 2); the score is the held-out Brier error. The
  smallest B within 0.1 % of the best score wins (the paper's rule preferring fewer bins); the ECE is
  then computed with that B on all data. Equal-mass training bins have borders at the smallest
  training score of each bin (right-open); an empty equal-width training bin predicts the identity
  (the authors' code predicts 0 there, an artefact).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from calbench.folds import kfold_splits
from calbench.maps1d.piecewise import prefer_fewer
from calbench.metrics.binning import assign_bins, bin_sums, equal_mass_sizes, equal_width_bins

MAX_CV_BINS = 40
CV_FOLDS = 10
CV_SEED = 1


def bin_stats(scores: np.ndarray, hits: np.ndarray, n_bins: int, scheme: str):
    """Per column and bin: counts, mean score p̄ and mean hit ȳ (arrays [M, n_bins]; empty bins: 0)."""
    sums = _equal_mass_sums(scores, hits, n_bins) if scheme == "em" else None
    if sums is None:
        sums = bin_sums(assign_bins(scores, n_bins, scheme), n_bins, scores, hits)
    counts, s_sum, h_sum = sums
    safe = np.maximum(counts, 1)
    return counts, s_sum / safe, h_sum / safe


def sorted_columns(scores: np.ndarray, hits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column of scores and hits [N, M] ([N]: one column) as a row [M, N], sorted by score (an unstable
    sort: the order of tied scores is arbitrary). 0/1 hits come back as bytes: an eighth of the memory traffic
    of moving them (25,000 × 1,000 classwise columns)."""
    by_col = np.atleast_2d(np.asarray(scores, dtype=np.float64).T)
    order = np.argsort(by_col, axis=1)
    hits = np.asarray(hits, dtype=np.float64)
    binary = hits.astype(np.uint8)
    hits_by_col = np.atleast_2d((binary if np.array_equal(binary, hits) else hits).T)
    return np.take_along_axis(by_col, order, axis=1), np.take_along_axis(hits_by_col, order, axis=1)


def _equal_mass_sums(scores: np.ndarray, hits: np.ndarray, n_bins: int):
    """Equal-mass bin counts and sums [M, n_bins] as ``bin_sums(equal_mass_bins(...))``, from the columns sorted
    by an unstable sort (:func:`sorted_columns`; a third of the stable sort's time on 25,000 × 1,000): the sums
    are those of the stable order unless a group of tied scores straddles a bin edge, where the order of the
    ties could move hits between bins; then None (binned from the stable order instead)."""
    s, h = sorted_columns(scores, hits)
    m, n = s.shape
    sizes = equal_mass_sizes(n, n_bins)
    edges = np.cumsum(sizes)[:-1]
    inner = edges[(edges > 0) & (edges < n)]
    if np.any(s[:, inner - 1] == s[:, inner]):
        return None
    filled = sizes > 0  # n < n_bins leaves the last bins empty
    starts = np.concatenate([[0], edges])[filled]
    out = [np.broadcast_to(sizes.astype(np.float64), (m, n_bins)).copy(), np.zeros((m, n_bins)), np.zeros((m, n_bins))]
    if n:
        out[1][:, filled] = np.add.reduceat(s, starts, axis=1)
        out[2][:, filled] = np.add.reduceat(h, starts, axis=1, dtype=np.float64)
    return out


#: Sorted rows summed together by :func:`binned_sums_resampled` (only the block holding an edge is looked into row
#: by row).
RESAMPLE_RANK_BLOCK = 32


def binned_sums_resampled(scores: np.ndarray, hits: np.ndarray, counts: np.ndarray, binnings) -> list[np.ndarray]:
    """Per-bin counts and sums of scores and hits [3, R, M, B] of each binning of ``binnings`` on R bootstrap
    resamples given as row counts ``[R, N]``, every binning from one sort of the columns and one compiled pass over
    their rows (:func:`calbench.kernels.resampled_bins.shared_column_sums`, the resamples as lanes).

    A binning is ``("ew", B)`` (equal width: fixed edges, so a bin's sums are its rows' counts times their scores and
    hits) or ``("em", B, threshold, remainder)``: equal-mass bins of each column's entries ≥ ``threshold`` (None:
    all); the m kept entries of a resample form bins of ⌊m/B⌋, the m mod B larger ones first (``"first"``,
    calbench's ``em``) or last (``"last"``, the KCal paper's adaptive bins). A resample's sorted values are the
    kept rows in sorted order, row i repeated ``counts[r, i]`` times, so its bin b holds the ranks [e_b, e_{b+1}) and
    its sums are differences of the sums of the rows below each edge's rank: the sums of whole blocks of about
    ``RESAMPLE_RANK_BLOCK`` sorted rows up to the block that holds the edge, then that block's rows one by one.
    Tied scores are taken in the order of their rows, each row's copies together: the order in which binning the
    resample's rows (row i repeated counts[r, i] times, in row order) sorts them with a stable sort, so that an
    edge inside a group of tied scores with different hits splits it as recomputing the metric on those rows does
    (:func:`calbench.metrics.binning.equal_mass_bins`).
    """
    from calbench.kernels.resampled_bins import integer, shared_column_sums
    from calbench.metrics.row_counts import lanes

    scores, hits = np.asarray(scores, dtype=np.float64), np.asarray(hits, dtype=np.float64)
    n, m = scores.shape
    by_col = np.ascontiguousarray(scores.T)
    order, s = _stable_order(by_col)  # [M, N], each column ascending
    h = np.take_along_axis(np.ascontiguousarray(hits.T), order, 1)
    walks = [b for b in binnings if b[0] == "em"]
    widths = [b for b in binnings if b[0] == "ew"]
    width_bins = [equal_width_bins(s, b[1]) for b in widths]  # [M, N] each, non-decreasing along a column
    firsts = [np.zeros(m, dtype=np.int64) if b[2] is None else np.sum(s < b[2], axis=1) for b in walks]
    starts = n * np.arange(m + 1)
    cuts = [(starts[:-1, None] + np.arange(0, n, RESAMPLE_RANK_BLOCK)[None, :]).ravel(), starts[-1:]]
    cuts += [starts[:-1] + first for first in firsts]
    cuts += [(starts[:-1, None] + np.arange(1, n)[None, :])[bins[:, 1:] != bins[:, :-1]] for bins in width_bins]
    seg = np.unique(np.concatenate(cuts))  # the blocks: every binning's edges are block boundaries
    column_blocks = np.searchsorted(seg, starts)
    walk_first = np.array([np.searchsorted(seg, starts[:-1] + first) for first in firsts],
                          dtype=np.int64).reshape(len(walks), m)
    width_bin = np.array([bins.ravel()[seg[:-1]] for bins in width_bins], dtype=np.int64).reshape(len(widths),
                                                                                                   seg.size - 1)
    walk_bins = np.array([b[1] for b in walks], dtype=np.int64)
    walk_larger = np.array([b[3] == "first" for b in walks], dtype=np.bool_)
    # the kernel's layout: resamples last
    out_walk = np.zeros((len(walks), 3, m, max([b[1] for b in walks], default=0), counts.shape[0]))
    out_width = np.zeros((len(widths), 3, m, max([b[1] for b in widths], default=0), counts.shape[0]))
    flat = (order.ravel(), s.ravel(), h.ravel())
    for first, chunk in lanes(counts):
        shared_column_sums(*flat, seg, column_blocks, chunk, integer(chunk), first, walk_first, walk_bins, walk_larger,
                           width_bin, out_walk, out_width)
    found = {id(b): np.moveaxis(out_walk[k, :, :, :b[1]], -1, 1) for k, b in enumerate(walks)}  # [3, R, M, B] views
    found.update({id(b): np.moveaxis(out_width[k, :, :, :b[1]], -1, 1) for k, b in enumerate(widths)})
    return [found[id(b)] for b in binnings]


def _stable_order(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.argsort(rows, axis=1, kind="stable")`` and the sorted rows, from numpy's vectorised (unstable) sort,
    a fifth of the stable sort's time on 100 × 5,000: where a row has no tied (or NaN) values its order is unique,
    so the two sorts agree; a row with ties is sorted again stably."""
    order = np.argsort(rows, axis=1)
    ordered = np.take_along_axis(rows, order, 1)
    again = np.any(ordered[:, 1:] == ordered[:, :-1], axis=1) | np.any(np.isnan(ordered), axis=1)
    if again.any():
        order[again] = np.argsort(rows[again], axis=1, kind="stable")
        ordered[again] = np.take_along_axis(rows[again], order[again], 1)
    return order, ordered


def stats_of_sums(sums: np.ndarray):
    """:func:`bin_stats` (counts, mean score, mean hit) from the per-bin sums [3, ...] of
    :func:`binned_sums_resampled`."""
    totals, s_sum, h_sum = sums
    safe = np.maximum(totals, 1)
    return totals, s_sum / safe, h_sum / safe


def equal_width_stats_resampled(scores: np.ndarray, hits: np.ndarray, n_bins: int, counts: np.ndarray):
    """:func:`bin_stats` with equal-width bins on R bootstrap resamples given as row counts ``[R, N]`` (arrays
    [R, M, n_bins]; :func:`binned_sums_resampled`)."""
    return stats_of_sums(binned_sums_resampled(scores, hits, counts, [("ew", n_bins)])[0])


def equal_mass_stats_resampled(scores: np.ndarray, hits: np.ndarray, n_bins: int, counts: np.ndarray):
    """:func:`bin_stats` with equal-mass bins on R bootstrap resamples given as row counts ``[R, N]`` (arrays
    [R, M, n_bins]; :func:`binned_sums_resampled`)."""
    return stats_of_sums(binned_sums_resampled(scores, hits, counts, [("em", n_bins, None, "first")])[0])


def folded_normal_mean(mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """E|X| for X ~ N(mu, sigma²), elementwise; |mu| where sigma = 0."""
    safe = np.where(sigma > 0, sigma, 1.0)
    value = safe * np.sqrt(2 / np.pi) * np.exp(-0.5 * (mu / safe) ** 2) + mu * (1 - 2 * ndtr(-mu / safe))
    return np.where(sigma > 0, value, np.abs(mu))


def ece_from_stats(counts, mean_score, mean_hit, norm: str, debiased: bool) -> np.ndarray:
    """ECE per column [M] from bin statistics, l1 or l2 norm, optionally debiased (see module doc)."""
    n = counts.sum(axis=-1, keepdims=True)
    weights = counts / n
    gaps = mean_hit - mean_score
    if norm == "l1" and not debiased:  # in place: two arrays of the resamples' bins instead of four
        return np.sum(np.multiply(weights, np.abs(gaps, out=gaps), out=weights), axis=-1)
    if norm == "l1":
        ece = np.sum(weights * np.abs(gaps), axis=-1)
        sigma = np.sqrt(mean_hit * (1 - mean_hit) / np.maximum(counts, 1))
        return 2 * ece - np.sum(weights * folded_normal_mean(gaps, sigma), axis=-1)
    if norm == "l2":
        sq = gaps**2
        if debiased:
            sq = sq - np.where(counts > 1, mean_hit * (1 - mean_hit) / np.maximum(counts - 1, 1), 0.0)
            return np.sqrt(np.maximum(np.sum(weights * sq, axis=-1), 0.0))
        return np.sqrt(np.sum(weights * sq, axis=-1))
    raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")


#: Elements of the held-out predictions [candidates, M, n_test] that :func:`_held_out_brier_em` holds at once.
HELD_OUT_BUDGET = 2**22


def _held_out_brier_em(s_tr, h_tr, s_te, h_te, candidates):
    """Held-out Brier error of slope-1 equal-mass binning maps, [len(candidates), M]: every candidate at once (as
    many as :data:`HELD_OUT_BUDGET` allows). A test score's bin under B bins is the number of inner bin starts
    (ranks of the first training score of bins 1..B−1) below its rank among the sorted training scores (the count
    of them ≤ it, as searching the borders themselves finds), in closed form from B: one search of the training
    scores serves every candidate, with the per-bin arithmetic of the bin-by-bin search."""
    n_tr, m = s_tr.shape
    n_te = s_te.shape[0]
    order = np.argsort(s_tr, axis=0, kind="stable")
    s_sorted = np.take_along_axis(s_tr, order, axis=0)
    cum_s = np.vstack([np.zeros(m), np.cumsum(s_sorted, axis=0)])
    cum_h = np.vstack([np.zeros(m), np.cumsum(np.take_along_axis(h_tr, order, axis=0), axis=0)])
    offsets = 2.0 * np.arange(m)  # scores lie in [0, 1]: offsetting columns lets one searchsorted serve all
    col = np.repeat(np.arange(m), n_te)
    rank = np.searchsorted((s_sorted + offsets).T.ravel(), (s_te + offsets).T.ravel(), side="right") - col * n_tr
    scores, hits = s_te.T.ravel(), h_te.T.ravel()
    out = np.empty((len(candidates), m))
    step = max(1, HELD_OUT_BUDGET // max(m * n_te, 1))
    for first in range(0, len(candidates), step):
        group = np.asarray(candidates[first:first + step], dtype=np.int64)
        # bin k of candidate c: the sorted training rows [lo, lo + size (+ 1 for k < extra)), lo = k·size + min(k,
        # extra) (bins of ⌊n/B⌋, the first n mod B one larger, as equal_mass_sizes), candidates one after another
        which = np.repeat(np.arange(group.size), group)
        k = np.arange(which.size) - np.repeat(np.cumsum(group) - group, group)
        size, extra = n_tr // group[which], n_tr % group[which]
        lo = k * size + np.minimum(k, extra)
        hi = lo + size + (k < extra)
        gap = ((cum_h[hi] - cum_h[lo]) - (cum_s[hi] - cum_s[lo])) / (hi - lo)[:, None]  # [Σ B, M]
        # a test score's bin: the number of k in 1..B−1 with lo_k < its rank (lo_k = k·(size + 1) up to k = extra,
        # then k·size + extra)
        bins_of, size, extra = group[:, None], (n_tr // group)[:, None], (n_tr % group)[:, None]
        larger = np.minimum(extra, np.maximum(rank[None, :] - 1, -1) // (size + 1))
        rest = np.where(larger < extra, larger, np.maximum(extra, (rank[None, :] - extra - 1) // size))
        bins = np.minimum(np.maximum(rest, 0), bins_of - 1) + (np.cumsum(group) - group)[:, None]  # rows of gap
        c_hat = scores[None, :] + gap[bins, col[None, :]]
        out[first:first + group.size] = np.mean(((c_hat - hits[None, :]) ** 2).reshape(-1, n_te),
                                                axis=1).reshape(group.size, m)
    return out


def _held_out_brier_ew(s_tr, h_tr, s_te, h_te, candidates):
    """Held-out Brier error of slope-1 equal-width binning maps, [len(candidates), M]."""
    out = np.empty((len(candidates), s_tr.shape[1]))
    for row, n_bins in enumerate(candidates):
        counts, p_mean, y_mean = bin_stats(s_tr, h_tr, n_bins, "ew")
        gap = np.where(counts > 0, y_mean - p_mean, 0.0)  # [M, B]
        bins = assign_bins(s_te, n_bins, "ew")
        c_hat = s_te + np.take_along_axis(gap.T, bins, axis=0)
        out[row] = np.mean((c_hat - h_te) ** 2, axis=0)
    return out


def cv_bin_counts(scores: np.ndarray, hits: np.ndarray, scheme: str, max_bins: int = MAX_CV_BINS,
                  n_folds: int = CV_FOLDS, seed: int = CV_SEED, trick: bool = True) -> np.ndarray:
    """Number of bins per column chosen by k-fold CV of the slope-1 map (fit-on-test §4.6), int [M]."""
    if scheme not in ("em", "ew"):
        raise ValueError(f"binning scheme must be 'ew' or 'em', got {scheme!r}")
    n = scores.shape[0]
    n_folds = min(n_folds, n)
    if n_folds < 2:
        return np.ones(scores.shape[1], dtype=np.int64)
    smallest_train = n - int(np.ceil(n / n_folds))
    candidates = np.arange(1, min(max_bins, max(1, smallest_train)) + 1)
    held_out = _held_out_brier_em if scheme == "em" else _held_out_brier_ew
    total = np.zeros((candidates.size, scores.shape[1]))
    for train, test in kfold_splits(len(scores), n_folds, seed):
        total += held_out(scores[train], hits[train], scores[test], hits[test], candidates)
    choose = prefer_fewer if trick else np.argmin
    return np.array([candidates[choose(total[:, j])] for j in range(scores.shape[1])])


def binned_ece(scores: np.ndarray, hits: np.ndarray, n_bins: int | str, scheme: str, norm: str = "l1",
               debiased: bool = False) -> np.ndarray:
    """ECE per column [M] with ``n_bins`` bins, or ``n_bins="cv"`` for the CV-chosen count per column."""
    scores, hits = np.asarray(scores, dtype=np.float64), np.asarray(hits, dtype=np.float64)
    if n_bins != "cv":
        return ece_from_stats(*bin_stats(scores, hits, int(n_bins), scheme), norm, debiased)
    chosen = cv_bin_counts(scores, hits, scheme)
    out = np.empty(scores.shape[1])
    for b in np.unique(chosen):  # columns sharing a bin count are binned together
        cols = chosen == b
        out[cols] = ece_from_stats(*bin_stats(scores[:, cols], hits[:, cols], int(b), scheme), norm, debiased)
    return out


def confidence_columns(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The confidence reduction as one column: (max p̂, 1[argmax p̂ = y]) of shape [N, 1]."""
    probs = np.asarray(probs, dtype=np.float64)
    return probs.max(axis=1)[:, None], (probs.argmax(axis=1) == labels).astype(np.float64)[:, None]


def classwise_columns(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The one-vs-rest reductions: (p̂_j, 1[y = j]) for every class j, shape [N, C]."""
    probs = np.asarray(probs, dtype=np.float64)
    onehot = np.zeros_like(probs)
    onehot[np.arange(labels.size), labels] = 1.0
    return probs, onehot


def columns(probs, labels, target: str):
    """Dispatch ``target`` ``"conf"`` or ``"cw"`` to the binary columns of that reduction."""
    if target == "conf":
        return confidence_columns(probs, labels)
    if target == "cw":
        return classwise_columns(probs, labels)
    raise ValueError(f"target must be 'conf' or 'cw', got {target!r}")
