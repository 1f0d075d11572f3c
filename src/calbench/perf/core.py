"""Benchmarks of the skeleton: temperature scaling and the binned metrics."""

import numpy as np

from calbench.data.synthetic import planted_temperature
from calbench.methods import make
from calbench.metrics import evaluate
from calbench.perf import benchmark, timed


def _planted(n, classes):
    data = planted_temperature(n, np.random.default_rng(0), num_classes=classes, temperature=2.0)
    return data["logits"], data["labels"]


@benchmark("ts.fit")
def ts_fit(repeat):
    n, c = 10_000, 100
    logits, labels = _planted(n, c)
    seconds = timed(lambda: (logits, labels), lambda z, y: make("ts").fit(z, y), repeat)
    return {"seconds": seconds, "n": n, "classes": c}


@benchmark("metrics.ece_suite")
def ece_suite(repeat):
    n, c = 10_000, 100
    logits, labels = _planted(n, c)
    probs = make("uncal").fit(logits, labels).predict_proba(logits)
    ids = ["ece.conf.em15.l1", "ece.conf.ew15.l1", "ece.cw.em15.l1", "ece.cw.ew15.l1", "nll", "brier"]
    seconds = timed(lambda: (probs, labels), lambda p, y: evaluate(p, y, ids), repeat)
    return {"seconds": seconds, "n": n, "classes": c, "metrics": len(ids)}
