"""Shuffled k-fold splits without importing scikit-learn (whose import costs ~1 s per job).

:func:`kfold_splits` yields exactly the folds of ``sklearn.model_selection.KFold(k, shuffle=True,
random_state=seed)``: the indices shuffled by ``numpy.random.RandomState(seed)``, then cut into ``k``
consecutive folds whose sizes differ by at most one, the first ``n mod k`` folds one larger.

:func:`stratified_kfold_splits` yields exactly the folds of ``StratifiedKFold(k, shuffle=True,
random_state=seed)`` (scikit-learn ≥ 0.22), so tuned methods keep the folds, and the numbers, they had
with scikit-learn.

:func:`fold_ids` gives each row its fold number instead (KCal's bandwidth CV and its projection's fold
groups), from numpy's ``default_rng`` stream: another stream, so other folds than :func:`kfold_splits`' for the
same seed, kept so that KCal's numbers stay as they were.
"""

from __future__ import annotations

import numpy as np


def kfold_splits(n: int, k: int, seed: int):
    """Yield ``(train_index, test_index)`` for each of ``k`` folds of ``n`` shuffled rows."""
    if not 2 <= k <= n:
        raise ValueError(f"k-fold: need 2 <= folds <= {n} rows, got {k} folds")
    order = np.arange(n)
    np.random.RandomState(seed).shuffle(order)
    sizes = np.full(k, n // k)
    sizes[: n % k] += 1
    start = 0
    for size in sizes:
        test = np.sort(order[start:start + size])
        mask = np.ones(n, dtype=bool)
        mask[test] = False
        yield np.arange(n)[mask], test
        start += size


def fold_ids(n: int, k: int, seed: int) -> np.ndarray:
    """The fold (0..k−1) of each of ``n`` rows: a ``default_rng(seed)`` permutation dealt round-robin over
    min(k, n) folds, whose sizes differ by at most one."""
    ids = np.empty(n, dtype=np.int64)
    ids[np.random.default_rng(seed).permutation(n)] = np.arange(n) % min(k, n)
    return ids


def stratified_kfold_splits(y: np.ndarray, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train_index, test_index)`` of ``k`` shuffled folds stratified by the labels ``y``.

    Classes are numbered in order of first appearance in ``y``. Dealing the label-sorted rows round-robin
    over the folds fixes how many rows of each class every fold gets; each class's fold numbers, in fold
    order, are then shuffled by one ``numpy.random.RandomState(seed)`` (class by class, in that numbering)
    and given to the class's rows in data order. Every class needs at least ``k`` rows.
    """
    y = np.asarray(y)
    _, first, inverse = np.unique(y, return_index=True, return_inverse=True)
    appearance = np.empty_like(first)
    appearance[np.argsort(first, kind="stable")] = np.arange(first.size)
    codes = appearance[inverse.ravel()]
    counts = np.bincount(codes)
    if counts.min() < k:
        raise ValueError(f"stratified k-fold: every class needs >= {k} rows (one per fold), the smallest has "
                         f"{counts.min()}")
    dealt = np.sort(codes)
    per_fold = np.stack([np.bincount(dealt[fold::k], minlength=counts.size) for fold in range(k)])  # [k, classes]
    rng = np.random.RandomState(seed)
    fold_of = np.empty(y.size, dtype=np.int64)
    by_class = np.argsort(codes, kind="stable")  # each class's rows in data order, classes in appearance order
    starts = np.concatenate([[0], np.cumsum(counts)])
    for cls in range(counts.size):  # one shuffle per class: the order in which the random stream is drawn
        labels_of_class = np.repeat(np.arange(k), per_fold[:, cls])
        rng.shuffle(labels_of_class)
        fold_of[by_class[starts[cls]:starts[cls + 1]]] = labels_of_class
    rows = np.arange(y.size)
    return [(rows[fold_of != fold], rows[fold_of == fold]) for fold in range(k)]
