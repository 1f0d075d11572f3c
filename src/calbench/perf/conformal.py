"""The `conformal` benchmark: every conformal metric of one 10,000 × 100 test split (all six constructions, α = 0.1
and 0.05, 20 random divisions each), as the evaluate job computes them.

``conformal_metrics``: ``cpu_seconds`` (user + sys of this process, the fair figure on a shared machine) and
``seconds`` (wall) of :func:`calbench.metrics.evaluate` on the 84 ids ``{kind}.{construction}.a{10|05}``;
``resampled_cpu_seconds``: the same ids but Mondrian LAC's on 200 bootstrap resamples (the tables' paired
bootstrap, :func:`calbench.metrics.evaluation.evaluate_resampled`), ``resampled_lac_cc_cpu_seconds``: Mondrian LAC's
14 ids alone (its set sizes compare every label with R per-class thresholds: R × N × K per division).
Synthetic probabilities σ(3·N(0, 1)) with labels drawn from them. The figures are in docs/metrics.md.
"""

from __future__ import annotations

import time

import numpy as np

from calbench.perf import benchmark

ROWS, CLASSES = 10_000, 100


def _ids():
    from calbench.metrics.conformal import CONSTRUCTIONS
    from calbench.metrics.conformal_eval import KINDS

    return [f"{kind}.{c}.a{a}" for c in CONSTRUCTIONS for a in ("10", "05") for kind in KINDS]


@benchmark("conformal_metrics", repeat=1)
def conformal_metrics(repeat: int = 1) -> dict:
    from calbench.metrics.bootstrap import counts_of
    from calbench.metrics.evaluation import evaluate, evaluate_resampled

    rng = np.random.default_rng(0)
    logits = 3.0 * rng.normal(size=(ROWS, CLASSES))
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = (probs.cumsum(1) > rng.random(ROWS)[:, None]).argmax(1)
    ids = _ids()
    cpu, wall = time.process_time(), time.perf_counter()
    evaluate(probs, labels, ids, seed=0)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    counts = counts_of(rng.integers(ROWS, size=(200, ROWS)))
    resampled = {}
    mondrian = [i for i in ids if ".lac_cc." in i]
    for part, chosen in (("", [i for i in ids if i not in mondrian]), ("lac_cc_", mondrian)):
        start = time.process_time()
        evaluate_resampled(probs, labels, chosen, counts, seed=0)
        resampled[f"resampled_{part}cpu_seconds"] = time.process_time() - start
    return {"seconds": wall, "cpu_seconds": cpu, **resampled,
            "rows": ROWS, "classes": CLASSES, "ids": len(ids), "divisions": 20, "resamples": 200}
