"""``make bench ONLY=peers``: ``sms``, ``svs`` and ``ts`` beside the SMS authors' package probmetrics (``sms``,
``svs``, ``temp-scaling``) on the same split, in one process: the CIFAR-100 ResNet-20 logits of ../shared/data
(seeded random 5,000 / 5,000 split, :func:`calbench.perf.defaults.split`) and 1,000 classes (``imagenet_like`` of
config/scale.yaml, 25,000 calibration + 25,000 test rows, ImageNet's size). Each record has the CPU and wall
seconds of fit + predict, each the best of :data:`REPEATS` runs that alternate between the two packages (so that
both see the machine's load alike), and the test NLL of both (``probmetrics_*``; "absent" where the package is
not installed), both warm (each package's one-time start-up paid on a few rows first). Run with
OMP_NUM_THREADS=1 for the one-core figures; probmetrics's torch is set to one thread. The figures are in
docs/runtime.md, "``sms`` and ``svs`` beside probmetrics".

The calibrators of docs/methods_newer.md ("Spline, BBQ, ENIR, CIR, quadratic scaling, one-vs-one Venn-Abers") run
beside their reference packages on the CIFAR-100 split only (``peers.<method>.k100``): probmetrics' ``cir`` (needs
cir-model) and its quadratic scaling per class, netcal's BBQ and ENIR (variants, not the authors' code), and
venn-abers' one-vs-one predictor; each record adds ``peer`` (the package), ``peer_cpu``, ``peer_nll`` and
``max_abs_diff`` (largest difference of the two outputs), or ``peer: "absent"``."""

from __future__ import annotations

import functools
import time
import warnings

import numpy as np
from scipy.special import softmax

from calbench.perf import benchmark
from calbench.perf.defaults import LOGITS, split

PEER_NAMES = {"sms": "sms", "svs": "svs", "ts": "temp-scaling"}
IMAGENET_ROWS = 25_000
#: Runs of each package per record, alternating: CPU and wall seconds are the best of these.
REPEATS = 5


@functools.cache
def _data(classes: int) -> tuple[np.ndarray, ...]:
    if classes == 100:
        return split("cifar100_resnet-20", 0)
    from calbench.data.synthetic import generate

    data = generate("imagenet_like", 0, IMAGENET_ROWS, IMAGENET_ROWS, num_classes=1000, embedding_dim=768,
                    accuracy=0.76, temperature=1.5, imbalance=0.0)
    return (data["cal"]["logits"].astype(np.float64), data["cal"]["labels"], data["test"]["logits"].astype(np.float64),
            data["test"]["labels"])


def _clock(run):
    cpu = time.process_time()
    out = run()
    return out, time.process_time() - cpu


def _best_of(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """(best CPU seconds, best wall seconds) over ``runs`` of (CPU, wall) seconds."""
    return round(min(cpu for cpu, _ in runs), 3), round(min(wall for _, wall in runs), 3)


def _nll(probs: np.ndarray, y: np.ndarray) -> float:
    from calbench.metrics import proper

    return round(proper.log_loss(probs, y), 6)


def _timed(run) -> tuple[np.ndarray, tuple[float, float]]:
    """``run()``'s output and its (CPU, wall) seconds."""
    start = time.perf_counter()
    out, cpu = _clock(run)
    return out, (cpu, time.perf_counter() - start)


def _peer(name: str, z, y, z_test, y_test) -> tuple[np.ndarray, tuple[float, float]] | None:
    """probmetrics's fit + predict of ``name`` on the softmax outputs and its (CPU, wall) seconds; None where
    the package is not installed."""
    try:
        import torch
        from probmetrics.calibrators import get_calibrator
    except ImportError:
        return None
    torch.set_num_threads(1)
    peer = PEER_NAMES[name]
    p_cal, p_test = softmax(z, axis=1), softmax(z_test, axis=1)
    options = {f"{peer}_print_init_info": False} if peer in ("sms", "svs") else {}
    probs, seconds = _timed(lambda: get_calibrator(peer, **options).fit(p_cal, y).predict_proba(p_test))
    return np.asarray(probs), seconds


def _case(name: str, classes: int, repeat: int) -> dict:
    from calbench.methods import make

    if classes == 100 and not (LOGITS / "cifar100_resnet-20").exists():
        return {"seconds": float("nan"), "skipped": f"{LOGITS} absent"}
    z, y, z_test, y_test = _data(classes)
    with warnings.catch_warnings():  # one-time start-up, untimed: probmetrics's and torch's, numba's first calls
        warnings.simplefilter("ignore")
        _peer(name, z[:200], y[:200], z_test[:10], y_test[:10])
        make(name).fit(z[:200], y[:200]).predict_proba(z_test[:10])
    ours, theirs, peer = [], [], None
    for _ in range(repeat):  # alternating, so that both packages see the machine's load alike
        probs, seconds = _timed(lambda: make(name).fit(z, y).predict_proba(z_test))
        ours.append(seconds)
        peer = _peer(name, z, y, z_test, y_test)
        if peer is not None:
            theirs.append(peer[1])
    cpu, wall = _best_of(ours)
    record = {"seconds": wall, "cpu": cpu, "nll": _nll(probs, y_test), "repeats": repeat, "classes": classes,
              "n_cal": int(y.size), "n_test": int(y_test.size)}
    if peer is None:
        return {**record, "probmetrics": "absent"}
    peer_cpu, peer_wall = _best_of(theirs)
    return {**record, "probmetrics_cpu": peer_cpu, "probmetrics_seconds": peer_wall,
            "probmetrics_nll": _nll(peer[0], y_test)}


def _quadratic_peer(p_cal, y, p_test):
    from probmetrics.calibrators.base import MulticlassOneVsRestCalibrator
    from probmetrics.calibrators.logistic import BinaryLogisticCalibrator

    return MulticlassOneVsRestCalibrator(BinaryLogisticCalibrator(type="quadratic")).fit(p_cal, y).predict_proba(p_test)


def _cir_peer(p_cal, y, p_test):
    from probmetrics.calibrators import get_calibrator

    return get_calibrator("cir").fit(p_cal, y).predict_proba(p_test)


def _netcal_peer(kind):
    def run(p_cal, y, p_test):
        from netcal import binning

        return np.clip(getattr(binning, kind)().fit(p_cal, y).transform(p_test), 1e-300, 1.0)

    return run


def _venn_abers_peer(p_cal, y, p_test):
    from venn_abers.venn_abers import predict_proba_prefitted_va

    return predict_proba_prefitted_va(p_cal, y, p_test, va_tpe="one_vs_one")[0]


#: calbench method → (package, the package's output on softmax probabilities).
NEWER_PEERS = {"quad_scaling": ("probmetrics", _quadratic_peer), "cir": ("probmetrics+cir_model", _cir_peer),
               "bbq_ovr": ("netcal", _netcal_peer("BBQ")), "enir_ovr": ("netcal", _netcal_peer("ENIR")),
               "venn_abers_ovo": ("venn_abers", _venn_abers_peer)}


def _newer_case(name: str) -> dict:
    from calbench.methods import make

    if not (LOGITS / "cifar100_resnet-20").exists():
        return {"seconds": float("nan"), "skipped": f"{LOGITS} absent"}
    z, y, z_test, y_test = _data(100)
    start = time.perf_counter()
    probs, cpu = _clock(lambda: make(name).fit(z, y).predict_proba(z_test))
    record = {"seconds": time.perf_counter() - start, "cpu": round(cpu, 3), "nll": _nll(probs, y_test),
              "classes": 100, "n_cal": int(y.size), "n_test": int(y_test.size)}
    package, peer = NEWER_PEERS[name]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs, peer_cpu = _clock(lambda: np.asarray(peer(softmax(z, axis=1), y, softmax(z_test, axis=1))))
    except ImportError:
        return {**record, "peer": "absent"}
    return {**record, "peer": package, "peer_cpu": round(peer_cpu, 3), "peer_nll": _nll(theirs, y_test),
            "max_abs_diff": float(np.abs(theirs - probs).max())}


for _name in NEWER_PEERS:
    benchmark(f"peers.{_name}.k100", repeat=1)(lambda repeat, name=_name: _newer_case(name))

for _classes in (100, 1000):
    for _name in PEER_NAMES:
        benchmark(f"peers.{_name}.k{_classes}", repeat=REPEATS)(
            lambda repeat, name=_name, classes=_classes: _case(name, classes, repeat))
