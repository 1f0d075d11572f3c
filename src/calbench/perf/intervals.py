"""Benchmarks of the paired bootstrap (calbench.stats): the tables' marks and intervals for every
source × method × metric of a run the size of the default one, and ``calbench recommend`` on a 1,000-class run."""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.special import softmax

from calbench.perf import benchmark, timed

ROOT = Path(__file__).resolve().parents[3]
#: (test rows, classes) of the default run's four sources (config/config.yaml), two seeds each.
DEFAULT_SOURCES = {"lece_synthetic": (10_000, 3), "planted_t2.5": (5000, 10), "digits_vit": (400, 10),
                   "mnist5k_resnet18": (1000, 10)}
SEEDS = (0, 1)


def _outputs(n: int, classes: int, methods, seed: int) -> dict[str, dict]:
    """Test outputs of ``methods`` on one seed: one classifier's logits at a different temperature per method."""
    rng = np.random.default_rng([seed, n, classes])
    logits = rng.normal(size=(n, classes)) * 2.5
    labels = (softmax(logits / 1.5, axis=1).cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return {m: {"probs": softmax(logits / (1.0 + 0.05 * i), axis=1), "labels": labels, "index": np.arange(n)}
            for i, m in enumerate(methods)}


def _default_run():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    methods, metrics = config["methods"], config["metrics"]
    outputs = {(s, m, seed): out for s, (n, c) in DEFAULT_SOURCES.items() for seed in SEEDS
               for m, out in _outputs(n, c, methods, seed).items()}
    metrics = [m for m in metrics if not m.startswith(("true_ce", "cmee"))]
    # the metrics JSONs' values, which the aggregate job reads instead of recomputing (their size is what counts)
    long = pd.DataFrame([(s, m, seed, metric, 0.01) for s, m, seed in outputs for metric in metrics],
                        columns=["source", "method", "seed", "metric", "value"])
    return long, outputs, metrics


@benchmark("intervals.default_run", repeat=1)
def default_run_intervals(repeat):
    """Marks, intervals and noise floors of the tables (the aggregate job's statistics) for the default run's
    16 methods × 4 sources × 2 seeds × its metrics (less the true-map ones), on generated outputs of its sizes."""
    from calbench.report.tables import paired_verdicts
    from calbench.stats.resampling import RESAMPLES

    long, outputs, metrics = _default_run()
    cpu = time.process_time()
    seconds = timed(lambda: (), lambda: paired_verdicts(long, metrics, outputs.get), repeat)
    return {"seconds": seconds, "cpu_seconds": (time.process_time() - cpu) / repeat, "sources": len(DEFAULT_SOURCES),
            "methods": long["method"].nunique(),
            "seeds": len(SEEDS), "metrics": len(metrics), "resamples": RESAMPLES, "budget_seconds": 30}


@benchmark("intervals.recommend_1000_classes", repeat=1)
def recommend_1000_classes(repeat):
    """``python -m calbench recommend --json`` (NLL, 1,000 resamples; the command as a user runs it, interpreter
    start included) on a finished run of 6 methods × 2 seeds × 10,000 test rows of 1,000 classes (ImageNet-sized
    outputs written as the workflow's calibrated files)."""
    from calbench.data import store

    methods, n, classes = ["uncal", "ts", "ets", "vs", "dir_odir", "irm"], 10_000, 1000
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        rows = []
        for seed in SEEDS:
            for method, out in _outputs(n, classes, methods, seed).items():
                path = results / "calibrated" / "imagenet" / method / f"seed{seed}.h5"  # jobs.paths.CALIBRATED
                path.parent.mkdir(parents=True, exist_ok=True)
                store.write_calibrated(path, None, out["probs"].astype(np.float64), [], out["index"], out["labels"],
                                       {})
                rows.append(("imagenet", method, seed, "clean", "nll", float(seed)))
        (results / "tables").mkdir()
        pd.DataFrame(rows, columns=["source", "method", "seed", "test_set", "metric", "value"]).to_csv(
            results / "tables" / "metrics_long.csv", index=False)
        command = [sys.executable, "-m", "calbench", "recommend", str(results), "--metric", "nll", "--json"]
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = timed(lambda: (), lambda: subprocess.run(command, check=True, capture_output=True), repeat)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = (after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime) / repeat
    return {"seconds": seconds, "cpu_seconds": cpu_seconds,
            "methods": len(methods), "seeds": len(SEEDS), "rows": n, "classes": classes,
            "resamples": 1000, "budget_seconds": 60}
