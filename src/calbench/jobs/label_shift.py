"""The label-shift report job (docs/label_shift.md): per-metric tables of the label-shifted sets, per calibrator and
shift strength, with the paired bootstrap of the evaluate jobs' resamples; the computing is in
:mod:`calbench.report.label_shift`."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.data.entry import sources
from calbench.jobs import paths
from calbench.jobs.keys import calibrate_keys
from calbench.jobs.spec import JobSpec, infile, outfile, param
from calbench.report.label_shift import read_resamples, strength_markdown


@dataclass(frozen=True, kw_only=True)
class LabelShiftReportSpec(JobSpec):
    """The per-strength tables of the label-shifted sets (rule label_shift_report): ``metrics``, the metrics JSONs of
    the sources with label shift; ``tables``: metric → Markdown path."""

    metric_ids: list = param()
    methods: list = param()
    long: str = infile()
    metrics: list = infile()
    tables: dict = outfile()


def spec(config: dict) -> LabelShiftReportSpec:
    metric_ids = list(dict.fromkeys(m for s in sources(config, having="label_shift")
                                    for m in s.entry["label_shift"]["metrics"]))
    keys = calibrate_keys(config, having="label_shift")
    return LabelShiftReportSpec(
        metric_ids=metric_ids, methods=list(config["methods"]), long=paths.METRICS_LONG,
        metrics=[paths.METRICS.format(source=s, method=m, seed=seed) for s, m, seed in keys],
        tables={m: paths.LABEL_SHIFT_TABLE.format(metric=m) for m in metric_ids})


def label_shift_report_job(*, spec: LabelShiftReportSpec) -> None:
    long = pd.read_csv(spec.long)
    resamples = read_resamples(spec.metrics)
    for metric_id, path in spec.tables.items():
        write_text_atomic(path, strength_markdown(long, metric_id, resamples, spec.methods))
