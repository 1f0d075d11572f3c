"""Tables of calibration and prior adaptation under label shift (docs/label_shift.md), from the long metrics table
and the evaluate jobs' bootstrap resamples.

As Alexandari, Kundaje & Shrikumar (ICML 2020, Tables 1–2) report, per calibrator and shift strength (a Dirichlet α
or a tweak-one ρ): the metric's mean over the drawn sets and seeds, with the paired bootstrap of
:mod:`calbench.stats`. A seed's estimate is the mean over its draws of that strength; its resamples are the means
over the draws of the metric on each set redrawn from the test rows resampled as the main tables resample them (the
same unit and counts: one count per pool row, shared by the seeds that test on it, where seeds re-split a pool;
:func:`calbench.data.label_shift.redraw_weights`, the same for every method), with the weights re-estimated on
every resample; the seeds are pooled by the engine's two-stage bootstrap, whose seed stage carries what the rows do
not explain (the calibration split and the drawn priors, which differ per seed). A cell of an estimated adaptation
is flagged where the adaptation collapsed on some of its sets (``collapse.<estimator>``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.data.label_shift import PREFIX, parse_name
from calbench.data.store import LABEL_SHIFT_RESAMPLES
from calbench.metrics import lookup
from calbench.stats.draws import SourceDraws
from calbench.stats.paired import compare
from calbench.stats.resampling import RESAMPLES, seed_picks

LEVEL = 0.95
NO_INTERVAL = ("A cell without an interval has no resamples: a signed metric (0 is best, not tested), a metric "
               "without a row-weighted form, or metrics JSONs without `label_shift_resamples` (rerun the evaluate "
               "jobs).")


COLLAPSE_NOTE = ("⚠ collapsed n %: in that share of the sets (draws × seeds) the adaptation collapsed (more than half "
                 "the estimated prior on classes the unadapted predictions rarely choose, or one class predicted for "
                 "nearly every row; docs/label_shift.md): the cell's value is not a clean estimate of adaptation.")


def is_label_shifted(test_sets: pd.Series) -> pd.Series:
    return test_sets.str.startswith(PREFIX)


def without_label_shift(long: pd.DataFrame) -> pd.DataFrame:
    """The rows of the clean and covariate-shifted test sets."""
    return long[~is_label_shifted(long["test_set"])] if "test_set" in long else long


def label_shift_rows(long: pd.DataFrame) -> pd.DataFrame:
    """Each (source, method, seed, metric)'s mean over the label-shifted sets (``calbench recommend
    --under-label-shift``), in the long table's columns but ``test_set``."""
    shifted = long[is_label_shifted(long["test_set"])] if "test_set" in long else long.iloc[:0]
    if shifted.empty:
        raise ValueError("the results hold no label-shifted test sets: give a source `label_shift` "
                         "(docs/label_shift.md) and rerun")
    return shifted.groupby(["source", "method", "seed", "metric"], as_index=False)["value"].mean()


def read_resamples(metric_files) -> dict[tuple[str, str, int], dict]:
    """(source, method, seed) → the metrics JSON's resamples ``{"rows_of": the group resampled, "sets":
    {kind+strength: {metric: [R]}}}`` (:func:`calbench.jobs.evaluate.label_shifted_values`); JSONs of earlier
    versions, whose resamples drew each seed's rows on their own, give none."""
    out = {}
    for path in metric_files:
        record = json.loads(Path(path).read_text())
        found = record.get(LABEL_SHIFT_RESAMPLES)
        if isinstance(found, dict) and "sets" in found:
            out[record["source"], record["method"], int(record["seed"])] = found
    return out


#: What a label-shifted cell's resample draws, per unit of the test rows (:data:`calbench.report.tables.UNITS`).
SET_UNITS = {"pool rows": "pool rows (one count per row of the pool the seeds re-split, shared by the seeds that "
                          "test on it), each label-shifted set redrawn from them",
             "test rows": "test rows, each label-shifted set redrawn from them"}


def resampled_unit(resamples: dict, source: str) -> str:
    """``pool rows`` where two seeds of ``source`` resampled rows of one group (a pool they re-split), else ``test
    rows``: the unit of :mod:`calbench.stats.resampling`."""
    groups = {(seed, found["rows_of"]) for (src, _, seed), found in resamples.items() if src == source}
    names = [group for _, group in groups]
    return "pool rows" if len(names) != len(set(names)) else "test rows"


def label_shift_draws(source: str, rows: pd.DataFrame, metrics, resamples: dict, strengths=None) -> SourceDraws:
    """The engine's :class:`SourceDraws` of ``source`` from per-seed values ``rows`` (``method, seed, metric,
    value``: means over the label-shifted sets in question) and the resamples of :func:`read_resamples` averaged
    over ``strengths`` (keys such as ``dirichlet0.1``; None: all, each strength having the same number of draws, so
    that this is the mean over every set). A metric without resamples for every method and seed gets none."""
    seeds = sorted(int(s) for s in rows["seed"].unique())
    methods = list(dict.fromkeys(rows["method"]))
    estimates, draws = {}, {}
    counts = set()
    for metric_id in metrics:
        table = rows[rows["metric"] == metric_id].pivot_table(index="method", columns="seed", values="value")
        estimates[metric_id] = table.reindex(index=methods, columns=seeds).to_numpy(dtype=np.float64)
        found = [[_mean_resamples(resamples.get((source, m, s), {}).get("sets", {}), metric_id, strengths)
                  for s in seeds] for m in methods]
        if all(f is not None for per in found for f in per):
            draws[metric_id] = np.array(found)
            counts.add(draws[metric_id].shape[-1])
    total = counts.pop() if len(counts) == 1 else 0
    draws = draws if total else {}
    return SourceDraws(source, seeds, methods, estimates, draws, seed_picks(seeds, total), [0] * len(seeds),
                       unit=resampled_unit(resamples, source))


def unit_words(resamples: dict, sources) -> str:
    """The resampling unit of the label-shifted cells of ``sources`` in words, per source where they differ."""
    by_unit: dict[str, list[str]] = {}
    for source in sources:
        by_unit.setdefault(resampled_unit(resamples, source), []).append(source)
    if len(by_unit) <= 1:
        return SET_UNITS[next(iter(by_unit), "test rows")]
    return "; ".join(f"{SET_UNITS[unit]} for {', '.join(names)}" for unit, names in by_unit.items())


def _mean_resamples(per_strength: dict, metric_id: str, strengths) -> np.ndarray | None:
    keys = list(per_strength) if strengths is None else strengths
    found = [per_strength.get(k, {}).get(metric_id) for k in keys]
    return None if not found or any(f is None for f in found) else np.mean(found, axis=0)


def collapse_shares(long: pd.DataFrame) -> dict[tuple[str, str, str, float, str], float]:
    """(source, method, kind, strength, estimator) → the share of that strength's sets (over draws and seeds)
    whose adaptation collapsed, where ``collapse.<est>`` was computed and is above 0."""
    sub = long[is_label_shifted(long["test_set"]) & long["metric"].str.startswith("collapse.")]
    out = {}
    for (source, method, test_set, metric_id), value in sub.groupby(
            ["source", "method", "test_set", "metric"])["value"].mean().items():
        kind, strength, _ = parse_name(test_set)
        out.setdefault((source, method, kind, strength, metric_id.split(".", 1)[1]), []).append(value)
    return {key: float(np.mean(v)) for key, v in out.items() if np.mean(v) > 0}


def _estimator(metric_id: str) -> str | None:
    """The estimated adaptation a metric id reads (``nll.em`` → ``em``), None for the oracle and unadapted ids."""
    from calbench.metrics.label_shift import ESTIMATED

    last = metric_id.rsplit(".", 1)[-1]
    return last if last in ESTIMATED and "." in metric_id else None


def strength_markdown(long: pd.DataFrame, metric_id: str, resamples: dict, method_order=None) -> str:
    """Per source: methods × shift strength of ``metric_id``: the mean over draws and seeds [the 95 % percentile
    interval of the paired bootstrap], in bold the best and the methods tied with it (Holm, α = 0.05)."""
    family, _ = lookup(metric_id)
    scale, dec = family.scale, family.decimals
    sub = long[(long["metric"] == metric_id) & is_label_shifted(long["test_set"])]
    lines = [f"### {metric_id}{f', ×{scale:g}' if scale != 1 else ''} under label shift ({family.direction}; mean "
             f"over draws and seeds [{LEVEL:.0%} percentile interval of a paired bootstrap ({RESAMPLES} resamples), "
             f"resampling unit: {unit_words(resamples, sorted(set(sub['source'])))}; weights re-estimated on every "
             "resample, seeds pooled]; **bold**: the best and the methods a paired test cannot tell from it, "
             "Holm-adjusted at α = 0.05)", ""]
    if sub.empty:
        return "\n".join(lines + ["No label-shifted set has this metric.", ""])
    parsed = pd.DataFrame([parse_name(n)[:2] for n in sub["test_set"]], columns=["kind", "strength"], index=sub.index)
    per_seed = sub.join(parsed).groupby(["source", "kind", "strength", "method", "seed", "metric"],
                                        as_index=False)["value"].mean()
    for source, by_source in per_seed.groupby("source", sort=True):
        columns = sorted({(k, s) for k, s in zip(by_source["kind"], by_source["strength"])},
                         key=lambda c: (c[0], c[1] if c[0] == "tweak_one" else -c[1]))
        methods = list(dict.fromkeys(by_source["method"]))
        methods = [m for m in (method_order or methods) if m in methods]
        cells, bare, flagged = {}, False, False
        for kind, strength in columns:
            part = by_source[(by_source["kind"] == kind) & (by_source["strength"] == strength)]
            draws = label_shift_draws(source, part, [metric_id], resamples, [f"{kind}{strength:g}"])
            if family.signed:  # 0 is best: the paired tests compare in one direction (compare refuses it)
                bare = True
                cells.update(((m, kind, strength), f"{v * scale:.{dec}f}")
                             for m, v in zip(draws.methods, draws.estimates[metric_id].mean(axis=1)) if np.isfinite(v))
                continue
            for v in compare(draws, metric_id, LEVEL):
                bare = bare or np.isnan(v.low)
                text = f"{v.estimate * scale:.{dec}f}" + ("" if np.isnan(v.low) else
                                                          f" [{v.low * scale:.{dec}f}, {v.high * scale:.{dec}f}]")
                cells[v.method, kind, strength] = f"**{text}**" if v.tied_with_best else text
        estimator = _estimator(metric_id)
        for (src, method, kind, strength, est), share in collapse_shares(long).items():
            if src == source and est == estimator and (method, kind, strength) in cells:
                cells[method, kind, strength] += f" ⚠ collapsed {share:.0%}"
                flagged = True
        lines += [f"**{source}**", "", "| method | " + " | ".join(
            f"Dirichlet α={s:g}" if k == "dirichlet" else f"tweak-one ρ={s:g}" for k, s in columns) + " |",
            "|---|" + "---|" * len(columns)]
        lines += [f"| {m} | " + " | ".join(cells.get((m, k, s), "–") for k, s in columns) + " |" for m in methods]
        lines.append("")
        if bare:
            lines += [NO_INTERVAL, ""]
        if flagged:
            lines += [COLLAPSE_NOTE, ""]
    return "\n".join(lines)
