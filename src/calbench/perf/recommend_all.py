"""Benchmark of ``calbench recommend --all-metrics`` on three 10,000-row sources of real logits.

The run it ranks is the one README.md reports: CIFAR-100 and CIFAR-10 ResNet-20 logits and CIFAR-10 VGG-19
probabilities (../shared/data/logits; softmax of its logits, calibrated on their logarithm as an import with
``scores: probs``), each pool split per seed into 5,000 calibration and 5,000 test rows (``split: {cal_size: 5000}``,
seeds 0 and 1, so the seeds share test rows and a resample draws pool rows), the methods ``uncal, ts, vs, ets, irm,
ts+lece`` fitted on the calibration rows, and the default config's metrics but the true-map ones. The calibrated
files are written as the calibrate jobs write them; the long table holds a placeholder value per metric (the
command reads the estimates from it, as from a finished run's, and resamples the calibrated outputs). The fits are
not timed.

``cpu_seconds`` is the command's (``python -m calbench recommend results --all-metrics``, interpreter start
included: user + sys of the child process; the compiled kernels loaded from their cache, which ``calbench compile``
fills first, untimed, as after an installation); ``per_metric`` the CPU seconds of each metric's resamples over the
three sources, measured in the process by :func:`calbench.stats.draws.source_draws` of that metric alone (the
command resamples every metric of a source in one call, which shares their per-row and per-bin work, so these add up
to more than its total). Skipped where the data folder is absent.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from calbench.perf import benchmark

LOGITS = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "logits"
#: The three sources and whether the benchmark reads them as logits or as probabilities.
SOURCES = {"cifar100_resnet-20": "logits", "cifar10_resnet-20": "logits", "cifar10_vgg19_bn": "probs"}
METHODS = ["uncal", "ts", "vs", "ets", "irm", "ts+lece"]
SEEDS = (0, 1)
CAL_SIZE = 5000


def run_metrics() -> list[str]:
    """The default config's metrics without the true-map ones (the sources have no true calibration map)."""
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[3] / "config" / "config.yaml").read_text())
    return [m for m in config["metrics"] if not m.startswith(("true_ce", "cmee"))]


def write_run(results: Path) -> list[str]:
    """Write the calibrated test outputs and the long table of the benchmark's run into ``results``; returns its
    metrics."""
    import pandas as pd
    from scipy.special import log_softmax, softmax

    from calbench.data import store
    from calbench.data.splits import split_pool
    from calbench.methods import make
    from calbench.scores import Scores

    metrics, rows = run_metrics(), []
    for source, kind in SOURCES.items():
        z = np.load(LOGITS / source / "scores.npy").astype(np.float64)
        y = np.load(LOGITS / source / "targets.npy").astype(np.int64)
        scores = z if kind == "logits" else log_softmax(z, axis=1)
        for seed in SEEDS:
            cal, test = split_pool(y, seed, cal_size=CAL_SIZE)
            for method in METHODS:
                probs = (softmax(z[test], axis=1) if method == "uncal" else
                         make(method).fit(Scores(scores[cal]), y[cal]).predict_proba(Scores(scores[test])))
                path = results / "calibrated" / source / method / f"seed{seed}.h5"  # jobs.paths.CALIBRATED
                path.parent.mkdir(parents=True, exist_ok=True)
                store.write_calibrated(path, None, probs, cal, test, y[test], {store.ROWS_OF_KEY: "all"})
                rows += [(source, method, seed, "clean", metric, 0.01) for metric in metrics]
    (results / "tables").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=["source", "method", "seed", "test_set", "metric", "value"]).to_csv(
        results / "tables" / "metrics_long.csv", index=False)
    return metrics


def per_metric_seconds(results: Path, metrics: list[str]) -> dict[str, float]:
    """CPU seconds of each metric's paired resamples over the sources, one :func:`source_draws` call per metric
    (nothing shared between metrics)."""
    from calbench.data.store import read_calibrated
    from calbench.stats.draws import source_draws

    outputs = {(s, m, seed): read_calibrated(results / "calibrated" / s / m / f"seed{seed}.h5")
               for s in SOURCES for m in METHODS for seed in SEEDS}
    seconds = dict.fromkeys(metrics, 0.0)
    for source in SOURCES:
        load = lambda method, seed, source=source: outputs[source, method, seed]  # noqa: E731
        for metric in metrics:
            start = time.process_time()
            source_draws(source, SEEDS, METHODS, [metric], load, recompute=False, known=lambda *_: 0.01)
            seconds[metric] += time.process_time() - start
    return {m: round(s, 2) for m, s in sorted(seconds.items(), key=lambda item: -item[1])}


@benchmark("intervals.recommend_all_metrics", repeat=1)
def recommend_all_metrics(repeat):
    """The command's CPU and wall seconds (best of ``repeat``) and each metric's resampling CPU seconds."""
    if not all((LOGITS / source).is_dir() for source in SOURCES):
        return {"seconds": float("nan"), "skipped": f"{LOGITS} lacks one of {', '.join(SOURCES)}"}
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        metrics = write_run(results)
        subprocess.run([sys.executable, "-m", "calbench", "compile"], check=True, capture_output=True)
        command = [sys.executable, "-m", "calbench", "recommend", str(results), "--all-metrics"]
        best, cpu = float("inf"), float("inf")
        for _ in range(repeat):
            before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            best = min(best, time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = min(cpu, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        each = per_metric_seconds(results, metrics)
    return {"seconds": round(best, 2), "cpu_seconds": round(cpu, 2), "sources": len(SOURCES), "rows": 2 * CAL_SIZE,
            "methods": len(METHODS), "seeds": len(SEEDS), "metrics": len(metrics), "budget_wall_seconds": 15,
            "per_metric_cpu_seconds": each}
