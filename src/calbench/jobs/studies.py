"""The study jobs (config key ``studies``): one learning curve per source and method, then their summary."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.data.entry import Source
from calbench.jobs import paths
from calbench.jobs.keys import runs_on
from calbench.jobs.spec import JobSpec, as_params, infile, outfile, param
from calbench.methods.registry import chain_settings
from calbench.report.learning_curve import learning_curve, learning_curve_figure, markdown, summarise
from calbench.report.plotting import write_csv


@dataclass(frozen=True, kw_only=True)
class LearningCurveSpec(JobSpec):
    """One source's and method's learning curve (Mix-n-Match §5.2, Fig. 6; rule learning_curve)."""

    source: str
    method: str
    method_settings: dict = param()
    split: dict | None = param()
    sizes: list = param()
    repeats: int = param()
    metrics: list = param()
    seed: int = param()
    dump: str = infile()
    output: str = outfile()


def spec(config: dict, *, source: str, method: str) -> LearningCurveSpec:
    section, entry = config["studies"]["learning_curve"], Source.of(config, source)
    return LearningCurveSpec(source=source, method=method,
                             method_settings=as_params(chain_settings(method, config["method_settings"])),
                             split=as_params(entry.split), sizes=list(section["sizes"]), repeats=section["repeats"],
                             metrics=list(section["metrics"]), seed=section["seed"],
                             dump=paths.DUMP.format(source=source),
                             output=paths.LEARNING_CURVE.format(source=source, method=method))


def learning_curve_job(*, spec: LearningCurveSpec) -> None:
    write_csv(learning_curve(spec.dump, spec.method, spec.method_settings, spec.sizes, spec.repeats, spec.metrics,
                             spec.seed, spec.split, spec.source), spec.output)


@dataclass(frozen=True, kw_only=True)
class SummarySpec(JobSpec):
    """The learning curves' summary table and one figure per source (rule learning_curve_summary)."""

    sources: list = param()
    methods: list = param()
    metrics: list = param()
    curves: list = infile()
    csv: str = outfile()
    table: str = outfile()
    figures: dict = outfile()


def summary_spec(config: dict) -> SummarySpec:
    """The config's learning-curve summary (of no curve without ``studies.learning_curve``: the rule then runs no
    job)."""
    section = config["studies"].get("learning_curve") or {"sources": [], "methods": [], "metrics": []}
    curves = [paths.LEARNING_CURVE.format(source=s, method=m) for s in section["sources"] for m in section["methods"]
              if runs_on(m, Source.of(config, s))]
    return SummarySpec(sources=list(section["sources"]), methods=list(section["methods"]),
                       metrics=list(section["metrics"]), curves=curves, csv=paths.LEARNING_CURVE_SUMMARY_CSV,
                       table=paths.LEARNING_CURVE_SUMMARY,
                       figures={s: paths.LEARNING_CURVE_FIGURE.format(source=s) for s in section["sources"]})


def learning_curve_summary_job(*, spec: SummarySpec) -> None:
    """Fold the per-(source, method) CSVs into the summary table and one figure per source."""
    summary = summarise(pd.concat([pd.read_csv(p) for p in spec.curves], ignore_index=True))
    write_csv(summary, spec.csv)
    write_text_atomic(spec.table, markdown(summary, spec.metrics, spec.methods))
    for source, path in spec.figures.items():
        learning_curve_figure(summary, source, spec.metrics, spec.methods, path)
