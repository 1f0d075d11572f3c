"""Aggregate per-job metrics into the long CSV and the per-metric tables.

Each table shows the mean ± std over seeds of every source × method and marks in bold, per source, the best
method and those a paired bootstrap of the test rows cannot tell from it (:mod:`calbench.stats.paired`),
instead of ranks that differ by noise. Average ranks over sources (the LECE paper's tables, docs/figures_and_studies.md:
methods ranked on the *displayed* mean, ties get the minimum rank) remain in ``average_ranks.md``, as the input of
the Friedman test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.data.store import LABEL_SHIFT_RESAMPLES, PEAK_KEY, WARNINGS_KEY
from calbench.metrics import lookup
from calbench.report.warnings import warning_lines
from calbench.stats.ranks import MIN_SOURCES, TOO_FEW

ID_COLUMNS = ("source", "method", "seed")
#: The ``test_set`` of the held-out test split; a shifted set is ``family/severity`` (docs/shift.md).
CLEAN = "clean"


def long_table(records) -> pd.DataFrame:
    """``source,method,seed,test_set,metric,value`` rows from the records of metrics JSON files (docs/architecture.md
    §3): their flat metrics are the ``clean`` test set's, their ``shifts`` the shifted sets'."""
    rows = []
    for record in records:
        ids = {k: record[k] for k in ID_COLUMNS}
        sets = {CLEAN: {k: v for k, v in record.items() if k not in (*ID_COLUMNS, "shifts", PEAK_KEY,
                                                                            LABEL_SHIFT_RESAMPLES, WARNINGS_KEY)},
                **record.get("shifts", {})}
        rows += [{**ids, "test_set": name, "metric": k, "value": v} for name, values in sets.items()
                 for k, v in values.items()]
    frame = pd.DataFrame(rows, columns=[*ID_COLUMNS, "test_set", "metric", "value"])
    frame["clean_first"] = frame["test_set"] != CLEAN
    frame = frame.sort_values([*ID_COLUMNS, "clean_first", "test_set", "metric"], kind="stable")
    return frame.drop(columns="clean_first").reset_index(drop=True)


def clean(long: pd.DataFrame) -> pd.DataFrame:
    """The rows of the clean test set (all rows of a table written without a ``test_set`` column)."""
    return long[long["test_set"] == CLEAN] if "test_set" in long else long


def summary(long: pd.DataFrame, metric_id: str, ties: str = "min") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Mean, std (ddof=0, as the LECE code) and rank tables (rows = sources, columns = methods).

    The std of a cell with one value is NaN: one seed measures no spread.

    ``ties="min"`` as the LECE paper's tables; ``"average"`` as the Dirichlet paper's Friedman test.
    """
    family, _ = lookup(metric_id)
    sub = long[long["metric"] == metric_id]
    grouped = sub.groupby(["source", "method"])["value"]
    mean = grouped.mean().unstack("method")
    std = grouped.std(ddof=0).where(grouped.count() > 1).unstack("method")
    shown = (mean * family.scale).round(family.decimals)
    ranks = family.badness(shown).rank(axis=1, method=ties)
    return mean, std, ranks


#: Significance level of the tables' marks (paired bootstrap, Holm against the best; calbench.stats.paired).
ALPHA = 0.05


#: What a resample draws (:mod:`calbench.stats.resampling`), as the tables' titles say it.
UNITS = {"pool rows": "pool rows (one count per row of the pool the seeds re-split, shared by the seeds that test "
                      "on it)",
         "test rows": "test rows"}


def unit_phrase(verdicts: pd.DataFrame, metric_id: str) -> str:
    """The resampling unit of ``metric_id``'s verdicts in words, per source where they differ."""
    rows = verdicts[verdicts["metric"] == metric_id]
    if "unit" not in rows:
        return UNITS["test rows"]
    by_unit = {unit: sorted(set(group["source"])) for unit, group in rows.groupby(rows["unit"].fillna(""))
               if unit}
    if len(by_unit) <= 1:
        unit = next(iter(by_unit), "test rows")
        return UNITS.get(unit, unit)
    return "; ".join(f"{UNITS.get(unit, unit)} for {', '.join(sources)}" for unit, sources in by_unit.items())


def markdown_table(long: pd.DataFrame, metric_id: str, method_order=None, verdicts: pd.DataFrame | None = None,
                   floors: dict | None = None, warnings: list | None = None) -> str:
    """One metric as a Markdown table of ``mean ± std`` cells (no "±" where one seed: it measures no spread).

    ``verdicts`` (:func:`calbench.stats.paired.frame` of every source) marks in bold the best method of
    each source and those tied with it; a last row (or column) counts each method's sources in that group.
    Methods are the rows when there are more methods than sources, so that the table fits a page. ``floors``
    (``{source: (mean, std, test rows)}``, :mod:`calbench.stats.noise_floor`) adds each source's noise floor and
    a note where the estimator's bias is as large as the values; ``warnings`` (rows of
    :func:`calbench.report.warnings.collect`) are listed under the table where they concern its cells.
    """
    family, _ = lookup(metric_id)
    mean, std, _ = summary(long, metric_id)
    methods = [m for m in (method_order or mean.columns) if m in mean.columns]
    sources = list(mean.index)
    scale, dec = family.scale, family.decimals
    tied = _tied(verdicts, metric_id)
    direction = family.direction
    scale_note = f", ×{scale:g}" if scale != 1 else ""
    marks = (f"**bold**: the best and the methods tied with it (paired bootstrap, resampling unit: "
             f"{unit_phrase(verdicts, metric_id)}; seeds pooled, Holm α = {ALPHA:g}; intervals in intervals.csv)"
             if tied is not None else
             "no marks: not tested here, as a signed metric, an estimator without a row-weighted form or beyond "
             f"the budget of recomputing it (`calbench recommend --metric {metric_id} --recompute` tests it by "
             "recomputing) or one that needs the true calibration map" if verdicts is not None else "no marks")
    title = f"{metric_id}{scale_note} ({direction}; mean ± std over seeds, no ± where one seed; {marks})"

    def cell(source, method):
        if np.isnan(mean.at[source, method]):
            return "–"
        spread = "" if np.isnan(std.at[source, method]) else f" ± {std.at[source, method] * scale:.{dec}f}"
        text = f"{mean.at[source, method] * scale:.{dec}f}{spread}"
        return f"**{text}**" if tied is not None and (source, method) in tied else text

    def count(method):  # "k/N": of the N sources the method ran on (one that needs embeddings runs on fewer)
        ran = [s for s in sources if not np.isnan(mean.at[s, method])]
        return f"{sum((s, method) in tied for s in ran)}/{len(ran)}"

    floor_cells = {s: f"{floors[s][0] * scale:.{dec}f} ± {floors[s][1] * scale:.{dec}f}" for s in sources
                   if floors and s in floors}
    group = "in best group" if tied is not None else None
    if len(methods) > len(sources):
        header = ["method", *sources] + ([group] if group else [])
        body = [[m, *(cell(s, m) for s in sources)] + ([count(m)] if group else []) for m in methods]
        if floor_cells:
            body.append(["*noise floor*", *(floor_cells.get(s, "–") for s in sources)] + ([""] if group else []))
    else:
        header = ["source", *methods] + (["noise floor"] if floor_cells else [])
        body = [[s, *(cell(s, m) for m in methods)] + ([floor_cells.get(s, "–")] if floor_cells else [])
                for s in sources]
        if group:
            body.append([f"**{group}**", *(count(m) for m in methods)] + ([""] if floor_cells else []))
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    lines += _floor_notes(metric_id, floors, mean, family) if floor_cells else []
    lines += unresampled_notes(verdicts, metric_id)
    lines += floor_notes(methods)
    lines += warning_lines(warnings or [], set(sources), methods)
    return "\n".join(lines) + "\n"


def _tied(verdicts: pd.DataFrame | None, metric_id: str) -> set | None:
    """``{(source, method)}`` in the best group of ``metric_id``, or None where it has no resampled verdicts."""
    if verdicts is None:
        return None
    rows = verdicts[(verdicts["metric"] == metric_id)]
    if rows.empty or rows["p_value"].isna().all():
        return None
    rows = rows[rows["tied_with_best"].eq(True)]
    return set(zip(rows["source"], rows["method"]))


def unresampled_notes(verdicts: pd.DataFrame | None, metric_id: str) -> list[str]:
    """Lines naming the cells of ``metric_id`` without an interval (hence untested) and why (the engine's
    ``note``, :func:`calbench.stats.paired.compare`); none where no cell has one (the title says why)."""
    if verdicts is None or "note" not in verdicts:
        return []
    rows = verdicts[verdicts["metric"] == metric_id]
    if rows["low"].isna().all():
        return []
    rows = rows[rows["note"].fillna("").ne("")]
    lines = [f"- {source}: {', '.join(group['method'])}: {note}"
             for (source, note), group in rows.groupby(["source", "note"], sort=True)]
    return ["", "Without an interval or mark:", *lines] if lines else []


def _floor_notes(metric_id: str, floors: dict, mean: pd.DataFrame, family) -> list[str]:
    """The noise floor's definition and, where the estimator is bias-dominated, its debiased variant."""
    from calbench.stats.noise_floor import bias_dominated, debiased_id

    lines = ["", "Noise floor: the estimator's mean (± std) on a perfectly calibrated model with the same outputs "
             "and test rows (labels drawn from the probabilities of ts, else uncal; stats/noise_floor.py)."]
    better = debiased_id(metric_id)
    for source, (floor, _, rows) in floors.items():
        if source not in mean.index:
            continue
        best = mean.loc[source].max() if family.higher_is_better else mean.loc[source].min()
        if bias_dominated(floor, best):
            offer = f"; `{better}` removes most of that bias" if better else ""
            lines.append(f"- {source}: a calibrated model reads {floor * family.scale:.{family.decimals}f} at "
                         f"{rows} test rows, at least half the best value: differences here are mostly "
                         f"estimator bias and noise{offer}")
    return lines


def floor_notes(methods) -> list[str]:
    """Notes naming the methods whose default output is floored away from 0 where the paper's is not
    (a calibrator's ``floor_note``), e.g. IROvA's and H-LECE's ``eps``."""
    from calbench.methods.registry import method_class, split_chain

    notes = []
    for method in methods:
        try:
            parts = split_chain(method)
        except ValueError:  # a column that is not a registered method (e.g. the true map)
            continue
        for part in parts:
            note = method_class(part).floor_note
            if note:
                notes.append(f"- {method}: output floored by default: {note}")
    return ["", "Floored outputs:", *notes] if notes else []


def average_ranks(long: pd.DataFrame, metric_ids) -> pd.DataFrame:
    """Average rank of each method over sources, one column per metric."""
    return pd.DataFrame({m: summary(long, m)[2].mean(axis=0) for m in metric_ids})


def paired_verdicts(long: pd.DataFrame, metrics, loader, resamples: int | None = None):
    """The paired bootstrap's verdicts (:func:`calbench.stats.paired.frame`) of every source × metric × method,
    from the test predictions ``loader((source, method, seed))`` (None where absent), and the noise floor
    ``{metric: {source: (mean, std, rows)}}`` of each calibration-error estimator resampled. Signed metrics are
    not tested (0 is best: a one-directional test does not apply); the estimates are the long table's (not
    computed again). Estimators without a row-weighted form on some outputs are recomputed on the same resamples
    within the engine's budget (:data:`~calbench.stats.draws.RECOMPUTE_SECONDS` per source). ``resamples``:
    :data:`~calbench.stats.resampling.RESAMPLES` by default, as ``calbench recommend``."""
    from calbench.stats.draws import source_draws
    from calbench.stats.noise_floor import is_calibration_error, noise_floors, reference_probs
    from calbench.stats.paired import compare, frame
    from calbench.stats.resampling import RESAMPLES

    verdicts, floors = [], {}
    for source, rows in long.groupby("source", sort=True):
        seeds = sorted(int(s) for s in rows["seed"].unique())
        methods = list(dict.fromkeys(rows["method"]))
        load = lambda method, seed, source=source: loader((source, method, seed))  # noqa: E731
        values = rows.set_index(["method", "seed", "metric"])["value"].to_dict()
        draws = source_draws(source, seeds, methods, metrics, load, resamples or RESAMPLES, recompute=False,
                             known=lambda method, seed, metric, values=values: values.get((method, seed, metric)))
        verdicts += [v for m in metrics if not lookup(m)[0].signed for v in compare(draws, m, alpha=ALPHA)]
        probs = reference_probs(methods, seeds, load)
        marked = list(filter(is_calibration_error, draws.draws))  # the estimators the tables mark
        for metric_id, floor in noise_floors(marked, probs).items():
            floors.setdefault(metric_id, {})[source] = (*floor, int(np.mean(draws.rows)))
    return frame(verdicts), floors


#: Characters a table line may take (a terminal or a page); wider tables are split into blocks of columns.
WIDTH = 120


def fitted_tables(rows, columns, cell, width: int = WIDTH) -> list[str]:
    """Markdown lines of a ``method`` × ``columns`` table of ``cell(row, column)`` strings, split into consecutive
    tables of columns (each repeating the method column) so that no line is longer than ``width``."""
    first = max(len("method"), *(len(r) for r in rows))
    blocks, block, used = [], [], first + 4
    for column in columns:
        size = max(len(column), *(len(cell(r, column)) for r in rows)) + 3
        if block and used + size > width:
            blocks.append(block)
            block, used = [], first + 4
        block.append(column)
        used += size
    blocks += [block] if block else []
    lines = []
    for block in blocks:
        lines += ["" if lines else None, "| method | " + " | ".join(block) + " |", "|---" * (len(block) + 1) + "|"]
        lines += [f"| {r} | " + " | ".join(cell(r, c) for c in block) + " |" for r in rows]
    return [line for line in lines if line is not None]


def best_group_counts(verdicts: pd.DataFrame, metric_ids) -> pd.DataFrame:
    """Per method (rows) and metric (columns): the sources on which it is the best or tied with it."""
    tied = verdicts[verdicts["tied_with_best"].eq(True) & verdicts["metric"].isin(metric_ids)]
    return tied.groupby(["method", "metric"]).size().unstack("metric").reindex(columns=list(metric_ids))


def write_tables(everything: pd.DataFrame, outputs: dict, metric_ids, method_order=None,
                 verdicts: pd.DataFrame | None = None, floors: dict | None = None, warned=()) -> list[Path]:
    """Write the long table ``everything`` (every test set, :func:`long_table`) to ``outputs["long"]``, the jobs'
    warnings ``warned`` (:func:`calbench.report.warnings.collect`) to ``outputs["warnings"]``, and from the clean
    test set each metric's table to ``outputs["per_metric"][metric]`` (with the warnings of its cells), the average
    ranks to ``outputs["ranks"]`` and all of them to ``outputs["summary"]`` (the paths of :mod:`calbench.jobs.paths`);
    with ``verdicts`` (the paired bootstrap's, see :func:`markdown_table`) also ``outputs["intervals"]`` and the
    best-group counts; ``floors``: ``{metric: {source: (mean, std, rows)}}``."""
    from calbench.report.warnings import write_warnings

    warned = list(warned)
    written = [Path(outputs["long"]), Path(outputs["warnings"])]
    write_warnings(written[1], warned)
    write_text_atomic(written[0], everything.to_csv(index=False, float_format="%.10g"))
    long = clean(everything)
    present = [m for m in metric_ids if m in set(long["metric"])]
    sections = []
    for metric_id in present:
        text = markdown_table(long, metric_id, method_order, verdicts, (floors or {}).get(metric_id), warned)
        sections.append(text)
        written.append(Path(outputs["per_metric"][metric_id]))
        write_text_atomic(written[-1], text)
    ranks = average_ranks(long, present)
    order = [m for m in (method_order or ranks.index) if m in ranks.index]
    rank_md = ["### Average rank over sources (lower is better; ranks on the displayed means, ties share the "
               "best rank: the Friedman test's input, critical_difference figures)", ""]
    if long["source"].nunique() >= MIN_SOURCES:
        rank_md += fitted_tables(order, present, lambda m, c: f"{ranks.at[m, c]:.2f}")
    else:
        rank_md.append(f"{TOO_FEW[0].upper()}{TOO_FEW[1:]} ({long['source'].nunique()} sources; the ranks and "
                       f"the Friedman test need {MIN_SOURCES} or more).")
    if verdicts is not None:
        counts = best_group_counts(verdicts, present).reindex(order)
        marked = [c for c in present if verdicts.loc[verdicts["metric"] == c, "p_value"].notna().any()]
        written.append(Path(outputs["intervals"]))
        write_text_atomic(written[-1], verdicts.to_csv(index=False, float_format="%.10g"))
        rank_md += ["", f"### Sources on which each method is the best or tied with it (of {long['source'].nunique()}"
                    f"; paired bootstrap, Holm α = {ALPHA:g})", ""]
        rank_md += fitted_tables(order, marked, lambda m, c: str(0 if np.isnan(counts.at[m, c]) else
                                                                 int(counts.at[m, c])))
    written.append(Path(outputs["ranks"]))
    write_text_atomic(written[-1], "\n".join(rank_md) + "\n")
    written.append(Path(outputs["summary"]))
    write_text_atomic(written[-1], "# calbench results\n\n" + "\n".join(sections) + "\n" + "\n".join(rank_md) + "\n")
    return written
