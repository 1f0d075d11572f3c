"""The statistics behind ``calbench recommend``, the tables' marks and the critical-difference figures: a paired
bootstrap of the test rows of every seed, seeds pooled.

For one source, seeds s = 1..S each hold n_s test rows. Resample r draws every seed's rows with replacement, as
row counts W_s[r] (one draw of n_s rows), the same counts for every method and metric, so that differences
between methods are paired (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", §16.4). The metric of
method m on seed s under resample r, θ*_{m,s,r}, comes from the metric's row-weighted form
(:func:`calbench.metrics.bootstrap.values_from_counts`: a matrix product for means of per-row terms, weighted
bin sums for binned ECE), vectorised over resamples. The tables show the mean over seeds θ̄_m of the seeds'
estimates θ̂_{m,s}; its resamples pool the seeds as a two-stage bootstrap does (Davison & Hinkley 1997,
"Bootstrap Methods and their Application", §3.8: resample the seeds, then the rows within each), with the seed
stage shrunk so that the row noise, already in every seed's estimate, is not counted twice:

    θ*_{m,r} = mean_s θ*_{m,s,r} + k_m · mean_j (θ̂_{m,J_{r,j}} − θ̄_m),   J_{r,1..S} seeds drawn with replacement,
    k_m² = S · max(0, b_m − v_m) / ((S − 1) · b_m),

b_m the variance of θ̂_{m,s} over seeds and v_m the mean over seeds of the row-resampling variance of θ*_{m,s,·}.
The resampled variance is then v_m / S + max(0, b_m − v_m) / S: the row noise of the mean over S seeds plus the
between-seed spread that the row noise does not explain. With one seed (or seeds that differ by row noise only)
it is the row bootstrap of that seed.

Per source and metric: the percentile interval of each method (Efron & Tibshirani §13.3) of its resamples shifted
by the bootstrap estimate of bias, mean(θ*) − θ̂ (§10.3): binned ECE grows on resamples (a resample's duplicated
rows make its bins look more certain), so unshifted percentiles can lie wholly above the estimate. The shifted
resamples are clipped at 0 for a metric whose every resample is non-negative: an interval never goes below 0
for an ECE. Against the best
method by estimate, a two-sided paired p-value for "no difference" from the bootstrap standard error of the
difference (2 Φ(−|d| / se): unlike a count of resamples beyond 0, it resolves the small p-values that Holm's
procedure needs over many methods with a few hundred resamples), adjusted over the comparisons with the best by
Holm's step-down procedure (Holm 1979). A method is *tied with the best* when its adjusted p-value is at least
α, else *worse than the best*: the family-wise error of calling a method worse is at most α.

A metric whose row-weighted form is unavailable on some method's outputs (equal-mass bins whose edges fall on
tied scores with different outcomes, e.g. saturated confidences) is recomputed on each of the same resamples'
rows for those methods, so that the pairing stays exact; one without such a form for any outputs (CV bins, KDE,
kernels, fits on the test rows) only with ``recompute``. Its cost is projected from one resample of one
method and seed (resamples that read only the confidence columns do not copy the probabilities), and
the metrics are taken cheapest first while the projected recomputation of the source fits the budget
(:data:`RECOMPUTE_SECONDS`); a metric left out gets no interval for the methods that lack the form, and
:attr:`SourceDraws.omitted` says why.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from calbench.metrics import lookup
from calbench.metrics.bootstrap import TABLE_RESAMPLES, counts_of, values_from_counts  # noqa: F401 (re-exported)
from calbench.metrics.registry import MetricContext

#: Resamples of the test rows by default (``calbench recommend``).
RESAMPLES = 1000
#: Elements of the row counts [R, n] held at once; larger test sets are resampled in blocks of resamples.
COUNTS_BUDGET = 2**24
#: CPU seconds that recomputing the metrics without a row-weighted form may take per call of :func:`source_draws`
#: (one source, or one shifted test set), projected from one resample of each method and seed.
RECOMPUTE_SECONDS = 20.0
#: The method whose accuracy the others' is compared with (``acc_change``).
REFERENCE = "uncal"


def row_counts(n: int, resamples: int, key: Sequence[int]) -> list[np.ndarray]:
    """Row counts of ``resamples`` draws of ``n`` rows with replacement, in blocks ``[r, n]`` of at most
    :data:`COUNTS_BUDGET` elements, drawn from a generator seeded by ``key`` (the same for every method)."""
    rng = np.random.default_rng([7919, n, *key])
    block = max(1, COUNTS_BUDGET // max(n, 1))
    return [counts_of(rng.integers(n, size=(min(block, resamples - start), n)))
            for start in range(0, resamples, block)]


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


def source_draws(source: str, seeds: Sequence[int], methods: Sequence[str], metrics: Sequence[str],
                 load: Callable[[str, int], dict | None], resamples: int = RESAMPLES,
                 recompute: bool = True, known: Callable[[str, int, str], float | None] | None = None,
                 budget: float = RECOMPUTE_SECONDS) -> SourceDraws:
    """Estimates and paired resamples of ``metrics`` for every method of ``source``.

    ``load(method, seed)`` returns the test outputs ``{"probs", "labels", "index"}`` (optionally
    ``"true_probs"``) or None where the method did not run. Metrics that need the uncalibrated probabilities take
    those of :data:`REFERENCE` on the same seed. A metric without a row-weighted form on a method's outputs
    (:func:`calbench.metrics.bootstrap.values_from_counts`) is recomputed on each resample's rows: every such
    metric with ``recompute``; else one that has the form on other outputs, where the projected cost fits
    ``budget`` CPU seconds (module docstring). ``known(method,
    seed, metric)`` gives the estimates already computed (the metrics JSONs' values; None where absent), so that
    costly estimators are not evaluated again. The methods of a seed are resampled in threads
    (:func:`calbench.parallel.thread_map`).
    """
    from calbench.parallel import thread_map

    methods, seeds = list(methods), list(seeds)
    estimates = {m: np.full((len(methods), len(seeds)), np.nan) for m in metrics}
    draws: dict[str, np.ndarray] = {}
    rows, firsts = [], []
    timing: dict[str, float] = {}  # metric → CPU seconds of one recomputed resample
    count: dict[str, int] = {}  # metric → the methods × seeds that lack its fast form
    lock = threading.Lock()
    omitted: dict[str, str] = {}
    lacking: dict[tuple[int, int], list] = {}  # (method, seed) → its (metric, family, groups) without a fast form
    for j, seed in enumerate(seeds):
        first_method, first = _first_outputs(methods, seed, load)
        firsts.append(first_method)
        if first is None:
            rows.append(0)
            continue
        n = int(first["labels"].size)
        rows.append(n)
        uncal = first["probs"] if first_method == REFERENCE else None
        blocks = row_counts(n, resamples, (seed,))

        def one(i, seed=seed, uncal=uncal, blocks=blocks, first=first, first_method=first_method):
            """Estimates and fast resamples of method ``i`` on this seed, ``{metric: (estimate, values or None)}``,
            and the metrics it lacks the fast form of (the first method and seed that lacks one times it)."""
            out = first if methods[i] == first_method else load(methods[i], seed)
            if out is None:
                return {}, {}
            ctx, families = _context(source, seed, out, first, first_method, methods[i], uncal, metrics)
            values = [values_from_counts(ctx, families, counts, recompute=recompute) for counts in blocks]
            given = {m: known(methods[i], seed, m) for m, _, _ in families} if known else {}
            probes = {}
            for m, family, groups in families:
                if m not in values[0] and (family.pointwise or family.resampled) is None:
                    probes[m] = None  # no row-weighted form for any outputs: recomputed only when asked
                elif m not in values[0]:
                    with lock:  # one method and seed times a metric's recomputation for all
                        first = m not in timing
                        timing.setdefault(m, 0.0)
                    if first:
                        clock = time.thread_time()
                        values_from_counts(ctx, [(m, family, groups)], blocks[0][:1], recompute=True)
                        timing[m] = time.thread_time() - clock
                    probes[m] = (m, family, groups)
            return ({m: (family.function(ctx, **groups) if given.get(m) is None else given[m],
                         np.concatenate([v[m] for v in values]) if m in values[0] else None)
                     for m, family, groups in families}, probes)

        for i, (found, probes) in enumerate(thread_map(lambda i: one(i), range(len(methods)))):
            for metric_id, (estimate, values) in found.items():
                estimates[metric_id][i, j] = estimate
                if values is not None:
                    _store(draws, metric_id, i, j, values, (len(methods), len(seeds), resamples))
            for metric_id, entry in probes.items():
                if entry is None:
                    omitted[metric_id] = ("no row-weighted form: recomputing it on every resample costs "
                                          f"{resamples} times its evaluation, and is done on request "
                                          "(`calbench recommend --recompute`)")
                    continue
                count[metric_id] = count.get(metric_id, 0) + 1
                lacking.setdefault((i, j), []).append(entry)
    cost = {m: timing[m] * resamples * k for m, k in count.items()}  # projected CPU seconds of recomputing
    chosen, spent = set(), 0.0
    for metric_id in sorted(cost, key=cost.get):  # cheapest first
        if spent + cost[metric_id] <= budget:
            chosen.add(metric_id)
            spent += cost[metric_id]
        else:
            omitted[metric_id] = (f"no row-weighted form on these outputs, and recomputing it on each of the "
                                  f"{resamples} resamples would take about {cost[metric_id]:.0f} CPU s, beyond the "
                                  f"{budget:g} s budget of a source (`calbench recommend --recompute` does it)")

    def recomputed(item):
        """``{metric: resamples}`` of the chosen metrics that method i lacks the fast form of on seed j, on the
        same row counts as every other method's resamples (the pairing stays exact)."""
        (i, j), entries = item
        seed = seeds[j]
        first = load(firsts[j], seed)
        out = first if methods[i] == firsts[j] else load(methods[i], seed)
        uncal = first["probs"] if firsts[j] == REFERENCE else None
        ctx, _ = _context(source, seed, out, first, firsts[j], methods[i], uncal, [])
        parts = [values_from_counts(ctx, entries, counts) for counts in row_counts(rows[j], resamples, (seed,))]
        return {metric_id: np.concatenate([v[metric_id] for v in parts]) for metric_id, _, _ in entries}

    todo = [(key, chosen_entries) for key, entries in lacking.items()
            for chosen_entries in [[e for e in entries if e[0] in chosen]] if chosen_entries]
    for ((i, j), _), found in zip(todo, thread_map(recomputed, todo)):
        for metric_id, values in found.items():
            _store(draws, metric_id, i, j, values, (len(methods), len(seeds), resamples))
    return SourceDraws(source, seeds, methods, estimates, draws, seed_picks(seeds, resamples), rows, omitted)


def seed_picks(seeds: Sequence[int], resamples: int) -> np.ndarray:
    """[R, S] the seeds drawn by the seed stage (indices into ``seeds``), the same for every method."""
    return np.random.default_rng([7919, len(seeds), *seeds]).integers(len(seeds), size=(resamples, len(seeds)))


def _first_outputs(methods, seed, load):
    """The reference outputs of ``seed`` (uncal's, else the first method's that ran): ``(method, outputs)``, which
    fix the test rows; ``(None, None)`` where no method ran."""
    return next(((m, out) for m in dict.fromkeys([REFERENCE, *methods]) if m in methods
                 for out in [load(m, seed)] if out is not None), (None, None))


def _context(source, seed, out, first, first_method, method, uncal, metrics):
    """The metric context of ``method``'s outputs ``out`` on ``seed`` and the ``(metric, family, groups)`` of
    ``metrics`` it can compute; an error where its test rows differ from those of ``first_method``."""
    if not np.array_equal(out.get("index"), first.get("index")):
        raise ValueError(f"{source}, seed {seed}: the test rows of {method} differ from those of {first_method}; "
                         "rerun their calibrate jobs so that every method is tested on the same rows")
    ctx = MetricContext(np.asarray(out["probs"], dtype=np.float64), np.asarray(out["labels"]),
                        out.get("true_probs"), seed, uncal)
    families = [(m, *lookup(m)) for m in metrics]
    return ctx, [(m, f, g) for m, f, g in families if not (f.needs_true_probs and ctx.true_probs is None)
                 and not (f.needs_uncal_probs and ctx.uncal_probs is None)]


def _store(draws, metric_id, i, j, values, shape):
    """``draws[metric_id][i, j] = values``, the array made (NaN) on first use."""
    draws.setdefault(metric_id, np.full(shape, np.nan))[i, j] = values


def estimates_only(source: str, rows, metrics: Sequence[str], why: str = "no test outputs to resample"
                   ) -> SourceDraws:
    """The per-seed values of a long table's ``rows`` (``method, seed, metric, value``; e.g. of a run whose
    outputs are gone) as :class:`SourceDraws` without resamples: :func:`compare` then gives estimates and the
    best, with no intervals or tests, and ``why`` as each verdict's note."""
    seeds = sorted(int(s) for s in rows["seed"].unique())
    methods = list(dict.fromkeys(rows["method"]))
    estimates = {}
    for metric_id in metrics:
        table = rows[rows["metric"] == metric_id].pivot_table(index="method", columns="seed", values="value")
        estimates[metric_id] = table.reindex(index=methods, columns=seeds).to_numpy(dtype=np.float64)
    return SourceDraws(source, seeds, methods, estimates, {}, np.zeros((0, len(seeds)), dtype=int),
                       [0] * len(seeds), dict.fromkeys(metrics, why))


def pooled(estimates: np.ndarray, draws: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Resamples ``[..., R]`` of the mean over seeds from per-seed ``estimates`` ``[..., S]`` and resamples
    ``draws`` ``[..., S, R]`` (module docstring: the row stage within every seed, then the shrunk seed stage)."""
    within = draws.mean(axis=-2)
    seeds = estimates.shape[-1]
    if seeds == 1:
        return within
    between = estimates.var(axis=-1, ddof=1)
    row_noise = draws.var(axis=-1).mean(axis=-1)
    excess = np.maximum(between - row_noise, 0.0)
    shrink = np.sqrt(np.divide(seeds * excess, (seeds - 1) * between, out=np.zeros_like(between),
                               where=between > 0))
    centred = estimates - estimates.mean(axis=-1, keepdims=True)
    seed_stage = centred[..., picks].mean(axis=-1)  # [..., R]: the mean of the drawn seeds' deviations
    return within + shrink[..., None] * seed_stage


def percentile_interval(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval (Efron & Tibshirani §13.3) of resamples ``[..., R]``."""
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2], axis=-1)
    return low, high


def paired_p_values(difference: np.ndarray, resampled: np.ndarray) -> np.ndarray:
    """Two-sided p-values of "no difference" for estimated differences ``[...]`` with paired resamples
    ``[..., R]``: 2 Φ(−|d| / se), se the resamples' standard deviation (the bootstrap standard error; Efron &
    Tibshirani §16.4 test a difference by its bootstrap distribution). 1 where the difference and every
    resample are 0 (identical outputs), 0 where the resamples do not vary but the difference is not 0."""
    from scipy.special import ndtr

    se = resampled.std(axis=-1)
    z = np.divide(np.abs(difference), se, out=np.where(difference == 0, 0.0, np.inf), where=se > 0)
    return 2 * ndtr(-z)


def _intervals(estimates: np.ndarray, resampled: np.ndarray, picks: np.ndarray, level: float):
    """Percentile intervals of the mean over seeds of each row of ``estimates`` ``[M, S]`` (resamples ``[M, S, R]``),
    the resamples shifted by their bias and, for a metric whose every resample is non-negative, clipped at 0
    (module docstring)."""
    values = pooled(estimates, resampled, picks)
    values = values - (values.mean(axis=-1) - estimates.mean(axis=1))[:, None]  # less the bias
    values = np.where((resampled >= 0).all(axis=(1, 2))[:, None], np.maximum(values, 0.0), values)
    return percentile_interval(values, level)


def _paired_gaps(estimates, resampled, reference, reference_resampled, picks):
    """Per-seed differences ``[M, S]`` of each row from the ``reference`` row ``[S]`` and the paired resamples
    ``[M, R]`` of their mean over seeds (the same row counts and seed draws for both; Efron & Tibshirani §16.4)."""
    difference = estimates - reference
    if not len(difference):
        return difference, np.empty((0, picks.shape[0]))
    return difference, pooled(difference, resampled - reference_resampled, picks)


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's (1979) step-down adjusted p-values: the i-th smallest of k is max_{j ≤ i} min(1, (k − j + 1) p_(j))."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    k = p.size
    adjusted = np.maximum.accumulate(np.minimum(1.0, (k - np.arange(k)) * p[order]))
    out = np.empty(k)
    out[order] = adjusted
    return out


@dataclass(frozen=True)
class Verdict:
    """One method on one source and metric, as ``recommend --json`` records it."""

    source: str
    metric: str
    method: str
    estimate: float
    low: float
    high: float
    best: str
    #: None where untested (no resamples)
    tied_with_best: bool | None
    #: Holm-adjusted paired p-value against the best (NaN for the best itself or without resamples)
    p_value: float
    #: why the interval is missing (empty where it is shown)
    note: str = ""

    def record(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def compare(draws: SourceDraws, metric_id: str, level: float = 0.95, alpha: float = 0.05) -> list[Verdict]:
    """Every method with an estimate on each seed of ``draws.source``, best first: its estimate (the mean over
    seeds), percentile interval and whether it is tied with the best (Holm-adjusted paired test at ``alpha``,
    over the methods resampled). A method without resamples of ``metric_id`` (:attr:`SourceDraws.omitted`) has
    NaN interval and p-value, ``tied_with_best`` None and a ``note`` saying why; where the best has none, no
    method is tested."""
    family, _ = lookup(metric_id)
    if family.signed:
        raise ValueError(f"{metric_id} is signed (0 is best): the paired tests compare methods in one direction; "
                         "compare its unsigned parts or an ECE instead (docs/metrics.md, Signed calibration error)")
    estimates = draws.estimates[metric_id]
    complete = ~np.isnan(estimates).any(axis=1)
    if not complete.any():
        return []
    index = np.flatnonzero(complete)
    means = estimates[index].mean(axis=1)
    order = index[np.argsort(-means if family.higher_is_better else means, kind="stable")]
    best = order[0]
    resampled, sampled = _resampled(draws, metric_id, order)
    low, high, p_adj = (np.full(len(order), np.nan) for _ in range(3))
    if sampled.any():
        low[sampled], high[sampled] = _intervals(estimates[order[sampled]], resampled[order[sampled]],
                                                 draws.seed_picks, level)
    tested = sampled & (np.arange(len(order)) > 0) & sampled[0]
    if tested.any():
        _, gap = _paired_gaps(estimates[order[tested]], resampled[order[tested]], estimates[best], resampled[best],
                              draws.seed_picks)
        difference = estimates[order[tested]].mean(axis=1) - estimates[best].mean()
        p_adj[tested] = holm(paired_p_values(difference, gap))
    names = [draws.methods[i] for i in order]
    note = draws.omitted.get(metric_id, "no resamples")
    return [Verdict(draws.source, metric_id, name, float(estimates[i].mean()), float(lo), float(hi), names[0],
                    True if k == 0 else None if np.isnan(p) else bool(p >= alpha), float(p),
                    "" if ok else note)
            for k, (name, i, lo, hi, p, ok) in enumerate(zip(names, order, low, high, p_adj, sampled))]


def _resampled(draws: SourceDraws, metric_id: str, rows: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """The resamples ``[M, S, R]`` of ``metric_id`` (None where it has none) and, per row of ``rows``, whether that
    method has them on every seed."""
    resampled = draws.draws.get(metric_id)
    if resampled is None:
        return None, np.zeros(len(rows), dtype=bool)
    return resampled, ~np.isnan(resampled[rows]).any(axis=(1, 2))


def frame(verdicts) -> "pd.DataFrame":  # noqa: F821 (pandas imported lazily)
    """The verdicts as a table ``source, metric, method, estimate, low, high, best, tied_with_best, p_value``."""
    import pandas as pd  # lazy: recommend's JSON needs no pandas

    return pd.DataFrame([v.record() for v in verdicts], columns=list(Verdict.__dataclass_fields__))


def mean_over_sets(parts: Sequence[SourceDraws], source: str) -> SourceDraws:
    """The mean over test sets (e.g. the corruption families of one shift severity, docs/shift.md) of ``parts``,
    one :class:`SourceDraws` per set with the same methods and seeds: estimates and resamples averaged set by set.
    Each set's rows are resampled by :func:`row_counts` of its size and seed, so that shifted copies of the same
    test rows are resampled together (the test images are the units drawn) and the sets stay fixed."""
    first = parts[0]
    if any(p.methods != first.methods or p.seeds != first.seeds for p in parts):
        raise ValueError(f"{source}: the test sets averaged differ in their methods or seeds")
    shared = [m for m in first.estimates if all(m in p.estimates for p in parts)]
    estimates = {m: np.mean([p.estimates[m] for p in parts], axis=0) for m in shared}
    draws = {m: np.mean([p.draws[m] for p in parts], axis=0) for m in shared if all(m in p.draws for p in parts)}
    omitted = {m: reason for p in parts for m, reason in p.omitted.items()}  # a set's reason holds for the mean
    return SourceDraws(source, first.seeds, first.methods, estimates, draws, first.seed_picks,
                       [int(np.sum([p.rows[j] for p in parts])) for j in range(len(first.seeds))], omitted)


CONTRAST_COLUMNS = ["source", "metric", "method", "estimate", "low", "high", "reference", "difference",
                    "difference_low", "difference_high", "p_value", "note"]


def against_reference(draws: SourceDraws, metric_id: str, reference: str = REFERENCE, level: float = 0.95
                      ) -> "pd.DataFrame":  # noqa: F821 (pandas imported lazily)
    """Every method with an estimate on each seed: its estimate (mean over seeds) and percentile interval, and its
    paired difference from ``reference`` (method − reference; percentile interval of the paired resamples, the
    two-sided p-value of :func:`paired_p_values` adjusted over the methods by :func:`holm`). NaN, with a ``note``
    saying why, for a method without resamples of the metric (:attr:`SourceDraws.omitted`); the difference is
    NaN for the reference itself, for a signed metric (0 is best: a difference of signed values says nothing of
    which is better) and where ``reference`` has no resamples."""
    import pandas as pd

    family, _ = lookup(metric_id)
    estimates = draws.estimates[metric_id]
    rows = np.flatnonzero(~np.isnan(estimates).any(axis=1))
    resampled, sampled = _resampled(draws, metric_id, rows)
    out = pd.DataFrame({"source": draws.source, "metric": metric_id,
                        "method": [draws.methods[i] for i in rows], "estimate": estimates[rows].mean(axis=1),
                        "reference": reference,
                        "note": np.where(sampled, "", draws.omitted.get(metric_id, "no resamples"))},
                       columns=CONTRAST_COLUMNS)
    numbers = ["low", "high", "difference", "difference_low", "difference_high", "p_value"]
    out[numbers] = out[numbers].astype(np.float64)
    if not sampled.any():
        return out
    out.loc[sampled, "low"], out.loc[sampled, "high"] = _intervals(estimates[rows[sampled]],
                                                                   resampled[rows[sampled]], draws.seed_picks, level)
    ref = draws.methods.index(reference) if reference in draws.methods else -1
    if family.signed or ref not in rows[sampled]:
        return out
    where = sampled & (rows != ref)
    others = rows[where]
    per_seed, gap = _paired_gaps(estimates[others], resampled[others], estimates[ref], resampled[ref],
                                 draws.seed_picks)
    difference = per_seed.mean(axis=1)
    gap = gap - (gap.mean(axis=-1) - difference)[:, None]  # less the bias, as the intervals of the values
    low, high = percentile_interval(gap, level)
    out.loc[where, "difference"], out.loc[where, "difference_low"], out.loc[where, "difference_high"] = (
        difference, low, high)
    out.loc[where, "p_value"] = holm(paired_p_values(difference, gap))
    return out
