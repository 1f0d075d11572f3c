"""Spline recalibration, BBQ, ENIR, CIR, quadratic scaling and one-vs-one Venn-Abers (docs/methods_newer.md):
fit + predict on the CIFAR-100 ResNet-20 seed-0 split (5,000 × 100; target ≤ 10 CPU-s, ``newer_methods.<name>.k100``)
and at ImageNet scale (25,000 × 1,000 of config/scale.yaml, in a forked child with its peak memory; targets 60 s and
3 GB, ``scale_method.<name>``, as the other methods of :mod:`calbench.perf.scale`). ``venn_abers_ovo`` is left out
of the 1,000-class case: its k(k − 1)/2 = 499,500 pairwise predictors are beyond those limits, and it refuses more
than its ``max_classes`` (200) classes."""

from __future__ import annotations

import time

from calbench.perf import benchmark
from calbench.perf.defaults import LOGITS, split
from calbench.perf.scale import fit_predict, measured

METHODS = ["spline_conf", "spline_ovr", "bbq_conf", "bbq_ovr", "enir_conf", "enir_ovr", "cir", "quad_scaling",
           "venn_abers_ovo"]
AT_SCALE = [m for m in METHODS if m != "venn_abers_ovo"]


def _cifar100(name: str) -> dict:
    from calbench.methods import make

    if not (LOGITS / "cifar100_resnet-20").exists():
        return {"seconds": float("nan"), "skipped": f"{LOGITS} absent"}
    z, y, z_test, _ = split("cifar100_resnet-20", 0)
    cpu, wall = time.process_time(), time.perf_counter()
    make(name).fit(z, y).predict_proba(z_test)
    return {"seconds": time.perf_counter() - wall, "cpu_seconds": round(time.process_time() - cpu, 3),
            "n_cal": int(y.size), "classes": 100}


for _name in METHODS:
    benchmark(f"newer_methods.{_name}.k100", repeat=1)(lambda repeat, name=_name: _cifar100(name))
for _name in AT_SCALE:
    benchmark(f"scale_method.{_name}", repeat=1)(lambda repeat, name=_name: measured(lambda: fit_predict(name)))
