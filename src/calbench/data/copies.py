"""Rows that are copies of one another (same scores and label): a pool holding them is flagged, and its split keeps
the copies of a row on one side (:func:`calbench.data.splits.split_pool`), so that no test row is also a calibration
row; ``validate`` compares a source's test and calibration rows the same way (:mod:`calbench.data.check`)."""

from __future__ import annotations

import warnings

import numpy as np


def row_keys(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """One comparable key per row, its scores' bytes and its label: rows with equal keys are copies."""
    rows = np.concatenate([np.ascontiguousarray(logits, dtype=np.float64).view(np.uint8).reshape(len(labels), -1),
                           np.ascontiguousarray(labels, dtype=np.int64).view(np.uint8).reshape(len(labels), -1)], 1)
    return np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()


def copies(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, int]:
    """(the index of each row's group of identical rows [N], the number of rows that copy an earlier one)."""
    _, first, group = np.unique(row_keys(logits, labels), return_index=True, return_inverse=True)
    return group.ravel(), int(len(labels) - first.size)


def warn_of_copies(origin: str, pool: dict) -> None:
    """Warn where a pool holds copies of rows (same scores and label), with their count; the split keeps the
    copies of a row on one side (:func:`calbench.data.splits.split_pool`)."""
    _, repeated = copies(pool["logits"], pool["labels"])
    if repeated:
        warnings.warn(f"{origin}: {repeated} of the pool's {len(pool['labels'])} rows repeat another row (same "
                      "scores and label); each seed's split keeps the copies of a row on one side (calibration or "
                      "test), so split sizes follow the groups of copies", stacklevel=2)
