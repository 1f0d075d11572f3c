"""Calibration/test splits of a source, reproducible from the seed alone.

A dump with fixed ``cal``/``test`` groups is used as is. A dump with one ``all`` pool is split per
seed (the Mix-n-Match and KCal papers re-split held-out data this way); a dump with ``seed{s}``
groups carries data drawn for that seed.
"""

from __future__ import annotations

import numpy as np

from calbench.atomic import atomic_path
from calbench.data import store
from calbench.data.copies import copies


def check_split(n: int, cal_size: int | None = None, cal_fraction: float | None = None) -> None:
    """Raise unless exactly one of ``cal_size`` and ``cal_fraction`` is given and it leaves both parts of a
    pool of ``n`` rows non-empty."""
    if (cal_size is None) == (cal_fraction is None):
        raise ValueError("split: give exactly one of cal_size (a count) or cal_fraction (in (0, 1))")
    if cal_size is not None and not 0 < cal_size < n:
        raise ValueError(f"split.cal_size: must lie in (0, {n}) for a pool of {n} rows, got {cal_size}")
    if cal_fraction is not None and not 0 < cal_fraction < 1:
        raise ValueError(f"split.cal_fraction: must lie in (0, 1), got {cal_fraction}")


def split_pool(labels: np.ndarray, seed: int, cal_size: int | None = None, cal_fraction: float | None = None,
               stratify: bool = True, logits: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (cal_index, test_index) of a pool; stratified by label where every class has 2+ rows. With
    ``logits``, rows that are copies of one another (same scores and label) stay together on one side: the groups
    of copies are split (``cal_size`` then counts groups, ``cal_size / n`` of them), so that no test row is also a
    calibration row; a pool without copies is split as without ``logits``."""
    if logits is not None:
        group, repeated = copies(logits, labels)
        if repeated:
            first = np.unique(group, return_index=True)[1]
            fraction = cal_fraction if cal_fraction is not None else cal_size / labels.size
            cal_groups = split_pool(labels[first], seed, cal_fraction=min(max(fraction, 1 / first.size),
                                                                          1 - 1 / first.size), stratify=stratify)[0]
            in_cal = np.isin(group, cal_groups)
            return np.flatnonzero(in_cal), np.flatnonzero(~in_cal)
    from sklearn.model_selection import train_test_split  # lazy: only pooled sources need it

    n = labels.size
    check_split(n, cal_size, cal_fraction)
    size = cal_size if cal_size is not None else cal_fraction
    counts = np.bincount(labels)
    strat = labels if stratify and counts[counts > 0].min() >= 2 else None
    try:
        cal, test = train_test_split(np.arange(n), train_size=size, random_state=seed, stratify=strat)
    except ValueError:  # too few rows per class for a stratified split of this size
        cal, test = train_test_split(np.arange(n), train_size=size, random_state=seed)
    return np.sort(cal), np.sort(test)


def pool_split(pool: dict, seed: int, split: dict) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (cal_index, test_index) of a pooled source's pool (its ``labels`` and ``logits``) for ``seed`` and the
    source's ``split`` settings: the one way the split job, the calibrate job and ``calbench validate`` draw it."""
    return split_pool(pool["labels"], seed, **split, logits=pool["logits"])


def write_test_index(dump_path, seed: int, split: dict, output) -> None:
    """Draw a pooled source's split for ``seed`` once and save its test rows (int64 ``.npy``), so that the
    source's calibrate jobs read it instead of each drawing it again (and importing scikit-learn, ~1 s)."""
    pool = store.read_group(dump_path, "all", fields=["logits", "labels"])
    with atomic_path(output) as tmp, open(tmp, "wb") as f:
        np.save(f, pool_split(pool, seed, split)[1])


def load_split(dump_path, seed: int, split: dict | None = None, test_index=None, fields=None, *,
               train: bool = False) -> dict:
    """The calibration and test data of ``dump_path`` for ``seed``, read once and checked
    (:func:`calbench.data.store.read_split`).

    Returns ``{"cal": {...}, "test": {...}, "cal_index", "test_index", "test_group"}`` where each part holds the
    dump's fields (``logits``, ``labels``, optional ``embeddings``, ``true_probs``; ``fields``: only those
    named, ``logits`` and ``labels`` always) and the indices locate the rows within their group (``all`` for
    pools, else their own group; ``test_group`` names the test rows' group, ``dump_warnings`` lists the dump job's
    warnings); with ``train``, also the ``train`` part. ``test_index``: a pool's test rows where they are known (a
    calibrate job stores them beside its predictions), which spares drawing the split again (and importing
    scikit-learn, ~1 s per job); the rest of the pool is the cal part.
    """
    parts = store.read_split(dump_path, seed, fields, train=train)
    if "all" not in parts:
        return {**parts, "cal_index": np.arange(len(parts["cal"]["labels"])),
                "test_index": np.arange(len(parts["test"]["labels"]))}
    if not split:
        raise ValueError(f"{dump_path}: holds one pool ('all'); the source needs a split: {{cal_size: N}} "
                         "or {cal_fraction: f} in config")
    pool = parts.pop("all")
    if test_index is None:
        cal_index, test_index = pool_split(pool, seed, split)
    else:
        cal_index = np.setdiff1d(np.arange(pool["labels"].size), test_index)
    take = lambda idx: {k: v[idx] for k, v in pool.items()}  # noqa: E731
    return {**parts, "cal": take(cal_index), "test": take(test_index), "cal_index": cal_index,
            "test_index": test_index}
