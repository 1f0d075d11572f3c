"""The shift report job (docs/shift.md): per-metric severity tables with the paired bootstrap's intervals, the
clean-versus-shift ranking and the metric-against-severity figure of each source with shifted test sets; the
computing is in :mod:`calbench.report.shift`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.report.plotting import write_csv
from calbench.report.shift import (
    figure_metrics,
    ranking_markdown,
    severity_figure,
    severity_markdown,
    shift_cells,
)
from calbench.report.tables import CLEAN


def shift_report_job(long_csv, tables: dict[str, str], ranking, figures: dict[str, tuple[str, str]], metrics,
                     methods, outputs, shift_files: dict[str, str], intervals) -> None:
    """``tables``: metric → Markdown path; ``ranking``: Markdown path; ``figures``: source → (png, csv);
    ``outputs``: ``(metrics JSON, calibrated test outputs, saved calibrator)`` of every evaluate job of the
    shifted sources; ``shift_files``: source → its shifted sets (``results/shifts/{source}.h5``); ``intervals``:
    the CSV of every cell (:func:`calbench.report.shift.shift_cells`)."""
    long = pd.read_csv(long_csv)
    cells = shift_cells(long, list(metrics), shifted_outputs(outputs, shift_files))
    write_text_atomic(intervals, cells.to_csv(index=False, float_format="%.10g"))
    for metric_id, path in tables.items():
        write_text_atomic(path, severity_markdown(long, metric_id, cells, methods))
    write_text_atomic(ranking, ranking_markdown(long, list(metrics), methods))
    for source, (png, csv) in figures.items():
        write_csv(severity_figure(long, source, figure_metrics(metrics), png, methods), csv)


def shifted_outputs(outputs, shift_files: dict[str, str]):
    """``load(source, test_set, method, seed)``: the calibrated test outputs (``clean``) or the saved calibrator's
    outputs on a shifted set (:func:`calbench.jobs.evaluate.shifted_set`), None where the method did not run."""
    from calbench.data.store import read_calibrated
    from calbench.jobs.evaluate import shifted_set
    from calbench.persist import load as load_calibrator

    files = {}
    for metrics_json, calibrated, calibrator in outputs:
        record = json.loads(Path(metrics_json).read_text())
        files[record["source"], record["method"], int(record["seed"])] = (calibrated, calibrator)
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
    """``{"index", "rows_of"}`` of a shifted set's rows as the paired bootstrap's units
    (:mod:`calbench.stats.resampling`): a corrupted copy of a test row is that row (the clean outputs' ids and
    group), as is a row of an import's set aligned by ``pool_rows``; the rows of a set evaluated in full are its
    own, the same for every seed."""
    from calbench.data import store

    if store.read_attrs(shifts)["rows_of"] != "own":
        return {"index": clean["index"], "rows_of": clean.get("rows_of", "test")}
    pool_rows = store.read_group(shifts, group, ["pool_rows"]).get("pool_rows")
    if pool_rows is not None:
        return {"index": pool_rows[np.isin(pool_rows, clean["index"])], "rows_of": clean.get("rows_of", "all")}
    return {"index": np.arange(size), "rows_of": group}
