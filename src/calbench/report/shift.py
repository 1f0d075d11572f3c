"""Tables and figures of calibration under dataset shift (docs/shift.md), from the long metrics table.

Ovadia et al. (NeurIPS 2019, Fig. 2) summarise each shift intensity by the metric's distribution over the
corruption families; calbench's tables show its mean over families and seeds per severity (0 = the clean test
split), the mean over every shifted set ("under shift"), and each method's rank on the clean split beside its
rank under shift (ranked as the clean tables: on the displayed mean, ties get the minimum rank).

Each cell carries the interval of the paired bootstrap of the main tables (:mod:`calbench.stats`)
over the rows it rests on: the rows the seeds test on resampled as the clean table's (shifted copies of a test
row get the row's count), the mean over the column's sets (the families are a fixed list, not a sample), the seeds
pooled; the difference from ``uncal`` is paired the same way and tested with Holm's adjustment over the column's
methods.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from calbench.metrics import lookup
from calbench.report.label_shift import without_label_shift
from calbench.report.tables import ALPHA, CLEAN, UNITS, clean
from calbench.stats.draws import RECOMPUTE_SECONDS, REFERENCE, mean_over_sets, source_draws
from calbench.stats.paired import against_reference
from calbench.stats.resampling import RESAMPLES

#: The metrics of the shift figure, as Ovadia et al. draw them (ECE, NLL, Brier score, accuracy): the first
#: configured metric of each pattern.
FIGURE_METRICS = ("ece.conf.", "nll", "brier", "acc")
UNDER_SHIFT = "under shift"


def with_severity(long: pd.DataFrame) -> pd.DataFrame:
    """``long`` (but its label-shifted sets, docs/label_shift.md) with ``family`` and ``severity`` columns
    (``clean``: family ``clean``, severity 0)."""
    long = without_label_shift(long)
    parts = long["test_set"].str.split("/", n=1, expand=True).reindex(columns=[0, 1])
    out = long.assign(family=parts[0], severity=pd.to_numeric(parts[1]).fillna(0).astype(int))
    return out


def severity_means(long: pd.DataFrame, metric_id: str) -> pd.DataFrame:
    """Rows (source, method), columns severities 0 (clean) … 5 and :data:`UNDER_SHIFT`: the metric's mean over
    corruption families and seeds (under shift: over every shifted set and seed)."""
    sub = with_severity(long[long["metric"] == metric_id])
    by_severity = sub.groupby(["source", "method", "severity"])["value"].mean().unstack("severity")
    shifted = sub[sub["severity"] > 0].groupby(["source", "method"])["value"].mean().rename(UNDER_SHIFT)
    return by_severity.join(shifted)


def shifted_sources(long: pd.DataFrame) -> list[str]:
    long = without_label_shift(long)
    return sorted(long.loc[long["test_set"] != CLEAN, "source"].unique())


def ranks(means: pd.DataFrame, metric_id: str, column) -> pd.DataFrame:
    """Rank of each method within each source (rows sources, columns methods) on ``means[column]``."""
    family, _ = lookup(metric_id)
    shown = (means[column].unstack("method") * family.scale).round(family.decimals)
    return family.badness(shown).rank(axis=1, method="min")


def shift_cells(long: pd.DataFrame, metric_ids, load, resamples: int = RESAMPLES,
                level: float = 0.95) -> pd.DataFrame:
    """Every cell of the severity tables with its interval and paired difference from ``uncal``
    (:func:`calbench.stats.paired.against_reference`, columns ``CONTRAST_COLUMNS`` and ``column``:
    a severity, 0 = clean, or :data:`UNDER_SHIFT`), from the outputs ``load(source, test_set, method, seed)``
    (``{"probs", "labels", "index"}``, None where absent) and the long table's estimates."""
    frames = []
    long = with_severity(long)
    for source in shifted_sources(long):
        rows = long[long["source"] == source]
        metrics = [m for m in metric_ids if m in set(rows["metric"])]
        for column, combined in column_draws(source, rows, metrics, load, resamples).items():
            frames += [against_reference(combined, m, level=level).assign(column=column) for m in metrics]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def column_draws(source: str, rows: pd.DataFrame, metrics, load, resamples: int, columns=None,
                 recompute: bool = False) -> dict:
    """``{column: SourceDraws}`` of ``source``'s severity-table ``columns`` (severities, 0 = clean, and
    :data:`UNDER_SHIFT`; all by default): the paired bootstrap of each test set's rows
    (:func:`~calbench.stats.draws.source_draws`, the long table's ``rows`` (:func:`with_severity`)
    giving the estimates, the recomputation budget of a source shared among its sets), averaged over the
    column's sets (:func:`~calbench.stats.draws.mean_over_sets`); ``recompute``: every estimator
    without a row-weighted form recomputed, whatever the cost."""
    seeds = sorted(int(s) for s in rows["seed"].unique())
    methods = list(dict.fromkeys(rows["method"]))
    values = rows.set_index(["test_set", "method", "seed", "metric"])["value"].to_dict()
    sets = rows.drop_duplicates("test_set").set_index("test_set")["severity"]
    members = {int(k): sets.index[sets == k] for k in sorted(sets.unique())}
    members[UNDER_SHIFT] = sets.index[sets > 0]
    wanted = list(members) if columns is None else columns
    needed = sorted({name for column in wanted for name in members[column]})
    draws = {name: source_draws(source, seeds, methods, metrics,
                                lambda method, seed, name=name: load(source, name, method, seed), resamples,
                                recompute=recompute, known=lambda method, seed, metric, name=name: values.get(
                                    (name, method, seed, metric)), budget=RECOMPUTE_SECONDS / len(needed))
             for name in needed}
    return {column: mean_over_sets([draws[n] for n in members[column]], source) for column in wanted}


def cell_mark(row, family) -> str:
    """``over`` / ``under`` (a signed metric whose interval lies above / below 0: over- or under-confident), ``+`` /
    ``−`` (better / worse than ``uncal``: Holm-adjusted paired p-value below :data:`ALPHA`), else nothing."""
    if family.signed:
        return " over" if row.low > 0 else " under" if row.high < 0 else ""
    if np.isnan(row.p_value) or row.p_value >= ALPHA:
        return ""
    return " +" if (row.difference > 0) == family.higher_is_better else " −"


def severity_markdown(long: pd.DataFrame, metric_id: str, cells: pd.DataFrame, method_order=None,
                      images=None) -> str:
    """Per shifted source: methods × severity of ``metric_id`` (mean over families and seeds), each cell with its
    interval and mark (:func:`shift_cells`, :func:`cell_mark`); for a signed metric the statements of over- and
    under-confidence that the intervals support; where ``images`` (source → (channels, side) of the images
    calbench corrupted, :func:`calbench.jobs.shift.corrupted_images`) has the source, :func:`scaling_note`."""
    family, _ = lookup(metric_id)
    scale, dec = family.scale, family.decimals
    sub = cells[cells["metric"] == metric_id] if len(cells) else cells
    marks = ("over / under: over- / under-confident, the interval above / below 0" if family.signed else
             f"+ / −: better / worse than {REFERENCE} (paired bootstrap, Holm over the column's methods, "
             f"α = {ALPHA:g})")
    unit = UNITS.get(sub["unit"].iloc[0] if len(sub) and "unit" in sub else "test rows")
    intervals = (f"[95 % interval]: paired bootstrap, resampling unit: {unit}; seeds pooled; {marks}"
                 if len(sub) and sub["low"].notna().any() else
                 "no intervals or marks: the notes below say why")
    lines = [f"### {metric_id}{f', ×{scale:g}' if scale != 1 else ''} under shift ({family.direction}; mean over "
             f"corruption families and seeds per severity, 0 = clean test split; {intervals})", ""]
    sources = [s for s in shifted_sources(long) if len(sub) and s in set(sub["source"])]
    if not sources:
        lines.append("No source with shifted test sets has this metric (`true_ce.*` needs a true calibration map, "
                     "which only synthetic sources know).")
    for source in sources:
        table = sub[sub["source"] == source].set_index(["method", "column"])
        columns = [c for c in dict.fromkeys(table.index.get_level_values("column")) if c != UNDER_SHIFT]
        columns = sorted(columns) + [UNDER_SHIFT]
        present = set(table.index.get_level_values("method"))
        methods = [m for m in (method_order or dict.fromkeys(table.index.get_level_values("method")))
                   if m in present]

        def cell(method, column, table=table):
            if (method, column) not in table.index:
                return "–"
            row = table.loc[(method, column)]
            interval = " †" if np.isnan(row.low) else f" [{row.low * scale:.{dec}f}, {row.high * scale:.{dec}f}]"
            return f"{row.estimate * scale:.{dec}f}{interval}{cell_mark(row, family)}"

        lines += [f"**{source}**", "", "| method | " + " | ".join(map(column_name, columns)) + " |",
                  "|---|" + "---|" * len(columns)]
        lines += [f"| {m} | " + " | ".join(cell(m, c) for c in columns) + " |" for m in methods]
        lines += ["", *confidence_statements(table, methods, columns)] if family.signed else []
        lines += ["", *missing_notes(table)] if table["low"].isna().any() else []
        lines += ["", scaling_note(long, source, *images[source])] if (images or {}).get(source) else []
        lines.append("")
    return "\n".join(lines)


def scaling_note(long: pd.DataFrame, source: str, channels: int, side: int) -> str:
    """The families of ``source``'s shifted sets that ran with constants other than the published ones at the
    images' side (:func:`calbench.corruptions.scaled_constants`, the corruptions' own rules), each with its
    constants."""
    from calbench.corruptions import FAMILIES, scaled_constants

    sub = with_severity(long[long["source"] == source])
    families = [f for f in dict.fromkeys(sub.loc[sub["severity"] > 0, "family"]) if f in FAMILIES]
    scaled = scaled_constants(families, channels, side)
    images = f"{side} px {'grey' if channels == 1 else 'colour'} images"
    if not scaled:
        return f"Constants: every family's published ones on these {images} (docs/corruptions.md, Sizes)."
    return (f"Constants scaled to these {images} (docs/corruptions.md, Sizes): "
            + "; ".join(f"`{family}`: {text}" for family, text in scaled.items()) + ".")


def missing_notes(table: pd.DataFrame) -> list[str]:
    """Lines saying why the cells marked † of one source's severity table have no interval (the engine's
    ``note``)."""
    missing = table[table["low"].isna()].reset_index()
    missing = missing.assign(note=missing["note"].fillna("").replace("", "no resamples"))
    names = lambda values: ", ".join(map(str, dict.fromkeys(values)))  # noqa: E731
    return [f"† {names(group['method'])} ({names(map(column_name, group['column']))}): {note}"
            for note, group in missing.groupby("note", sort=True)]


def column_name(column) -> str:
    """A severity table's column heading: ``clean``, ``severity k`` or :data:`UNDER_SHIFT`."""
    return "clean" if column == 0 else column if column == UNDER_SHIFT else f"severity {column}"


def confidence_statements(table: pd.DataFrame, methods, columns) -> list[str]:
    """Sentences naming, per method, the columns where a signed calibration error's interval excludes 0."""
    lines = []
    for method in methods:
        rows = table.loc[method].reindex(columns)
        if rows["low"].isna().all():
            lines.append(f"- {method}: no interval, so neither over- nor under-confidence is claimed")
            continue
        over, under = rows.index[rows["low"] > 0], rows.index[rows["high"] < 0]
        parts = ([f"over-confident at {', '.join(map(column_name, over))}"] if len(over) else []) + (
            [f"under-confident at {', '.join(map(column_name, under))}"] if len(under) else [])
        lines.append(f"- {method}: {'; '.join(parts) if parts else 'neither: every interval contains 0'}")
    return lines


def ranking_markdown(long: pd.DataFrame, metric_ids, method_order=None) -> str:
    """Each method's average rank over the shifted sources, on the clean split and under shift, per metric (those
    the shifted sources have)."""
    sources = shifted_sources(long)
    shifted = long[long["source"].isin(sources)]
    metric_ids = [m for m in metric_ids if m in set(shifted["metric"])]
    lines = ["### Ranking on the clean test split and under shift (average rank over the sources with shifted "
             "sets; lower is better)", "",
             "| method | " + " | ".join(f"{m} clean | {m} shift" for m in metric_ids) + " |",
             "|---|" + "---|---|" * len(metric_ids)]
    columns = {}
    for metric_id in metric_ids:
        means = severity_means(shifted, metric_id)
        columns[metric_id] = (ranks(means, metric_id, 0).mean(), ranks(means, metric_id, UNDER_SHIFT).mean())
    methods = sorted({m for pair in columns.values() for m in pair[0].index})
    methods = [m for m in (method_order or methods) if m in methods]
    lines += [f"| {m} | " + " | ".join(f"{columns[c][0].get(m, np.nan):.2f} | {columns[c][1].get(m, np.nan):.2f}"
                                       for c in metric_ids) + " |" for m in methods]
    return "\n".join(lines) + "\n"


def ranking_rows(long: pd.DataFrame, under_shift: bool = False) -> pd.DataFrame:
    """The clean test split's rows, or (``under_shift``) each (source, method, seed, metric)'s mean over the
    shifted test sets, in the long table's columns but ``test_set``."""
    if not under_shift:
        return clean(long).drop(columns="test_set", errors="ignore")
    long = without_label_shift(long)
    shifted = long[long["test_set"] != CLEAN] if "test_set" in long else long.iloc[:0]
    if shifted.empty:
        raise ValueError("the results hold no shifted test sets: give a source `shifts` (docs/shift.md) and rerun")
    return shifted.groupby(["source", "method", "seed", "metric"], as_index=False)["value"].mean()


def figure_metrics(metric_ids) -> list[str]:
    """The first configured metric of each of :data:`FIGURE_METRICS` (ECE, NLL, Brier, accuracy)."""
    found = []
    for prefix in FIGURE_METRICS:
        match = [m for m in metric_ids if m == prefix or (prefix.endswith(".") and m.startswith(prefix))]
        found += match[:1]
    return found


#: Methods drawn at most in the shift figure (more boxes per severity would not be told apart).
FIGURE_METHODS = 6
#: Values (corruption families × seeds) per severity from which the figure draws boxes; below, points with bars.
MIN_BOX = 5
BOX_COLUMNS = ["source", "metric", "scale", "method", "severity", "n", "mean", "min", "whisker_low", "q1", "median",
               "q3", "whisker_high", "max"]


def drawn_methods(long: pd.DataFrame, metric_id: str, method_order=None) -> tuple[list[str], str]:
    """The methods of the shift figure and a phrase saying how they were chosen: all of them up to
    :data:`FIGURE_METHODS`, else ``uncal`` (where run) and the best under shift on ``metric_id`` (the mean over the
    shifted sets and seeds), in the configured order."""
    means = severity_means(long, metric_id)[UNDER_SHIFT].groupby("method").mean()
    methods = [m for m in (method_order or means.index) if m in means.index]
    if len(methods) <= FIGURE_METHODS:
        return methods, "every method"
    family, _ = lookup(metric_id)
    ranked = means.sort_values(ascending=not family.higher_is_better).index
    keep = ["uncal"] if "uncal" in methods else []
    keep += [m for m in ranked if m not in keep][:FIGURE_METHODS - len(keep)]
    how = f"{'uncal and ' if 'uncal' in keep else ''}the best under shift by {metric_id}"
    return [m for m in methods if m in keep], how


def box_numbers(values: np.ndarray) -> dict:
    """A box plot's numbers as matplotlib draws them: quartiles (linear interpolation), whiskers at the furthest
    values within 1.5 IQR of the box; with the count, mean, min and max."""
    q1, median, q3 = np.quantile(values, [0.25, 0.5, 0.75])
    reach = 1.5 * (q3 - q1)
    inside = values[(values >= q1 - reach) & (values <= q3 + reach)]
    return {"n": values.size, "mean": values.mean(), "min": values.min(), "whisker_low": inside.min(), "q1": q1,
            "median": median, "q3": q3, "whisker_high": inside.max(), "max": values.max()}


def box_groups(sub: pd.DataFrame, metric_id: str, methods) -> dict[tuple[str, int], np.ndarray]:
    """(method, severity) → the displayed values (×scale) over corruption families and seeds."""
    family, _ = lookup(metric_id)
    data = with_severity(sub[(sub["metric"] == metric_id) & sub["method"].isin(methods)])
    return {key: group.to_numpy() * family.scale for key, group in data.groupby(["method", "severity"])["value"]}


def severity_figure(long: pd.DataFrame, source: str, metric_ids, path, method_order=None) -> pd.DataFrame:
    """Ovadia et al.'s Fig. 2: per metric a panel, per shift severity (0 = clean) one box per method over the
    corruption families and seeds, on the tables' scale; where a box would hold fewer than :data:`MIN_BOX` values
    (the clean split's seeds; one family, one seed), the mean as a point with a bar from the least to the largest
    value instead of a box no one could read. Returns the numbers drawn (:data:`BOX_COLUMNS`)."""
    from calbench.report.plotting import distinct_colours, plt, save_figure  # matplotlib only where one is drawn

    sub = long[long["source"] == source]
    methods, chosen = drawn_methods(sub, metric_ids[0], method_order)
    colours = dict(zip(methods, distinct_colours(len(methods))))
    n_cols = 2 if len(metric_ids) > 1 else 1
    n_rows = -(-len(metric_ids) // n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(6.2 * n_cols, 3.6 * n_rows + 0.8), layout="constrained",
                             squeeze=False)
    frames, boxes = [], False
    width = 0.8 / len(methods)
    for ax, metric_id in zip(axes.ravel(), metric_ids):
        family, _ = lookup(metric_id)
        groups = box_groups(sub, metric_id, methods)
        frames.append(pd.DataFrame([{"source": source, "metric": metric_id, "scale": family.scale, "method": m,
                                     "severity": s, **box_numbers(v)} for (m, s), v in groups.items()],
                                   columns=BOX_COLUMNS))
        severities = sorted({s for _, s in groups})
        boxes = boxes or any(v.size >= MIN_BOX for v in groups.values())
        for i, method in enumerate(methods):
            drawn = [k for k, s in enumerate(severities) if (method, s) in groups]
            positions = np.array([k + (i - (len(methods) - 1) / 2) * width for k in drawn])
            values = [groups[method, severities[k]] for k in drawn]
            big = np.array([v.size >= MIN_BOX for v in values], dtype=bool)
            if big.any():
                ax.boxplot([v for v, b in zip(values, big) if b], positions=positions[big], widths=width * 0.85,
                           patch_artist=True, manage_ticks=False,
                           boxprops={"facecolor": colours[method], "edgecolor": "0.2", "linewidth": 0.6},
                           medianprops={"color": "black", "linewidth": 0.9}, whiskerprops={"linewidth": 0.6},
                           capprops={"linewidth": 0.6}, flierprops={"markersize": 2, "markeredgewidth": 0.5})
            if not big.all():
                few = [v for v, b in zip(values, big) if not b]
                means = np.array([v.mean() for v in few])
                spread = np.array([means - [v.min() for v in few], [v.max() for v in few] - means])
                ax.errorbar(positions[~big], means, yerr=spread, fmt="o", color=colours[method], markersize=5,
                            markeredgecolor="0.2", markeredgewidth=0.6, elinewidth=1.2, capsize=3)
        scale = f" ×{family.scale:g}" if family.scale != 1 else ""
        direction = "higher is better" if family.higher_is_better else "lower is better"
        ax.set(xticks=range(len(severities)), xticklabels=["clean" if s == 0 else str(s) for s in severities],
               xlabel="shift severity", title=f"{metric_id}{scale} ({direction})")
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    for ax in axes.ravel()[len(metric_ids):]:
        ax.set_visible(False)
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=colours[m], edgecolor="0.2") for m in methods]
    fig.legend(handles, methods, loc="outside lower center", ncol=min(len(methods), 6), fontsize=8, frameon=False)
    points = (f"points: the mean over corruption families and seeds, bars from the least to the largest value "
              f"(fewer than {MIN_BOX} values)")
    title = (f"{source}: calibration under shift, {chosen}; boxes over corruption families and seeds (quartiles, "
             f"whiskers 1.5 IQR), as Ovadia et al. 2019 Fig. 2; {points}" if boxes else
             f"{source}: calibration under shift, {chosen}; {points}")
    fig.suptitle(textwrap.fill(title, int(fig.get_figwidth() * 14)), fontsize=9)
    save_figure(fig, path)
    return pd.concat(frames, ignore_index=True)
