"""The critical-difference job (config key ``figures.critical_difference``, docs/figures_and_studies.md): one
diagram per metric and the Friedman table, from the long metrics table; the test and the drawing are in
:mod:`calbench.report.critical_difference`."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.jobs import paths
from calbench.jobs.spec import JobSpec, infile, outfile, param
from calbench.report.critical_difference import cd_figure
from calbench.report.plotting import plt, save_figure, write_csv
from calbench.report.tables import clean, summary
from calbench.stats.ranks import MIN_SOURCES, TOO_FEW, best_group, comparable_ranks, rank_test


@dataclass(frozen=True, kw_only=True)
class CriticalDifferenceSpec(JobSpec):
    """The critical-difference diagrams and the Friedman table (rule critical_difference)."""

    metrics: list = param()
    test: str | None = param()
    alpha: float | None = param()
    friedman_alpha: float | None = param()
    long: str = infile()
    intervals: str = infile()
    figures: dict = outfile()
    table: str = outfile()
    csv: str = outfile()


def spec(config: dict) -> CriticalDifferenceSpec:
    """The config's diagrams (none, and no settings, without ``figures.critical_difference``: the rule then runs no
    job)."""
    section = config["figures"].get("critical_difference") or {
        "metrics": [], "test": None, "alpha": None, "friedman_alpha": None}
    return CriticalDifferenceSpec(
        metrics=list(section["metrics"]), test=section["test"], alpha=section["alpha"],
        friedman_alpha=section["friedman_alpha"], long=paths.METRICS_LONG, intervals=paths.INTERVALS,
        figures={m: paths.CRITICAL_DIFFERENCE_FIGURE.format(metric=m) for m in section["metrics"]},
        table=paths.FRIEDMAN_TABLE, csv=paths.FRIEDMAN_CSV)


def critical_difference_job(*, spec: CriticalDifferenceSpec) -> None:
    """One diagram per metric and the Friedman table (Markdown + CSV); each method's name in a diagram counts the
    sources on which the paired bootstrap of the test rows (the tables' intervals) ties it with the best."""
    test, alpha, friedman_alpha = spec.test, spec.alpha, spec.friedman_alpha
    long = clean(pd.read_csv(spec.long))
    verdicts = pd.read_csv(spec.intervals)
    rows = []
    for metric_id, path in spec.figures.items():
        result, left_out = None, []
        if metric_id in set(long["metric"]):  # ranked on the displayed means, ties share the averaged rank
            ranks, left_out = comparable_ranks(summary(long, metric_id, ties="average")[2])
            result = rank_test(ranks, metric_id, test, alpha, friedman_alpha)
        if result is None:
            _note_figure(path, f"{metric_id}: {TOO_FEW} (fewer than {MIN_SOURCES} sources with 2+ methods each)")
            continue
        cd_figure(result, path, best_group(verdicts, metric_id), left_out)
        rows.append({"metric": metric_id, "sources": result.n, "methods": len(result.average_ranks),
                     "friedman_chi2": result.statistic, "p_value": result.p_value, "test": test, "alpha": alpha,
                     "cd": result.cd, "significant": result.significant, "verdict": result.verdict(),
                     "average_ranks": "; ".join(f"{m} {r:.2f}" for m, r in result.average_ranks.items()),
                     "left_out": ", ".join(left_out)})
    frame = pd.DataFrame(rows, columns=["metric", "sources", "methods", "friedman_chi2", "p_value", "test", "alpha",
                                        "cd", "significant", "verdict", "average_ranks", "left_out"])
    write_csv(frame, spec.csv)
    lines = [f"### Friedman test over sources, then {test} critical difference (α = {alpha:g}) where "
             f"p < {friedman_alpha:g}", "",
             "| metric | N | k | χ²_F | p | CD | outcome | average ranks (best first) |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['metric']} | {r['sources']} | {r['methods']} | {r['friedman_chi2']:.2f} | {r['p_value']:.3g}"
              f"{'' if r['significant'] else ' (n.s.)'} | {r['cd']:.2f} | {r['verdict']} | {r['average_ranks']} |"
              for r in rows]
    lines += [f"\n{r['metric']}: left out, as they ran on fewer sources: {r['left_out']}"
              for r in rows if r["left_out"]]
    write_text_atomic(spec.table, "\n".join(lines) + "\n")


def _note_figure(path, text: str) -> None:
    """A figure that only says why no diagram is drawn (a metric known on fewer sources than the others)."""
    fig, ax = plt.subplots(figsize=(6, 1.5))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=8)
    save_figure(fig, path)
