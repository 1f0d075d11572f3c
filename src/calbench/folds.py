"""Shuffled k-fold splits without importing scikit-learn (whose import costs ~1.5 s per job).

:func:`kfold_splits` yields exactly the folds of ``sklearn.model_selection.KFold(k, shuffle=True,
random_state=seed)``: the indices shuffled by ``numpy.random.RandomState(seed)``, then cut into ``k``
consecutive folds whose sizes differ by at most one, the first ``n mod k`` folds one larger.
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
