"""results/tables/runtime.md: fit/predict seconds from the calibrated files, peak memory from the calibrate jobs'
benchmark files and the evaluate jobs' own record (their metrics JSON)."""

from __future__ import annotations

import json
import re

import numpy as np

from calbench.data import store
from calbench.jobs.tables import RuntimeSpec, write_runtime_table
from calbench.report.runtime import runtime_frame
from conftest import REPO

BENCH_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _job_files(tmp_path, method, seed, fit, predict, rss, fitted=None, own_peak=None):
    calibrated = tmp_path / f"{method}{seed}.h5"
    probs = np.full((3, 2), 0.5)
    store.write_calibrated(calibrated, probs, probs, np.arange(3), np.arange(3), np.zeros(3, dtype=int),
                           {"method": method, "seed": seed, "fit_seconds": fit, "predict_seconds": predict,
                            **({"fitted": fitted} if fitted is not None else {}),
                            **({store.PEAK_KEY: own_peak} if own_peak is not None else {})})
    bench = tmp_path / f"{method}{seed}.tsv"
    bench.write_text(BENCH_HEADER + f"1.0\t0:00:01\t{rss}\t1\t1\t1\t0\t0\t1\t1\n")
    metrics = tmp_path / f"{method}{seed}.json"
    peak = {} if rss == "NA" else {"peak_rss_mb": rss / 2}  # the evaluate job's own peak
    metrics.write_text(json.dumps({"source": "s", "method": method, "seed": seed, "acc": 1.0, **peak}))
    return calibrated, bench, metrics


def test_runtime_table_averages_seeds_per_source_and_method(tmp_path):
    jobs = [("s", "ts", 0), ("s", "ts", 1), ("s", "uncal", 0)]
    files = [_job_files(tmp_path, "ts", 0, 0.2, 0.01, 100), _job_files(tmp_path, "ts", 1, 0.4, 0.03, 300),
             _job_files(tmp_path, "uncal", 0, 0.0, 0.001, "NA")]
    cal, bench, metrics = zip(*files)
    frame = runtime_frame(jobs, cal, bench, metrics)
    assert frame["fit_s"].tolist() == [0.2, 0.4, 0.0] and np.isnan(frame["calibrate_mb"].iloc[2])
    out = tmp_path / "runtime.md"
    write_runtime_table(spec=RuntimeSpec(jobs=jobs, methods=["uncal", "ts"], calibrated=cal, calibrate_benchmarks=bench,
                                         metrics=metrics, output=out))
    rows = [line for line in out.read_text().splitlines() if line.startswith("| s |")]
    assert rows == ["| s | uncal | 0.0000 | 0.0010 | – | – | – |", "| s | ts | 0.3000 | 0.0200 | 200 | 100 | – |"]


def test_a_calibrate_jobs_own_peak_memory_is_preferred_to_its_benchmark(tmp_path):
    """A job of the local job runner is not the process that Snakemake benchmarks: the calibrated file's own
    record of the job's peak (calbench.jobs.logs.peak_rss_mb) is shown; files without it fall back to the benchmark."""
    files = [_job_files(tmp_path, "ts", 0, 0.2, 0.01, 20, own_peak=150.0), _job_files(tmp_path, "ts", 1, 0.2, 0.01, 90)]
    cal, bench, metrics = zip(*files)
    frame = runtime_frame([("s", "ts", 0), ("s", "ts", 1)], cal, bench, metrics)
    assert frame["calibrate_mb"].tolist() == [150.0, 90.0]


def test_runtime_table_shows_the_grid_point_chosen_most_often(tmp_path):
    """The fitted calibrator's chosen grid point (its fitted_summary in the calibrated HDF5) is shown."""
    lece = [{"best_params": {"q": q, "t": 0.0}, "cv_loss": 0.5} for q in (0.05, 0.2, 0.05)]
    chain = {"0:ts": {"temperature": 1.5}, "1:lece": {"best_params": {"t": 0.01}, "fixed_params": {"q": 0.05}}}
    jobs = [("s", "lece", seed) for seed in range(3)] + [("s", "ts+lece", 0)]
    files = [_job_files(tmp_path, "lece", seed, 1.0, 0.1, 100, fitted) for seed, fitted in enumerate(lece)]
    files.append(_job_files(tmp_path, "ts+lece", 0, 1.0, 0.1, 100, chain))
    cal, bench, metrics = zip(*files)
    out = tmp_path / "runtime.md"
    write_runtime_table(spec=RuntimeSpec(jobs=jobs, methods=None, calibrated=cal, calibrate_benchmarks=bench,
                                         metrics=metrics, output=out))
    chosen = [line.split(" | ")[-1] for line in out.read_text().splitlines() if line.startswith("| s |")]
    assert chosen == ["q=0.05, t=0 (2/3) |", "lece: t=0.01 (1/1) |"]


def test_every_hdf5_open_in_the_package_has_file_locking_off():
    """Network file systems often refuse HDF5's file locks: every h5py.File(...) passes locking=False."""
    calls = []
    for path in (REPO / "src").rglob("*.py"):
        calls += [(path.name, call) for call in re.findall(r"h5py\.File\([^)]*\)", path.read_text())]
    assert calls
    assert all("locking=False" in call for _, call in calls), [c for c in calls if "locking=False" not in c[1]]
