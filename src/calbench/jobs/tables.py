"""The table jobs of ``results/tables``: the aggregated metrics, the runtime table, the comparison with a paper."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.report.noise_floor import REFERENCE, is_calibration_error, noise_floor
from calbench.report.paired_bootstrap import TABLE_RESAMPLES, compare, frame, source_draws
from calbench.report.paper_comparison import comparison_markdown, paper_table, true_map_rows
from calbench.report.runtime import runtime_frame, runtime_markdown
from calbench.report.tables import ALPHA, clean, long_table, write_tables


def aggregate_job(metric_files, calibrated_files, out_dir, metrics, methods) -> None:
    """Fold every metrics JSON into the tables of ``results/tables``, marked by the paired bootstrap of the
    test predictions ``calibrated_files`` (the calibrate jobs' outputs, in the order of ``metric_files``)."""
    from calbench.data.store import read_calibrated

    long = clean(long_table(metric_files))
    outputs = {}
    for metrics_json, calibrated in zip(metric_files, calibrated_files, strict=True):
        record = json.loads(Path(metrics_json).read_text())
        outputs[record["source"], record["method"], int(record["seed"])] = calibrated
    verdicts, floors = bootstrap_verdicts(
        long, [m for m in metrics if m in set(long["metric"])],
        lambda key: read_calibrated(outputs[key], "test") if key in outputs else None)
    write_tables(metric_files, out_dir, metrics, methods, verdicts, floors)


def bootstrap_verdicts(long: pd.DataFrame, metrics, loader, resamples: int = TABLE_RESAMPLES):
    """The paired bootstrap's verdicts (:func:`calbench.report.paired_bootstrap.frame`) of every source ×
    metric × method, from the test predictions ``loader((source, method, seed))`` (None where absent), and the
    noise floor ``{metric: {source: (mean, std, rows)}}`` of each calibration-error estimator resampled. Metrics
    without a row-weighted form are not resampled (they would cost R recomputations each); the estimates are the
    long table's (not computed again)."""
    verdicts, floors = [], {}
    for source, rows in long.groupby("source", sort=True):
        seeds = sorted(int(s) for s in rows["seed"].unique())
        methods = list(dict.fromkeys(rows["method"]))
        load = lambda method, seed, source=source: loader((source, method, seed))  # noqa: E731
        values = rows.set_index(["method", "seed", "metric"])["value"].to_dict()
        draws = source_draws(source, seeds, methods, metrics, load, resamples, recompute=False,
                             known=lambda method, seed, metric, values=values: values.get((method, seed, metric)))
        verdicts += [v for m in metrics for v in compare(draws, m, alpha=ALPHA)]
        reference = next(m for m in (*REFERENCE, methods[0]) if m in methods)
        probs = [load(reference, seed)["probs"] for seed in seeds]
        for metric_id in filter(is_calibration_error, draws.draws):  # the estimators the tables mark
            floors.setdefault(metric_id, {})[source] = (*noise_floor(metric_id, probs), int(np.mean(draws.rows)))
    return frame(verdicts), floors


def write_paper_comparison(long_csv, dump, source: str, seeds, out, table: str) -> None:
    """Read ``metrics_long.csv``, add the true map's rows from ``dump``, write the Markdown to ``out``."""
    long = clean(pd.read_csv(long_csv)).drop(columns="test_set", errors="ignore")
    long = pd.concat([long, true_map_rows(dump, source, seeds, list(paper_table(table)[2]))], ignore_index=True)
    write_text_atomic(out, comparison_markdown(long, source, table))


def write_runtime_table(jobs, calibrated_files, calibrate_benchmarks, metric_files, output,
                        method_order=None) -> None:
    frame = runtime_frame(jobs, calibrated_files, calibrate_benchmarks, metric_files)
    write_text_atomic(output, runtime_markdown(frame, method_order))
