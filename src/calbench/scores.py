"""The `Scores` container: what a calibration method may read about a set of predictions.

A classifier's output reaches every method as logits ``[N, C]`` (probabilities are derived once,
on demand) and, where the source has them, penultimate-layer embeddings ``[N, D]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.special import log_softmax, softmax

#: Probabilities are clipped to ``[PROB_EPS, 1]`` before taking their logarithm, whenever
#: probabilities are turned into logits (imported probability files, outputs of non-parametric
#: methods such as LECE or isotonic regression that contain exact zeros, fed to a next chain stage).
#: ``log(1e-12) = -27.6`` keeps such zeros finite without dominating a linear map fitted on them.
PROB_EPS = 1e-12


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


def check_labels(labels, num_classes: int, n: int | None = None, *, name: str = "labels") -> np.ndarray:
    """Return ``labels`` as an int64 vector with values in ``[0, num_classes)`` or raise."""
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D vector of class indices, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        if np.issubdtype(y.dtype, np.floating) and np.all(np.mod(y, 1) == 0):
            y = y.astype(np.int64)
        else:
            raise ValueError(f"{name}: expected integer class indices, got dtype {y.dtype}; "
                             "store labels as integers 0..C-1 (not one-hot, not class names)")
    if n is not None and y.shape[0] != n:
        raise ValueError(f"{name}: has {y.shape[0]} entries but the scores have {n} rows")
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(
            f"{name}: values must lie in [0, {num_classes}) for {num_classes} classes, "
            f"found min {y.min()} and max {y.max()}; re-map the labels to class indices 0..{num_classes - 1}, "
            "or check that the scores have one column per class"
        )
    return y.astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class Scores:
    """Classifier outputs for ``N`` instances and ``C`` classes.

    Attributes
    ----------
    logits : float64 ``[N, C]``; any additive constant per row is irrelevant.
    embeddings : float ``[N, D]`` or None; the input of the classifier's last layer.
    """

    logits: np.ndarray
    embeddings: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "logits", check_logits(self.logits))
        if self.embeddings is not None:
            emb = np.asarray(self.embeddings)
            if emb.ndim != 2 or emb.shape[0] != self.logits.shape[0]:
                raise ValueError(
                    f"embeddings: expected shape [{self.logits.shape[0]}, D] to match the logits, got {emb.shape}"
                )
            object.__setattr__(self, "embeddings", emb)

    @classmethod
    def from_probs(cls, probs, embeddings=None, eps: float = PROB_EPS) -> "Scores":
        """Wrap probabilities; their clipped logarithm serves as logits (see :data:`PROB_EPS`)."""
        p = check_logits(probs, name="probs")
        if (p < 0).any() or (p > 1 + 1e-6).any():
            raise ValueError("probs: values must lie in [0, 1]; were logits passed as probabilities?")
        return cls(np.log(np.clip(p, eps, 1.0)), embeddings)

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


def as_scores(x) -> Scores:
    """Accept a :class:`Scores` or a plain ``[N, C]`` array of logits."""
    return x if isinstance(x, Scores) else Scores(x)
