"""Cost of each method: fit and predict seconds (timed inside the calibrate job, HDF5 attributes
``fit_seconds``/``predict_seconds``) and the peak memory of its jobs, as each job records it (key ``peak_rss_mb``
of the calibrated file's attributes and of the metrics JSON: an evaluate job ends before Snakemake's benchmark
samples it again, and a job of the local job runner is not the process benchmarked; calibrated files of earlier
versions: ``max_rss`` of the calibrate job's ``benchmark:`` file), folded into ``results/tables/runtime.md`` with the
grid point that tuned methods chose (attribute ``fitted``: the calibrator's ``fitted_summary()``)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.data import store
from calbench.data.store import PEAK_KEY


def _max_rss(benchmark_file) -> float:
    """Peak resident memory (MB) of one benchmarked job; NaN where the platform does not report it."""
    values = pd.read_csv(benchmark_file, sep="\t")["max_rss"]
    return float(pd.to_numeric(values, errors="coerce").max())


def chosen_point(fitted: dict) -> str:
    """The grid point a tuned calibrator chose (``"q=0.05, t=0"``), per tuned chain stage (``"lece: q=0.05"``);
    ``""`` where nothing was tuned."""
    if "best_params" in fitted:
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in fitted["best_params"].items())
    stages = [(key.split(":", 1)[1], chosen_point(sub)) for key, sub in fitted.items()
              if re.match(r"\d+:", key) and isinstance(sub, dict)]  # a chain's "<index>:<method>" stages
    return "; ".join(f"{stage}: {point}" for stage, point in stages if point)


def runtime_frame(jobs, calibrated_files, calibrate_benchmarks, metric_files) -> pd.DataFrame:
    """One row per (source, method, seed) job with its timings and peak memory."""
    rows = []
    for (source, method, seed), calibrated, cal_bench, metrics in zip(
            jobs, calibrated_files, calibrate_benchmarks, metric_files, strict=True):
        attrs = store.read_attrs(calibrated)
        evaluate_mb = json.loads(Path(metrics).read_text()).get(PEAK_KEY, np.nan)
        calibrate_mb = float(attrs[PEAK_KEY]) if PEAK_KEY in attrs else _max_rss(cal_bench)
        rows.append({"source": source, "method": method, "seed": seed,
                     "fit_s": float(attrs["fit_seconds"]), "predict_s": float(attrs["predict_seconds"]),
                     "calibrate_mb": calibrate_mb, "evaluate_mb": float(evaluate_mb),
                     "chosen": chosen_point(json.loads(attrs.get("fitted", "{}")))})
    return pd.DataFrame(rows)


def _cell(value: float, decimals: int) -> str:
    return "–" if np.isnan(value) else f"{value:.{decimals}f}"


def _most_frequent(points: pd.Series) -> str:
    """The grid point chosen most often over seeds, with how often (``"q=0.05, t=0 (4/5)"``)."""
    point, count = Counter(points).most_common(1)[0]
    return f"{point} ({count}/{points.size})" if point else "–"


def runtime_markdown(frame: pd.DataFrame, method_order=None) -> str:
    """Mean over seeds per source and method, methods in config order."""
    groups = frame.groupby(["source", "method"], sort=False)
    means = groups.mean(numeric_only=True)
    chosen = groups["chosen"].agg(_most_frequent)
    order = {m: i for i, m in enumerate(method_order or frame["method"].unique())}
    lines = ["### Runtime and peak memory (mean over seeds)", "",
             ("Fit and predict seconds are timed inside the calibrate job (test-set prediction only); peak "
              "memory is the resident set size of the whole job (Python, libraries and data included). Tuned "
              "methods: the grid point chosen by cross-validation most often over seeds (times chosen / seeds)."), "",
             "| source | method | fit s | predict s | calibrate job peak MB | evaluate job peak MB "
             "| chosen grid point |",
             "|---|---|---|---|---|---|---|"]
    for (source, method), row in sorted(means.iterrows(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 1e9))):
        lines.append(f"| {source} | {method} | {_cell(row.fit_s, 4)} | {_cell(row.predict_s, 4)} | "
                     f"{_cell(row.calibrate_mb, 0)} | {_cell(row.evaluate_mb, 0)} | {chosen[(source, method)]} |")
    return "\n".join(lines) + "\n"
