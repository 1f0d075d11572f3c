"""``make bench ONLY=defaults``: every method of the default run (config/config.yaml, less ``kcal``, which needs
embeddings) and ``pl3_ovr``, with its default settings and default grid, on the four networks of ../shared/data.

Each network's 10,000 test outputs are split by a seeded random permutation into 5,000 calibration and 5,000
test rows, for each seed of :data:`SEEDS`. A record (one network, one method) has the mean test NLL over the
seeds beside temperature scaling's and the uncalibrated outputs' on the same splits (``excess_over_ts``: the
mean of the per-seed differences, each in ``excess_per_seed``), the warnings raised (category → count over the
seeds), and the CPU seconds of fit + predict (``cpu_seconds``: the largest over the seeds; one process, BLAS
as the caller set it: run with OMP_NUM_THREADS=1 for the one-core figures). Tuned methods add the chosen
points and the number of points their grid extension added. Skipped where ../shared/data is absent. The
figures are in docs/methods_parametric.md, "Defaults on real outputs".
"""

from __future__ import annotations

import functools
import time
import warnings
from pathlib import Path

import numpy as np

from calbench.config import read_config_file
from calbench.perf import benchmark

ROOT = Path(__file__).resolve().parents[3]
LOGITS = ROOT / ".." / "shared" / "data" / "logits"
NETWORKS = ["cifar100_resnet-20", "cifar100_vgg19_bn", "cifar10_resnet-20", "cifar10_vgg19_bn"]
SEEDS = (0, 1, 2)
CAL_ROWS = 5000


def default_methods() -> list[str]:
    """The methods of config/config.yaml that run on logits alone, and ``pl3_ovr``."""
    methods = read_config_file(ROOT / "config" / "config.yaml")["methods"]
    return [m for m in methods if m != "kcal"] + ["pl3_ovr"]


@functools.cache
def split(network: str, seed: int) -> tuple[np.ndarray, ...]:
    """(calibration logits, labels, test logits, labels): a seeded random permutation of the 10,000 rows."""
    z = np.load(LOGITS / network / "scores.npy").astype(np.float64)
    y = np.load(LOGITS / network / "targets.npy").astype(np.int64)
    perm = np.random.default_rng(seed).permutation(y.size)
    cal, test = perm[:CAL_ROWS], perm[CAL_ROWS:]
    return z[cal], y[cal], z[test], y[test]


def fit_and_score(method: str, network: str, seed: int) -> dict:
    """Test NLL, warnings and CPU seconds of ``make(method)`` fitted on one split."""
    from calbench.methods import make
    from calbench.metrics import proper

    z_cal, y_cal, z_test, y_test = split(network, seed)
    cpu = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = make(method).fit(z_cal, y_cal)
        probs = model.predict_proba(z_test)
    out = {"nll": proper.log_loss(probs, y_test), "cpu": time.process_time() - cpu,
           "warnings": [w.category.__name__ for w in caught]}
    if hasattr(model, "cv_losses_"):
        out |= {"best": model.best_params_, "added": len(model.added_points_)}
    return out


@functools.cache
def reference_nll(method: str, network: str, seed: int) -> float:
    return fit_and_score(method, network, seed)["nll"]


def record(method: str, network: str) -> dict:
    if not (LOGITS / network).exists():
        return {"seconds": float("nan"), "skipped": f"{LOGITS / network} absent"}
    start = time.perf_counter()
    runs = [fit_and_score(method, network, seed) for seed in SEEDS]
    ts = [reference_nll("ts", network, seed) for seed in SEEDS]
    uncal = [reference_nll("uncal", network, seed) for seed in SEEDS]
    excess = [r["nll"] - t for r, t in zip(runs, ts)]
    counts: dict[str, int] = {}
    for r in runs:
        for name in r["warnings"]:
            counts[name] = counts.get(name, 0) + 1
    out = {"seconds": time.perf_counter() - start, "network": network, "method": method, "seeds": list(SEEDS),
           "test_nll": round(float(np.mean([r["nll"] for r in runs])), 5), "ts_nll": round(float(np.mean(ts)), 5),
           "uncal_nll": round(float(np.mean(uncal)), 5), "excess_over_ts": round(float(np.mean(excess)), 5),
           "excess_per_seed": [round(e, 5) for e in excess], "warnings": counts,
           "cpu_seconds": round(max(r["cpu"] for r in runs), 2)}
    if "best" in runs[0]:
        out |= {"best": [r["best"] for r in runs], "added_points": [r["added"] for r in runs]}
    return out


for _network in NETWORKS:
    for _method in default_methods():
        benchmark(f"defaults.{_network}.{_method}", repeat=1)(
            lambda repeat, method=_method, network=_network: record(method, network))
