"""One-vs-rest isotonic recalibration of every class, cross-fitted over folds, in one compiled pass per class.

For class j the fit rows' scores p_j, sorted, are pooled into distinct values (mean target 1[y = j], weight = count;
as scikit-learn, a score less than :data:`TIE` above the first of its group joins that group) and fitted by
pool-adjacent-violators (the L2 isotonic regression); the map interpolates linearly between the ends of the constant
blocks and is constant outside the fitted range, as scikit-learn's ``IsotonicRegression(out_of_bounds="clip")``.
Each class's rows are sorted once (``order``) for all folds and copied into contiguous buffers; the score rows are
visited in the same sorted order, so the map is evaluated by one merge pass instead of a search per row.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Scores closer than this to the first score of a group are pooled with it (scikit-learn's ``_make_unique``:
#: ``np.finfo(np.float64).resolution``), e.g. 0.15 and 1 − 0.85 = 0.15000000000000002.
TIE = float(np.finfo(np.float64).resolution)


@njit(cache=True, nogil=True)
def _fit_blocks(x, fold_of, target, fold, weight, total, first, last):  # pragma: no cover (compiled)
    """PAV blocks of the sorted scores ``x`` (targets 0/1) whose ``fold_of`` differs from ``fold`` (all where
    ``fold`` < 0): their weights, target sums, first and last score, in ``weight`` … ``last``; returns their number."""
    top = -1
    n = x.size
    i = 0
    while i < n:
        if fold_of[i] == fold:
            i += 1
            continue
        top += 1
        weight[top] = 1.0
        total[top] = target[i]
        first[top] = x[i]
        last[top] = x[i]
        start = x[i]
        i += 1
        while i < n and x[i] - start < TIE:  # equal scores pooled (rows of the left-out fold skipped)
            if fold_of[i] != fold:
                weight[top] += 1.0
                total[top] += target[i]
            i += 1
        while top > 0 and total[top - 1] * weight[top] >= total[top] * weight[top - 1]:  # a violation: pool
            weight[top - 1] += weight[top]
            total[top - 1] += total[top]
            last[top - 1] = last[top]
            top -= 1
    return top + 1


@njit(cache=True, nogil=True)
def recalibrate(scores_by_class, order, labels, fold_of, folds, out):  # pragma: no cover (compiled)
    """``out[j, r]``: the isotonic map of class j fitted on the rows outside row r's fold, at ``scores_by_class[j, r]``
    (``folds`` = 0: fitted on all rows, in-sample). ``order[j]`` sorts ``scores_by_class[j]``; ``fold_of[r]`` in
    0 … folds − 1."""
    k, n = scores_by_class.shape
    weight, total = np.empty(n), np.empty(n)
    first, last = np.empty(n), np.empty(n)
    x, target, row_fold = np.empty(n), np.empty(n), np.empty(n, dtype=np.int64)
    for j in range(k):
        rows = order[j]
        for i in range(n):  # the class's rows in sorted order, contiguous for the passes below
            x[i] = scores_by_class[j, rows[i]]
            target[i] = 1.0 if labels[rows[i]] == j else 0.0
            row_fold[i] = fold_of[rows[i]] if folds > 0 else -1
        for fold in range(max(folds, 1)):
            left_out = fold if folds > 0 else -2  # -2: no row is left out
            blocks = _fit_blocks(x, row_fold, target, left_out, weight, total, first, last)
            b = 0
            for i in range(n):
                if folds > 0 and row_fold[i] != fold:
                    continue
                while b < blocks and last[b] < x[i]:  # the first block not wholly below x
                    b += 1
                if b == blocks:
                    value = total[blocks - 1] / weight[blocks - 1]
                elif x[i] >= first[b] or b == 0:
                    value = total[b] / weight[b]
                else:  # between the previous block's last score and this block's first
                    low, high = total[b - 1] / weight[b - 1], total[b] / weight[b]
                    value = low + (high - low) * (x[i] - last[b - 1]) / (first[b] - last[b - 1])
                out[j, rows[i]] = value
    return out


def warm_up() -> None:
    """Compile (or load from the cache) the kernel's signature."""
    scores = np.array([[0.1, 0.4, 0.4, 0.9], [0.9, 0.6, 0.6, 0.1]])
    recalibrate(scores, np.argsort(scores, axis=1), np.array([0, 1, 0, 1]), np.array([0, 1, 0, 1]), 2,
                np.empty_like(scores))
