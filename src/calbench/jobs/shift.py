"""The shift report job (docs/shift.md): per-metric severity tables with the paired bootstrap's intervals, the
clean-versus-shift ranking and the metric-against-severity figure of each source with shifted test sets; the
computing is in :mod:`calbench.report.shift`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calbench.atomic import write_text_atomic
from calbench.data.entry import sources as config_sources
from calbench.jobs import paths
from calbench.jobs.keys import calibrate_keys
from calbench.jobs.spec import JobSpec, infile, outfile, param
from calbench.report.plotting import write_csv
from calbench.report.shift import (
    figure_metrics,
    ranking_markdown,
    severity_figure,
    severity_markdown,
    shift_cells,
)
from calbench.report.tables import CLEAN, long_table


@dataclass(frozen=True, kw_only=True)
class ShiftReportSpec(JobSpec):
    """The shift tables and figures (rule shift_report): ``metrics``, ``calibrated`` and ``calibrators`` of every
    evaluate job of the shifted sources (in one order), ``shifts``: source → its shifted sets."""

    metric_ids: list = param()
    methods: list = param()
    sources: list = param()
    metrics: list = infile()
    calibrated: list = infile()
    calibrators: list = infile()
    shifts: dict = infile()
    tables: dict = outfile()
    ranking: str = outfile()
    figures: dict = outfile()
    csv: dict = outfile()
    intervals: str = outfile()


def spec(config: dict) -> ShiftReportSpec:
    shifted = [s.name for s in config_sources(config, having="shifts")]
    keys = [dict(zip(("source", "method", "seed"), key)) for key in calibrate_keys(config, having="shifts")]
    return ShiftReportSpec(
        metric_ids=list(config["metrics"]), methods=list(config["methods"]), sources=shifted,
        metrics=[paths.METRICS.format(**k) for k in keys], calibrated=[paths.CALIBRATED.format(**k) for k in keys],
        calibrators=[paths.CALIBRATOR.format(**k) for k in keys],
        shifts={s: paths.SHIFTS.format(source=s) for s in shifted},
        tables={m: paths.SHIFT_TABLE.format(metric=m) for m in config["metrics"]}, ranking=paths.SHIFT_RANKING,
        figures={s: paths.SHIFT_FIGURE.format(source=s) for s in shifted},
        csv={s: paths.SHIFT_FIGURE_CSV.format(source=s) for s in shifted}, intervals=paths.SHIFT_INTERVALS)


def shift_report_job(*, spec: ShiftReportSpec) -> None:
    """The CSV of every cell (:func:`calbench.report.shift.shift_cells`), each metric's severity table, the
    ranking and each source's figure (png and the CSV of what it draws), from the shifted sources' metrics JSON files
    (read here, not from the aggregate job's long table, so that the two jobs run side by side)."""
    metrics, methods = spec.metric_ids, spec.methods
    records = [json.loads(Path(path).read_text()) for path in spec.metrics]
    long = long_table(records)
    files = {(r["source"], r["method"], int(r["seed"])): (calibrated, calibrator)
             for r, calibrated, calibrator in zip(records, spec.calibrated, spec.calibrators, strict=True)}
    cells = shift_cells(long, list(metrics), shifted_outputs(files, spec.shifts))
    write_text_atomic(spec.intervals, cells.to_csv(index=False, float_format="%.10g"))
    images = {source: corrupted_images(path) for source, path in spec.shifts.items()}
    for metric_id, path in spec.tables.items():
        write_text_atomic(path, severity_markdown(long, metric_id, cells, methods, images))
    write_text_atomic(spec.ranking, ranking_markdown(long, list(metrics), methods))
    for source, png in spec.figures.items():
        write_csv(severity_figure(long, source, figure_metrics(metrics), png, methods), spec.csv[source])


def corrupted_images(shifts) -> tuple[int, int] | None:
    """(channels, side) of the images calbench corrupted into the shifted sets ``shifts`` (the shift dump's
    ``image_shape``); None for sets it did not make (an import's)."""
    from calbench.data import store

    shape = store.read_attrs(shifts).get("image_shape")
    if shape is None:
        return None
    channels, height, width = json.loads(shape)
    return int(channels), int(max(height, width))


def shifted_outputs(files: dict, shift_files: dict[str, str]):
    """``load(source, test_set, method, seed)``: the calibrated test outputs (``clean``) or the saved calibrator's
    outputs on a shifted set (:func:`calbench.jobs.evaluate.shifted_set`), None where the method did not run;
    ``files``: ``(source, method, seed)`` → (its calibrated file, its saved calibrator)."""
    from calbench.data.store import read_calibrated
    from calbench.jobs.evaluate import shifted_set
    from calbench.persist import load as load_calibrator

    tests, calibrators = {}, {}

    def load(source, test_set, method, seed):
        key = (source, method, seed)
        if key not in files:
            return None
        if key not in tests:
            tests[key] = read_calibrated(files[key][0], "test")
        if test_set == CLEAN:
            return tests[key]
        if key not in calibrators:
            calibrators[key] = load_calibrator(files[key][1])
        probs, labels, _ = shifted_set(shift_files[source], f"shift/{test_set}", calibrators[key],
                                       tests[key]["index"])
        return {"probs": probs, "labels": labels,
                **shifted_rows(shift_files[source], f"shift/{test_set}", tests[key], labels.size)}

    return load


def shifted_rows(shifts, group: str, clean: dict, size: int) -> dict:
    """``{"index", "rows_of", "group_rows"}`` of a shifted set's rows as the paired bootstrap's units
    (:mod:`calbench.stats.resampling`): a corrupted copy of a test row is that row (the clean outputs' ids and
    group), as is a row of an import's set aligned by ``pool_rows``; the rows of a set evaluated in full are its
    own, the same for every seed."""
    from calbench.data import store

    if store.read_attrs(shifts)["rows_of"] != "own":
        return {"index": clean["index"], "rows_of": clean.get("rows_of", "test"), "group_rows": clean.get("group_rows")}
    pool_rows = store.read_group(shifts, group, ["pool_rows"]).get("pool_rows")
    if pool_rows is not None:
        return {"index": pool_rows[np.isin(pool_rows, clean["index"])], "rows_of": clean.get("rows_of", "all"),
                "group_rows": clean.get("group_rows")}
    return {"index": np.arange(size), "rows_of": group, "group_rows": size}
