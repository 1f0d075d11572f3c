"""Synthetic sources with a known calibration map.

* ``lece3``: the 3-class task of the LECE paper §4.1: p̂ ~ Dir(½,½,½),
  true map c(p̂) = (p̂₁^0.8 + p̂₁p̂₂/5, p̂₂ + p̂₁p̂₃/3, p̂₃ + p̂₁p̂₂/10)/Z, y ~ Categorical(c(p̂)).
  Logits are ln p̂ (the paper applies TS "to log(p̂)").
* ``planted_temperature``: a C-class task whose calibrated logits s are known and whose reported
  logits are ``T·s`` (T > 1: overconfident), so temperature scaling must recover T.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax


def sample_categorical(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One label per row of ``probs`` (inverse-CDF sampling, vectorised)."""
    cdf = np.cumsum(probs, axis=1)
    u = rng.random((probs.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((u > cdf).sum(axis=1), probs.shape[1] - 1).astype(np.int64)


def lece_true_map(p: np.ndarray) -> np.ndarray:
    """The true calibration map c(p̂) of LECE paper §4.1.1."""
    p1, p2, p3 = p[:, 0], p[:, 1], p[:, 2]
    c = np.stack([p1**0.8 + p1 * p2 / 5, p2 + p1 * p3 / 3, p3 + p1 * p2 / 10], axis=1)
    return c / c.sum(axis=1, keepdims=True)


def lece3(n: int, rng: np.random.Generator) -> dict:
    """``n`` draws of the LECE synthetic task: logits ln p̂, labels, true_probs c(p̂)."""
    p = rng.dirichlet([0.5, 0.5, 0.5], size=n)
    p = np.clip(p, np.finfo(np.float64).tiny, None)
    p /= p.sum(axis=1, keepdims=True)
    c = lece_true_map(p)
    return {"logits": np.log(p), "labels": sample_categorical(c, rng), "true_probs": c}


def planted_temperature(n: int, rng: np.random.Generator, num_classes: int = 10, temperature: float = 2.0,
                        signal: float = 3.0) -> dict:
    """Calibrated logits s = signal·onehot(k) + N(0, 1) for a random class k; labels ~ σ(s); logits T·s."""
    k = rng.integers(num_classes, size=n)
    s = rng.standard_normal((n, num_classes))
    s[np.arange(n), k] += signal
    true_probs = softmax(s, axis=1)
    return {"logits": temperature * s, "labels": sample_categorical(true_probs, rng), "true_probs": true_probs}


TASKS = {"lece3": lece3, "planted_temperature": planted_temperature}


def generate(task: str, seed: int, n_cal: int, n_test: int, **options) -> dict[str, dict]:
    """Calibration and test sets of ``task`` for one seed (test drawn from an independent stream)."""
    if task not in TASKS:
        raise ValueError(f"synthetic task {task!r} unknown; allowed: {sorted(TASKS)}")
    cal_rng, test_rng = (np.random.default_rng([seed, part]) for part in (0, 1))
    return {"cal": TASKS[task](n_cal, cal_rng, **options), "test": TASKS[task](n_test, test_rng, **options)}
