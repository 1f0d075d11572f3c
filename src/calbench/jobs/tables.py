"""The table jobs of ``results/tables``: the aggregated metrics, the runtime table, the comparison with a paper."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.data.entry import Source
from calbench.jobs import paths
from calbench.jobs.keys import calibrate_keys
from calbench.jobs.spec import JobSpec, infile, outfile, param
from calbench.report.paper_comparison import comparison_markdown, paper_table, true_map_rows
from calbench.report.runtime import runtime_frame, runtime_markdown
from calbench.report.tables import clean, long_table, paired_verdicts, write_tables
from calbench.report.warnings import collect


@dataclass(frozen=True, kw_only=True)
class AggregateSpec(JobSpec):
    """Every metrics JSON and calibrated test output → the tables of results/tables (rule aggregate)."""

    metric_ids: list = param()
    methods: list = param()
    metrics: list = infile()
    calibrated: list = infile()
    long: str = outfile()
    summary: str = outfile()
    ranks: str = outfile()
    intervals: str = outfile()
    warnings: str = outfile()
    per_metric: dict = outfile()


def spec(config: dict) -> AggregateSpec:
    keys = [dict(zip(("source", "method", "seed"), key)) for key in calibrate_keys(config)]
    return AggregateSpec(metric_ids=list(config["metrics"]), methods=list(config["methods"]),
                         metrics=[paths.METRICS.format(**key) for key in keys],
                         calibrated=[paths.CALIBRATED.format(**key) for key in keys],
                         long=paths.METRICS_LONG, summary=paths.SUMMARY, ranks=paths.AVERAGE_RANKS,
                         intervals=paths.INTERVALS, warnings=paths.WARNINGS,
                         per_metric={m: paths.METRIC_TABLE.format(metric=m) for m in config["metrics"]})


def aggregate_job(*, spec: AggregateSpec) -> None:
    """Fold every metrics JSON (each read once) into the tables of ``results/tables``, marked by the paired bootstrap
    of the test predictions ``spec.calibrated`` (the calibrate jobs' outputs, in the order of ``spec.metrics``)."""
    from calbench.data.store import read_calibrated

    records = [json.loads(Path(path).read_text()) for path in spec.metrics]
    everything = long_table(records)
    outputs = {(r["source"], r["method"], int(r["seed"])): calibrated
               for r, calibrated in zip(records, spec.calibrated, strict=True)}
    long = clean(everything)
    verdicts, floors = paired_verdicts(
        long, [m for m in spec.metric_ids if m in set(long["metric"])],
        lambda key: read_calibrated(outputs[key], "test") if key in outputs else None)
    tables = {"long": spec.long, "summary": spec.summary, "ranks": spec.ranks, "intervals": spec.intervals,
              "warnings": spec.warnings, "per_metric": spec.per_metric}
    write_tables(everything, tables, spec.metric_ids, spec.methods, verdicts, floors, collect(records))


@dataclass(frozen=True, kw_only=True)
class PaperSpec(JobSpec):
    """Our aggregated results beside a paper's published table (rule paper_comparison, config key
    ``paper_comparison``)."""

    table: str | None = param()
    source: str | None = param()
    seeds: list = param()
    long: str = infile()
    dump: str | None = infile()
    output: str = outfile()


def paper_spec(config: dict) -> PaperSpec:
    """The comparison the config asks for (none of table, source, seeds and dump without the key
    ``paper_comparison``: the rule then runs no job)."""
    section = config.get("paper_comparison")
    if not section:
        return PaperSpec(table=None, source=None, seeds=[], long=paths.METRICS_LONG, dump=None,
                         output=paths.PAPER_COMPARISON)
    source = Source.of(config, section["source"])
    return PaperSpec(table=section["table"], source=source.name, seeds=source.seeds, long=paths.METRICS_LONG,
                     dump=paths.DUMP.format(source=source.name), output=paths.PAPER_COMPARISON)


def write_paper_comparison(*, spec: PaperSpec) -> None:
    """Read ``metrics_long.csv``, add the true map's rows from the dump, write the Markdown."""
    long = clean(pd.read_csv(spec.long)).drop(columns="test_set", errors="ignore")
    long = pd.concat([long, true_map_rows(spec.dump, spec.source, spec.seeds, list(paper_table(spec.table)[2]))],
                     ignore_index=True)
    write_text_atomic(spec.output, comparison_markdown(long, spec.source, spec.table))


@dataclass(frozen=True, kw_only=True)
class RuntimeSpec(JobSpec):
    """The cost of each method: fit/predict seconds and peak memory (rule runtime_table)."""

    jobs: list = param()
    methods: list = param()
    calibrated: list = infile()
    calibrate_benchmarks: list = infile()
    metrics: list = infile()
    output: str = outfile()


def runtime_spec(config: dict) -> RuntimeSpec:
    keys = calibrate_keys(config)
    where = [dict(zip(("source", "method", "seed"), key)) for key in keys]
    return RuntimeSpec(jobs=[list(key) for key in keys], methods=list(config["methods"]),
                       calibrated=[paths.CALIBRATED.format(**w) for w in where],
                       calibrate_benchmarks=[paths.CALIBRATE_BENCHMARK.format(**w) for w in where],
                       metrics=[paths.METRICS.format(**w) for w in where], output=paths.RUNTIME)


def write_runtime_table(*, spec: RuntimeSpec) -> None:
    frame = runtime_frame([tuple(job) for job in spec.jobs], spec.calibrated, spec.calibrate_benchmarks, spec.metrics)
    write_text_atomic(spec.output, runtime_markdown(frame, spec.methods))
