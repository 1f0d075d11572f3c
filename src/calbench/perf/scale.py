"""ImageNet-scale benchmarks: 1,000 classes, 25,000 calibration + 25,000 test rows.

The data are the ``imagenet_like`` synthetic network of config/scale.yaml (768-dim embeddings;
KCal also gets a 25,000-row training split). Each case runs in a forked child whose peak resident
memory is reset at the start (``/proc/self/clear_refs``), so ``peak_mib`` is what the job holds at
its peak, the benchmark's whole data set (about 1.2 GB) included, and ``peak_above_inputs_mib``
what the case added to it; ``cpu_seconds`` is the child's CPU time, the fairer figure on a shared machine. Targets
(docs/runtime.md, "Targets at a glance"): ``lece``/``ts+lece`` with the 10 × 10 CV grid ≤ 30 s and ≤ 2 GB, ``irm``
≤ 1 GB, other methods ≤ 60 s and ≤ 3 GB, ``kcal`` ≤ 3 min, every default metric ≤ 5 s, bootstrap intervals of the
default metric list ≤ 2 min (timed on a few resamples, extrapolated). The parametric methods are benchmarked by
``scale_param_*`` (another module).
"""

from __future__ import annotations

import functools
import multiprocessing
import resource
import time
from pathlib import Path

from calbench.perf import benchmark

N_CAL = N_TEST = 25_000
CLASSES, DIM = 1000, 768
#: The non-parametric methods measured here (fit on cal, predict test).
METHODS = ["uncal", "lece", "ts+lece", "lecd", "hist", "hist_lece", "irova", "ts+irova", "irm", "kcal"]
#: The default metric list of config/config.yaml (and config/scale.yaml).
METRICS = ["acc", "nll", "brier", "ece.conf.em15.l1", "ece.conf.ew15.l1", "ece.cw.em15.l1", "ece.cw.ew15.l1",
           "mce.conf.ew15", "true_ce.conf.l1", "true_ce.cw.l1", "ece.conf.em15.l1.debiased",
           "ece.conf.em15.l2.debiased", "ece.conf.cv.l1", "ece.cw.em20.l1.kcal", "kde_ece.conf.l1", "ece_gain.l2",
           "skce.ul", "ece.conf.platt.l1", "ece.conf.beta.l1", "cmee.conf.beta.l1", "true_ce.cw.l2"]
#: Resamples timed; the record extrapolates to the 200 of docs/metrics.md (cost is linear in them).
#: the bootstrap is timed at two resample counts: intercept (point estimates, sorts) + slope × resamples
BOOTSTRAP_SAMPLES, BOOTSTRAP_TARGET_SAMPLES = (2, 22), 200


@functools.lru_cache(maxsize=1)
def data() -> dict:
    """The seed-0 split of config/scale.yaml's source, and its training split (for KCal)."""
    from calbench.data.synthetic import generate, generate_train

    options = {"num_classes": CLASSES, "embedding_dim": DIM}
    parts = generate("imagenet_like", 0, N_CAL, N_TEST, **options)
    parts["train"] = generate_train("imagenet_like", N_CAL, **options)
    return parts


def _status_mib(field: str) -> float:
    """``VmHWM`` (peak) or ``VmRSS`` (current) resident memory of this process in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(run, conn) -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:  # reset the peak to the current resident size
            f.write("5")
    except OSError:
        pass
    try:
        base = _status_mib("VmRSS")
        cpu, wall = time.process_time(), time.perf_counter()
        extra = run() or {}
        peak = _status_mib("VmHWM")
        conn.send({"seconds": round(time.perf_counter() - wall, 3), "cpu_seconds": round(time.process_time() - cpu, 3),
                   "peak_mib": round(peak), "peak_above_inputs_mib": round(peak - base), **extra})
    except Exception as err:  # noqa: BLE001 (reported, not raised: one failing case must not stop the section)
        conn.send({"seconds": float("nan"), "error": f"{type(err).__name__}: {err}"})
    conn.close()


def measured(run) -> dict:
    """Run ``run()`` in a forked child; its wall and CPU seconds and peak resident memory (MiB)."""
    data()  # generated in the parent, shared with the child copy-on-write
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(run, child))
    process.start()
    child.close()
    result = parent.recv()
    process.join()
    return result


def _scores(part):
    from calbench.scores import Scores

    return Scores(part["logits"], part["embeddings"])


def fit_predict(method: str) -> dict:
    from calbench.methods import make

    parts = data()
    model = make(method)
    train = (_scores(parts["train"]), parts["train"]["labels"]) if "train" in model.needs else None
    start = time.perf_counter()
    model.fit(_scores(parts["cal"]), parts["cal"]["labels"], train=train)
    fit = time.perf_counter() - start
    model.predict_proba(_scores(parts["test"]))
    return {"fit_seconds": round(fit, 3), "n_cal": N_CAL, "n_test": N_TEST, "classes": CLASSES}


def _test_context():
    from calbench.scores import Scores

    test = data()["test"]
    probs = Scores(test["logits"]).probs
    return probs, test["labels"], test["true_probs"]


def _metric(metric_id: str) -> dict:
    from calbench.metrics import evaluate

    probs, labels, true_probs = _test_context()
    start = time.perf_counter()
    evaluate(probs, labels, [metric_id], true_probs=true_probs, uncal_probs=probs)
    return {"metric_seconds": round(time.perf_counter() - start, 3), "n": N_TEST, "classes": CLASSES}


def _bootstrap() -> dict:
    from calbench.metrics import evaluate

    probs, labels, true_probs = _test_context()
    seconds = []
    for resamples in BOOTSTRAP_SAMPLES:
        start = time.process_time()
        evaluate(probs, labels, METRICS, true_probs=true_probs, uncal_probs=probs, bootstrap=resamples)
        seconds.append(time.process_time() - start)
    (few, many), (t_few, t_many) = BOOTSTRAP_SAMPLES, seconds
    per_resample = (t_many - t_few) / (many - few)
    fixed = t_few - few * per_resample
    return {"metrics": len(METRICS), "samples": list(BOOTSTRAP_SAMPLES), "cpu_seconds": [round(t, 1) for t in seconds],
            "cpu_seconds_per_resample": round(per_resample, 2),
            f"cpu_seconds_for_{BOOTSTRAP_TARGET_SAMPLES}": round(fixed + BOOTSTRAP_TARGET_SAMPLES * per_resample),
            "n": N_TEST, "classes": CLASSES}


def _register_all() -> None:
    for method in METHODS:
        benchmark(f"scale_method.{method}", repeat=1)(lambda repeat, m=method: measured(lambda: fit_predict(m)))
    for metric_id in METRICS:
        benchmark(f"scale_metric.{metric_id}", repeat=1)(lambda repeat, m=metric_id: measured(lambda: _metric(m)))
    benchmark("scale_bootstrap.default_metrics", repeat=1)(lambda repeat: measured(_bootstrap))


_register_all()
