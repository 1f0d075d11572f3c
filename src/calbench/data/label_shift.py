"""Label-shifted test sets (docs/label_shift.md): rows of a seed's test split resampled to new class priors.

A source's ``label_shift`` (config/README.md) names the priors: ``dirichlet: [α, ...]`` draws π ~ Dirichlet(α·1)
(Lipton, Wang & Smola 2018; Alexandari, Kundaje & Shrikumar 2020), ``tweak_one: [ρ, ...]`` gives one class,
drawn uniformly (or ``tweak_class``, as Alexandari et al. fix class 3 of CIFAR-10), prior ρ and the others
(1 − ρ)/(k − 1) each (Lipton et al. 2018); ``draws`` sets of each.
A set is named ``prior/dirichlet{α}/{i}`` or ``prior/tweak_one{ρ}/{i}`` in the ``test_set`` column. Its rows:
n·π rounded to integers by largest remainder (so its label frequencies are π to within 1/n), each class's rows
drawn with replacement from the test rows of that class; classes absent from the test rows get prior 0 (the
others' renormalised). Everything is drawn from ``numpy.random.default_rng([seed, crc32(name)])``: a set depends
on the seed and its name only, not on the other sets configured nor on the method evaluated.
"""

from __future__ import annotations

import zlib

import numpy as np

PREFIX = "prior/"
KINDS = ("dirichlet", "tweak_one")


def set_names(spec: dict | None) -> list[str]:
    """The names of the label-shifted sets of a source's ``label_shift`` entry, in config order."""
    if not spec:
        return []
    return [f"{PREFIX}{kind}{strength:g}/{i}" for kind in KINDS for strength in spec.get(kind, [])
            for i in range(spec["draws"])]


def parse_name(name: str) -> tuple[str, float, int]:
    """``prior/dirichlet0.1/3`` → ("dirichlet", 0.1, 3)."""
    head, _, draw = name.removeprefix(PREFIX).partition("/")
    kind = next(k for k in KINDS if head.startswith(k))
    return kind, float(head[len(kind):]), int(draw)


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def target_priors(name: str, num_classes: int, rng: np.random.Generator, tweak_class: int | None = None
                  ) -> np.ndarray:
    """The class priors of set ``name``: Dirichlet(α·1), or tweak-one (a uniformly drawn class at ρ, or
    ``tweak_class``; the class is drawn either way, so that the rows drawn after it use the same numbers)."""
    kind, strength, _ = parse_name(name)
    if kind == "dirichlet":
        return rng.dirichlet(np.full(num_classes, strength))
    priors = np.full(num_classes, (1.0 - strength) / (num_classes - 1))
    drawn = rng.integers(num_classes)
    if tweak_class is not None and not 0 <= tweak_class < num_classes:
        raise ValueError(f"label_shift.tweak_class: {tweak_class} is not a class of these {num_classes}-class "
                         f"outputs; give one of 0-{num_classes - 1}, or leave it out to draw the class per set")
    priors[drawn if tweak_class is None else tweak_class] = strength
    return priors


def class_counts(priors: np.ndarray, size: int) -> np.ndarray:
    """n·π rounded to integers summing to n by the largest remainders."""
    exact = priors * size
    counts = np.floor(exact).astype(np.int64)
    short = size - counts.sum()
    counts[np.argsort(counts - exact, kind="stable")[:short]] += 1
    return counts


def draw_rows(name: str, labels: np.ndarray, num_classes: int, seed: int, size: int | None = None,
              tweak_class: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(row indices into ``labels``, the set's true priors) of label-shifted set ``name`` for ``seed``; ``size``
    rows (default: as many as ``labels``); ``tweak_class``: tweak-one's class (default: drawn per set). The true
    priors are the drawn set's label frequencies."""
    rng = _rng(seed, name)
    size = labels.size if size is None else size
    priors = target_priors(name, num_classes, rng, tweak_class)
    available = np.bincount(labels, minlength=num_classes)
    priors = np.where(available > 0, priors, 0.0)
    priors /= priors.sum()
    counts = class_counts(priors, size)
    classes = np.repeat(np.arange(num_classes), counts)
    return _within_classes(labels, classes, rng.random(size), num_classes), counts / size


def _within_classes(labels: np.ndarray, classes: np.ndarray, uniforms: np.ndarray, num_classes: int) -> np.ndarray:
    """Row indices into ``labels``: for each entry of ``classes`` (any shape, as ``uniforms`` in [0, 1)) a row of
    that class, chosen uniformly by its uniform."""
    available = np.bincount(labels, minlength=num_classes)
    order = np.argsort(labels, kind="stable")
    starts = np.concatenate([[0], np.cumsum(available)[:-1]])
    return order[starts[classes] + np.floor(uniforms * available[classes]).astype(np.int64)]


def redraw_weights(name: str, labels: np.ndarray, class_sizes: np.ndarray, seed: int, counts: np.ndarray
                   ) -> np.ndarray:
    """Bootstrap row weights [R, N] over the seed's test rows ``labels`` (N) for label-shifted set ``name``: each
    resample redraws the test rows, then the set. The test rows' ``counts`` [R, N] are the tables' (one multinomial
    draw of the rows of the group the seeds test on, shared by every seed that tests on a row:
    :func:`calbench.stats.resampling.unit_counts`), and the set's ``class_sizes`` rows of each class are drawn again
    from that resample's rows of the class (row i with probability counts_i over the class's count), as
    :func:`draw_rows` drew them from the test rows: so the interval carries the variation of the rows sampled and
    of the draw of the set (which rows, repeated how often). A class of which a resample holds no row (chance about
    e^(−n_c) for n_c test rows) is drawn from its test rows uniformly, as the set itself. A resample's weights are
    its rows' counts scaled to sum to N (the metrics' row-weighted forms divide by the rows' count), its true priors
    the set's. The set stage is seeded by the seed and the name only: every method's outputs are resampled alike,
    and the differences between methods are paired."""
    from calbench.kernels.label_shift import redraw_counts  # lazy: numba only where sets are redrawn

    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), 4242])
    k = int(max(labels.max() + 1, class_sizes.size))
    available = np.bincount(labels, minlength=k)
    missing = np.flatnonzero((np.asarray(class_sizes) > 0) & (available[:class_sizes.size] == 0))
    if missing.size:
        raise ValueError(f"label-shifted set {name!r}: class_sizes asks for rows of classes {missing.tolist()}, which "
                         "the test labels do not hold; a set draws its rows from the test rows of each class")
    classes = np.repeat(np.arange(class_sizes.size), class_sizes)
    uniforms = rng.random((counts.shape[0], classes.size))
    out = np.zeros((counts.shape[0], labels.size))
    redraw_counts(np.ascontiguousarray(counts, dtype=np.int64), np.argsort(labels, kind="stable"),
                  np.concatenate([[0], np.cumsum(available)[:-1]]), available, classes, uniforms,
                  labels.size / classes.size, out)
    return out
