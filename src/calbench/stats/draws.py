"""Every method's estimates and paired resamples of the metrics of one source: the input of the tests and intervals
(:mod:`calbench.stats.paired`).

Resample r gives every test row a count (:mod:`calbench.stats.resampling`: one count per row of the group the
seeds test on, shared by the seeds that test on it), the same counts for every method and metric, so that
differences between methods are paired (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", §16.4). The
metric of method m on seed s under resample r, θ*_{m,s,r}, comes from the metric's row-weighted form
(:func:`calbench.metrics.bootstrap.values_from_counts`: a matrix product for means of per-row terms, weighted bin
sums for binned ECE), vectorised over resamples.

A metric whose row-weighted form is unavailable on some method's outputs (KS beyond its budget, CV-chosen bins) is
recomputed on each of the same resamples' rows for those methods, so that the pairing stays exact; one without such
a form for any outputs (KDE, kernels, fits on the test rows) only with ``recompute``. Its cost is projected from one
resample of one method and seed, and the metrics are taken cheapest first while the projected recomputation of the
source fits the budget (:data:`RECOMPUTE_SECONDS`); a metric left out gets no interval for the methods that lack the
form, and :attr:`SourceDraws.omitted` says why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from calbench.metrics import lookup
from calbench.metrics.bootstrap import values_from_counts
from calbench.metrics.registry import MetricContext
from calbench.stats.resampling import RESAMPLES, Resampler, seed_picks, seed_rows

#: CPU seconds that recomputing the metrics without a row-weighted form may take per call of :func:`source_draws`
#: (one source, or one shifted test set), projected from one resample of each method and seed.
RECOMPUTE_SECONDS = 20.0
#: Seeds whose methods are resampled in one pool of threads (their row counts and the counts' forms held at once,
#: :data:`calbench.metrics.row_counts.KEPT`): one pool balances the threads better than a pool per seed.
SEEDS_AT_ONCE = 2
#: The method whose outputs the metrics comparing with the uncalibrated model read (``ece_gain.*``).
REFERENCE = "uncal"

Load = Callable[[str, int], "dict | None"]
Known = Callable[[str, int, str], "float | None"]


@dataclass
class SourceDraws:
    """Every method's per-seed estimates and resampled values of the metrics of one source."""

    source: str
    seeds: list[int]
    methods: list[str]
    #: metric → [methods, seeds] estimates (NaN where a method has no output for a seed)
    estimates: dict[str, np.ndarray]
    #: metric → [methods, seeds, R] resampled values, for the metrics that could be resampled
    draws: dict[str, np.ndarray]
    #: [R, seeds] the seeds drawn by the seed stage (indices into ``seeds``), shared by every method
    seed_picks: np.ndarray
    #: [seeds] test rows per seed
    rows: list[int]
    #: metric → why it has no resamples for the methods whose outputs lack its row-weighted form
    omitted: dict[str, str] = field(default_factory=dict)
    #: what a resample draws (:mod:`calbench.stats.resampling`): ``pool rows`` where seeds share test rows
    unit: str = "test rows"


@dataclass(frozen=True)
class _Seed:
    """One seed's reference outputs: the method whose outputs fix the test rows, and those outputs."""

    index: int
    seed: int
    method: str
    outputs: dict


@dataclass
class _Found:
    """What one method on one seed gave: its estimates, its fast resamples, the metrics it lacks the row-weighted
    form of (``(metric, family, groups)``) and those that have no such form at all."""

    estimates: dict[str, float] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)
    lacking: list = field(default_factory=list)
    formless: list[str] = field(default_factory=list)


def source_draws(source: str, seeds: Sequence[int], methods: Sequence[str], metrics: Sequence[str], load: Load,
                 resamples: int = RESAMPLES, recompute: bool = True, known: Known | None = None,
                 budget: float = RECOMPUTE_SECONDS) -> SourceDraws:
    """Estimates and paired resamples of ``metrics`` for every method of ``source``.

    ``load(method, seed)`` returns the test outputs ``{"probs", "labels", "index"}`` (optionally ``"rows_of"``, the
    dump group the index refers to, and ``"true_probs"``) or None where the method did not run. Metrics that need
    the uncalibrated probabilities take those of :data:`REFERENCE` on the same seed. A metric without a
    row-weighted form on a method's outputs is recomputed on each resample's rows: every such metric with
    ``recompute``; else one that has the form on other outputs, where the projected cost fits ``budget`` CPU
    seconds (module docstring). ``known(method, seed, metric)`` gives the estimates already computed (the metrics
    JSONs' values; None where absent), so that costly estimators are not evaluated again. The methods of
    :data:`SEEDS_AT_ONCE` seeds at a time are resampled in threads (:func:`calbench.parallel.thread_map`).
    """
    from calbench.parallel import thread_map

    methods, seeds = list(methods), list(seeds)
    references = [_reference(j, seed, methods, load) for j, seed in enumerate(seeds)]
    resampler = Resampler([seed_rows(r.outputs, r.seed) if r else None for r in references], resamples)
    shape = (len(methods), len(seeds), resamples)
    estimates = {m: np.full(shape[:2], np.nan) for m in metrics}
    draws: dict[str, np.ndarray] = {}
    lacking: dict[tuple[int, int], list] = {}
    formless: set[str] = set()
    ran = [reference for reference in references if reference is not None]
    for pair in (ran[k:k + SEEDS_AT_ONCE] for k in range(0, len(ran), SEEDS_AT_ONCE)):
        counts = {reference.index: resampler.counts(reference.index) for reference in pair}
        items = [(reference, counts[reference.index], i) for reference in pair for i in range(len(methods))]
        found = thread_map(lambda item: _method_draws(source, methods[item[2]], item[0], metrics, load, item[1],
                                                      recompute, known), items)
        for (reference, _, i), one in zip(items, found):
            for metric_id, estimate in one.estimates.items():
                estimates[metric_id][i, reference.index] = estimate
            for metric_id, values in one.values.items():
                _store(draws, metric_id, (i, reference.index), values, shape)
            if one.lacking:
                lacking[i, reference.index] = one.lacking
            formless.update(one.formless)
    omitted = dict.fromkeys(formless, "no row-weighted form: recomputing it on every resample costs "
                                      f"{resamples} times its evaluation, and is done on request "
                                      "(`calbench recommend --recompute`)")
    chosen = _within_budget(lacking, methods, references, resampler, source, load, budget, omitted)
    todo = [(key, entries) for key, all_entries in lacking.items()
            for entries in [[e for e in all_entries if e[0] in chosen]] if entries]
    recomputed = thread_map(lambda item: _recomputed(item, methods, references, resampler, source, load), todo)
    for ((i, j), _), found in zip(todo, recomputed):
        for metric_id, values in found.items():
            _store(draws, metric_id, (i, j), values, shape)
    return SourceDraws(source, seeds, methods, estimates, draws, seed_picks(seeds, resamples),
                       [int(r.outputs["labels"].size) if r else 0 for r in references], omitted,
                       "pool rows" if resampler.shared() else "test rows")


def _reference(index: int, seed: int, methods: list[str], load: Load) -> _Seed | None:
    """The outputs that fix ``seed``'s test rows: :data:`REFERENCE`'s where it ran, else the first method's that
    ran; None where no method ran."""
    for method in dict.fromkeys([REFERENCE, *methods]):
        if method in methods:
            outputs = load(method, seed)
            if outputs is not None:
                return _Seed(index, seed, method, outputs)
    return None


def _context(source: str, reference: _Seed, method: str, outputs: dict, metrics) -> tuple[MetricContext, list]:
    """The metric context of ``method``'s ``outputs`` on the reference's seed and the ``(metric, family, groups)``
    of ``metrics`` it can compute; an error where its test rows differ from the reference's."""
    if not np.array_equal(outputs.get("index"), reference.outputs.get("index")):
        raise ValueError(f"{source}, seed {reference.seed}: the test rows of {method} differ from those of "
                         f"{reference.method}; rerun their calibrate jobs so that every method is tested on the "
                         "same rows")
    uncal = reference.outputs["probs"] if reference.method == REFERENCE else None
    ctx = MetricContext(np.asarray(outputs["probs"], dtype=np.float64), np.asarray(outputs["labels"]),
                        outputs.get("true_probs"), reference.seed, uncal)
    families = [(m, *lookup(m)) for m in metrics]
    return ctx, [(m, f, g) for m, f, g in families if not (f.needs_true_probs and ctx.true_probs is None)
                 and not (f.needs_uncal_probs and ctx.uncal_probs is None)]


def _outputs(method: str, reference: _Seed, load: Load) -> dict | None:
    return reference.outputs if method == reference.method else load(method, reference.seed)


def _method_draws(source, method, reference: _Seed, metrics, load: Load, counts, recompute, known) -> _Found:
    """Estimates and fast resamples of ``method`` on the reference's seed (:class:`_Found`)."""
    outputs = _outputs(method, reference, load)
    if outputs is None:
        return _Found()
    ctx, families = _context(source, reference, method, outputs, metrics)
    parts = [values_from_counts(ctx, families, block, recompute=recompute) for block in counts]
    found = _Found()
    for metric_id, family, groups in families:
        given = known(method, reference.seed, metric_id) if known else None
        found.estimates[metric_id] = family.function(ctx, **groups) if given is None else given
        if metric_id in parts[0]:
            found.values[metric_id] = np.concatenate([part[metric_id] for part in parts])
        elif family.pointwise is None and family.resampled is None:
            found.formless.append(metric_id)
        else:
            found.lacking.append((metric_id, family, groups))
    return found


def _within_budget(lacking, methods, references, resampler, source, load, budget, omitted) -> set[str]:
    """The metrics to recompute for the methods and seeds that lack their row-weighted form, cheapest first while
    the projected CPU seconds fit ``budget``; the others get a reason in ``omitted``."""
    cases: dict[str, list] = {}
    for (i, j), entries in lacking.items():
        for entry in entries:
            cases.setdefault(entry[0], []).append((i, j, entry))
    cost = {}
    for metric_id, found in cases.items():  # one resample of the first method and seed lacking it, times the rest
        i, j, entry = found[0]
        ctx, _ = _context(source, references[j], methods[i], _outputs(methods[i], references[j], load), [])
        clock = time.thread_time()
        values_from_counts(ctx, [entry], resampler.counts(j)[0][:1], recompute=True)
        cost[metric_id] = (time.thread_time() - clock) * resampler.resamples * len(found)
    chosen, spent = set(), 0.0
    for metric_id in sorted(cost, key=cost.get):
        if spent + cost[metric_id] <= budget:
            chosen.add(metric_id)
            spent += cost[metric_id]
        else:
            omitted[metric_id] = (f"no row-weighted form on these outputs, and recomputing it on each of the "
                                  f"{resampler.resamples} resamples would take about {cost[metric_id]:.0f} CPU s, "
                                  f"beyond the {budget:g} s budget of a source (`calbench recommend --recompute` "
                                  "does it)")
    return chosen


def _recomputed(item, methods, references, resampler, source, load) -> dict[str, np.ndarray]:
    """``{metric: resamples}`` of the metrics ``entries`` that method i lacks the fast form of on seed j, on the
    same row counts as every other method's resamples (the pairing stays exact)."""
    (i, j), entries = item
    ctx, _ = _context(source, references[j], methods[i], _outputs(methods[i], references[j], load), [])
    parts = [values_from_counts(ctx, entries, block) for block in resampler.counts(j)]
    return {metric_id: np.concatenate([part[metric_id] for part in parts]) for metric_id, _, _ in entries}


def _store(draws, metric_id, where, values, shape):
    """``draws[metric_id][where] = values``, the array made (NaN) on first use."""
    draws.setdefault(metric_id, np.full(shape, np.nan))[where] = values


def estimates_only(source: str, rows, metrics: Sequence[str], why: str = "no test outputs to resample"
                   ) -> SourceDraws:
    """The per-seed values of a long table's ``rows`` (``method, seed, metric, value``; e.g. of a run whose
    outputs are gone) as :class:`SourceDraws` without resamples: :func:`calbench.stats.paired.compare` then gives
    estimates and the best, with no intervals or tests, and ``why`` as each verdict's note."""
    seeds = sorted(int(s) for s in rows["seed"].unique())
    methods = list(dict.fromkeys(rows["method"]))
    estimates = {}
    for metric_id in metrics:
        table = rows[rows["metric"] == metric_id].pivot_table(index="method", columns="seed", values="value")
        estimates[metric_id] = table.reindex(index=methods, columns=seeds).to_numpy(dtype=np.float64)
    return SourceDraws(source, seeds, methods, estimates, {}, np.zeros((0, len(seeds)), dtype=int),
                       [0] * len(seeds), dict.fromkeys(metrics, why))


def mean_over_sets(parts: Sequence[SourceDraws], source: str) -> SourceDraws:
    """The mean over test sets (e.g. the corruption families of one shift severity, docs/shift.md) of ``parts``,
    one :class:`SourceDraws` per set with the same methods and seeds: estimates and resamples averaged set by set.
    A shifted copy of a test row keeps the row's id, so it gets the row's count on every resample (the rows are
    the units drawn) and the sets stay fixed."""
    first = parts[0]
    if any(p.methods != first.methods or p.seeds != first.seeds for p in parts):
        raise ValueError(f"{source}: the test sets averaged differ in their methods or seeds")
    shared = [m for m in first.estimates if all(m in p.estimates for p in parts)]
    estimates = {m: np.mean([p.estimates[m] for p in parts], axis=0) for m in shared}
    draws = {m: np.mean([p.draws[m] for p in parts], axis=0) for m in shared if all(m in p.draws for p in parts)}
    omitted = {m: reason for p in parts for m, reason in p.omitted.items()}  # a set's reason holds for the mean
    return SourceDraws(source, first.seeds, first.methods, estimates, draws, first.seed_picks,
                       [int(np.sum([p.rows[j] for p in parts])) for j in range(len(first.seeds))], omitted,
                       first.unit)
