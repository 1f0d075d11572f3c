"""Synthetic sources with a known calibration map.

* ``lece3``: the 3-class task of the LECE paper §4.1: p̂ ~ Dir(½,½,½),
  true map c(p̂) = (p̂₁^0.8 + p̂₁p̂₂/5, p̂₂ + p̂₁p̂₃/3, p̂₃ + p̂₁p̂₂/10)/Z, y ~ Categorical(c(p̂)).
  Logits are ln p̂ (the paper applies TS "to log(p̂)").
* ``planted_temperature``: a C-class task whose calibrated logits s are known and whose reported
  logits are ``T·s`` (T > 1: overconfident), so temperature scaling must recover T.
* ``imagenet_like``: an ImageNet-sized network (default 1,000 classes, 768-dim embeddings): a
  penultimate embedding hᵢ = r·aᵢ·m_kᵢ + N(0, I) around the unit prototype m of a class kᵢ drawn from an
  imbalanced prior, calibrated logits s = β·h·Mᵀ + ln π, labels y ~ σ(s), and the network's reported
  logits ``T·s`` — an exact linear map of the embeddings, as a final layer is. Prototypes come in
  sibling groups (fine-grained classes that a network confuses); β is set so that the network's
  accuracy E[max σ(s)] is ``accuracy``. The class-signal scale r = 3·√dim puts the mean class signal
  (r·E[a] = r) at three times the norm of the within-class noise, so the embeddings cluster by class as
  a real network's penultimate features do (neural collapse, Papyan et al. 2020): the confusions come
  from the siblings and from samples of small signal a, and a low-dimensional projection keeps the
  classes apart (LDA to 32 dims + 20-NN on 25,000 training rows: 70 % test accuracy at 1,000 classes,
  against 0.3 % with r = 1, where isotropic noise over all dimensions decided the label).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import softmax

#: Class count and embedding dimension (0: no embeddings) of each task where the source sets neither
#: ``num_classes`` nor ``embedding_dim``.
SIZES = {"lece3": (3, 0), "planted_temperature": (10, 0), "imagenet_like": (1000, 768)}


def sizes(task: str, options: dict) -> tuple[int, int]:
    """Class count and embedding dimension of a ``task`` source with ``options`` (its entry's other keys)."""
    classes, dim = SIZES[task]
    return int(options.get("num_classes", classes)), int(options.get("embedding_dim", dim)) if dim else 0


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


def planted_temperature(n: int, rng: np.random.Generator, num_classes: int = SIZES["planted_temperature"][0],
                        temperature: float = 2.0, signal: float = 3.0) -> dict:
    """Calibrated logits s = signal·onehot(k) + N(0, 1) for a random class k; labels ~ σ(s); logits T·s."""
    k = rng.integers(num_classes, size=n)
    s = rng.standard_normal((n, num_classes))
    s[np.arange(n), k] += signal
    true_probs = softmax(s, axis=1)
    return {"logits": temperature * s, "labels": sample_categorical(true_probs, rng), "true_probs": true_probs}


#: ``imagenet_like``: classes per sibling group and the cosine between siblings' prototypes.
SIBLINGS, SIBLING_COSINE = 10, 0.5
#: ``imagenet_like``: rows of the pilot sample on which β is solved for the accuracy.
PILOT_ROWS = 4000
#: ``imagenet_like``: the mean class signal r·E[a] in units of the within-class noise norm √dim.
CLASS_SEPARATION = 3.0


class ImagenetLike:
    """The network of the ``imagenet_like`` task: prototypes, class prior and β, drawn from ``rng``.

    ``imbalance`` is the exponent of the Zipf prior πₖ ∝ (k + 1)^−imbalance (0 = balanced);
    the per-sample signal aᵢ ~ Uniform(0, 2) spreads the difficulty of the samples, and the class-signal
    scale r = ``CLASS_SEPARATION``·√dim keeps the classes clustered (module docstring).
    """

    def __init__(self, rng: np.random.Generator, num_classes: int = SIZES["imagenet_like"][0],
                 embedding_dim: int = SIZES["imagenet_like"][1],
                 accuracy: float = 0.76, temperature: float = 1.5, imbalance: float = 0.0):
        if not 1.0 / num_classes < accuracy < 1.0:
            raise ValueError(f"accuracy: expected a value in (1/num_classes, 1), got {accuracy!r}")
        groups = rng.standard_normal((-(-num_classes // SIBLINGS), embedding_dim))
        own = rng.standard_normal((num_classes, embedding_dim))
        proto = np.sqrt(SIBLING_COSINE) * _unit(groups)[np.arange(num_classes) // SIBLINGS]
        self.prototypes = _unit(proto + np.sqrt(1 - SIBLING_COSINE) * _unit(own))
        prior = (np.arange(num_classes) + 1.0) ** -float(imbalance)
        self.log_prior = np.log(prior / prior.sum())
        self.temperature = temperature
        self.signal_scale = CLASS_SEPARATION * np.sqrt(embedding_dim)
        pilot = self.embeddings(PILOT_ROWS, rng) @ self.prototypes.T
        self.beta = _solve_increasing(lambda b: softmax(b * pilot + self.log_prior, axis=1).max(axis=1).mean(),
                                      accuracy, f"accuracy {accuracy} with {num_classes} classes")

    def embeddings(self, n: int, rng: np.random.Generator) -> np.ndarray:
        k = rng.choice(self.log_prior.size, size=n, p=np.exp(self.log_prior))
        signal = self.signal_scale * rng.uniform(0.0, 2.0, size=(n, 1))
        return signal * self.prototypes[k] + rng.standard_normal((n, self.prototypes.shape[1]))

    def sample(self, n: int, rng: np.random.Generator) -> dict:
        h = self.embeddings(n, rng)
        s = self.beta * (h @ self.prototypes.T) + self.log_prior
        true_probs = softmax(s, axis=1)
        return {"logits": (self.temperature * s).astype(np.float32), "labels": sample_categorical(true_probs, rng),
                "true_probs": true_probs, "embeddings": h.astype(np.float32)}


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _solve_increasing(f, target: float, what: str) -> float:
    """x > 0 with f(x) = target for an increasing f (bracketing, then bisection to 1e-6 relative)."""
    low, high = 0.0, 1.0
    while f(high) < target:
        low, high = high, 2 * high
        if high > 1e6:
            raise ValueError(f"cannot reach {what}: lower the accuracy")
    while high - low > 1e-6 * high:
        mid = (low + high) / 2
        low, high = (mid, high) if f(mid) < target else (low, mid)
    return (low + high) / 2


TASKS = {"lece3": lece3, "planted_temperature": planted_temperature}
#: Tasks with a network shared by the calibration and test sets of a seed: ``class(rng, **options)``.
MODEL_TASKS = {"imagenet_like": ImagenetLike}


#: The network of a ``MODEL_TASKS`` task is drawn once (this seed), like a trained classifier; the
#: job seeds redraw its calibration and test data.
NETWORK_SEED = 12


def _draw(task: str, options: dict):
    """``draw(n, rng)`` for ``task`` with ``options``."""
    if task in MODEL_TASKS:
        try:
            return MODEL_TASKS[task](np.random.default_rng(NETWORK_SEED), **options).sample
        except TypeError as err:  # an option the task does not have
            raise ValueError(f"synthetic task {task!r}: {err}; see config/README.md for its options") from None
    if task in TASKS:
        return functools.partial(TASKS[task], **options)
    raise ValueError(f"synthetic task {task!r} unknown; allowed: {sorted(TASKS) + sorted(MODEL_TASKS)}")


def generate(task: str, seed: int, n_cal: int, n_test: int, **options) -> dict[str, dict]:
    """Calibration and test sets of ``task`` for one seed (test drawn from an independent stream)."""
    draw = _draw(task, options)
    cal_rng, test_rng = (np.random.default_rng([seed, part]) for part in (0, 1))
    return {"cal": draw(n_cal, cal_rng), "test": draw(n_test, test_rng)}


def generate_train(task: str, n_train: int, **options) -> dict:
    """The training split of a ``MODEL_TASKS`` network (KCal trains its projection on it), seed-independent."""
    if task not in MODEL_TASKS:
        raise ValueError(f"n_train: only the tasks {sorted(MODEL_TASKS)} have a training split, not {task!r}")
    return _draw(task, options)(n_train, np.random.default_rng([NETWORK_SEED, 1]))
