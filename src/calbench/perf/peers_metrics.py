"""``make bench ONLY=peers``: calbench's metrics beside the libraries that publish them, on the CIFAR logits of
../shared/data: netcal 1.4 (``ACE(15, equal_intervals=False)`` ↔ ``ace.conf.em15``, ``MMCE`` ↔ ``mmce.conf``),
MAPIE 1.6 (``kolmogorov_smirnov_*``, ``kuiper_*``, ``spiegelhalter_*`` ↔ :mod:`calbench.metrics.cumulative`)
probmetrics 1.3 (``calib-err_*`` / ``refinement_*`` with ``ts-mix`` and ``isotonic-mix`` on ``cv-5`` and ``all``
↔ ``calib_err.*.{ts,isotonic}.*`` / ``refinement.*.{ts,isotonic}.*``) and torch-uncertainty 0.13 (``AURC``,
``AUGRC``: its trapezoid over coverages 1/n..1 divided by 1 − 1/n, computed from calbench's risk curve by that
formula and compared; the record also holds calbench's own ``aurc``/``augrc`` beside them).

Each network's 10,000 test rows are split as ``make bench ONLY=defaults`` splits them (seed 0, 5,000 / 5,000,
:func:`calbench.perf.defaults.split`); the metrics are computed on the 5,000 test rows, uncalibrated and after
temperature scaling fitted on the 5,000 calibration rows (whose p-values are not all 0). netcal's MMCE forms
the n × n kernel, so it gets the first 3,000 rows. A record holds every pair of values, the largest absolute
difference per peer, and the tolerance it is checked against (``tests/unit/test_metrics_peers.py``); a peer that is
not installed is "absent" (the peers are pyproject's ``reference`` extra; docs/metrics.md, "Beside other
libraries").
"""

from __future__ import annotations

import functools
import time

import numpy as np
from scipy.special import ndtr, softmax

from calbench.perf import benchmark
from calbench.perf.defaults import LOGITS, split

NETWORKS = ["cifar10_resnet-20", "cifar100_resnet-20"]
MMCE_ROWS = 3000
#: Largest accepted |calbench − peer| per peer, and why it is not 0.
TOLERANCE = {
    # netcal cuts equal-mass ranges at np.quantile of the scores, calbench into chunks of sorted scores
    "netcal": 3e-4,
    # MAPIE jitters the scores by 1e-8 (relative) before sorting; statistics are ~1–30, p-values in [0, 1]
    "mapie": 1e-6,
    # probmetrics fits the same TS minimiser (its bisection stops at float32 precision) and the same isotonic maps
    "probmetrics": 1e-8,
    # the same risk curve and formula; torch orders tied confidences its own way and sums in another order
    "torch-uncertainty": 1e-6,
}


@functools.cache
def outputs(network: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """{"uncal", "ts"} test probabilities and labels of one network (seed-0 split)."""
    from calbench.solvers.temperature_fit import fit_inverse_temperature

    z_cal, y_cal, z_test, y_test = split(network, 0)
    beta = fit_inverse_temperature(z_cal, y_cal)
    return {"uncal": softmax(z_test, axis=1), "ts": softmax(beta * z_test, axis=1)}, y_test


def _netcal(probs, labels) -> dict[str, tuple[float, float]]:
    from netcal.metrics import ACE, MMCE

    from calbench.metrics import evaluate

    head = slice(0, MMCE_ROWS)
    return {"ace.conf.em15": (evaluate(probs, labels, ["ace.conf.em15"])["ace.conf.em15"],
                              float(ACE(bins=15, equal_intervals=False).measure(probs, labels))),
            "mmce.conf": (evaluate(probs[head], labels[head], ["mmce.conf"])["mmce.conf"],
                          float(MMCE().measure(probs[head], labels[head])))}


def _mapie(probs, labels) -> dict[str, tuple[float, float]]:
    from mapie.metrics import calibration as peer

    from calbench.metrics import cumulative

    conf, hits = probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(np.float64)
    ks, kuiper, (z, _) = (cumulative.ks_test(conf, hits), cumulative.kuiper_test(conf, hits),
                          cumulative.spiegelhalter_test(conf, hits))
    return {"ks statistic": (ks[0], peer.kolmogorov_smirnov_statistic(hits, conf)),
            "ks p-value": (ks[1], peer.kolmogorov_smirnov_p_value(hits, conf)),
            "kuiper statistic": (kuiper[0], peer.kuiper_statistic(hits, conf)),
            "kuiper p-value": (kuiper[1], peer.kuiper_p_value(hits, conf)),
            "spiegelhalter Z": (z, peer.spiegelhalter_statistic(hits, conf)),
            "spiegelhalter one-sided p": (float(ndtr(-z)), peer.spiegelhalter_p_value(hits, conf))}


def _probmetrics(probs, labels) -> dict[str, tuple[float, float]]:
    import torch
    from probmetrics.metrics import Metrics

    from calbench.metrics import evaluate

    torch.set_num_threads(1)
    pairs = {f"{part}.{loss}.{family}.{folds}": f"{peer_part}_{peer_loss}_{family}-mix_{peer_folds}"
             for part, peer_part in (("calib_err", "calib-err"), ("refinement", "refinement"))
             for loss, peer_loss in (("nll", "logloss"), ("brier", "brier"))
             for family in ("ts", "isotonic")
             for folds, peer_folds in (("cv5", "cv-5"), ("all", "all"))}
    theirs = Metrics.from_names(list(pairs.values())).compute_all_from_labels_logits(
        torch.as_tensor(labels), torch.as_tensor(np.log(probs)))
    ours = evaluate(probs, labels, list(pairs))
    return {ours_id: (ours[ours_id], float(theirs[peer_id])) for ours_id, peer_id in pairs.items()}


def _risk_coverage_module():
    """torch-uncertainty's ``risk_coverage`` module, run from its file: the package's ``__init__`` imports lightning,
    which these metrics do not use (its own imports are torch, torchmetrics and matplotlib)."""
    import importlib.util
    from pathlib import Path

    package = importlib.util.find_spec("torch_uncertainty")  # locates the package without running its __init__
    if package is None:
        raise ImportError("No module named 'torch_uncertainty'")
    path = Path(package.origin).parent / "metrics" / "classification" / "risk_coverage.py"
    spec = importlib.util.spec_from_file_location("torch_uncertainty_risk_coverage", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torch_uncertainty(probs, labels) -> dict[str, tuple[float, float]]:
    import torch

    from calbench.metrics import evaluate
    from calbench.metrics.selective import cumulative_errors

    peer = _risk_coverage_module()
    conf, errors = probs.max(axis=1), probs.argmax(axis=1) != labels
    n = labels.size
    risk = cumulative_errors(conf, errors) / np.arange(1, n + 1)  # calbench's curve, the trapezoid of its formula
    trapezoid = {"AURC": (risk.sum() - (risk[0] + risk[-1]) / 2) / (n - 1),
                 "AUGRC": (np.sum(risk * np.arange(1, n + 1)) / n - (risk[0] / n + risk[-1]) / 2) / (n - 1)}
    p, y = torch.as_tensor(probs), torch.as_tensor(labels)
    ours = evaluate(probs, labels, ["aurc", "augrc"])
    return {f"{name}, its formula on calbench's curve (calbench's {name.lower()}: {ours[name.lower()]:.6f})":
            (float(trapezoid[name]), float(getattr(peer, name)()(p, y))) for name in ("AURC", "AUGRC")}


PEERS = {"netcal": _netcal, "mapie": _mapie, "probmetrics": _probmetrics, "torch-uncertainty": _torch_uncertainty}


def compare(peer: str, network: str) -> dict:
    """Every (calbench, peer) pair of ``peer`` on both outputs of ``network``; {"absent": ...} without the peer."""
    try:
        values = {f"{kind}: {name}": pair for kind, probs in outputs(network)[0].items()
                  for name, pair in PEERS[peer](probs, outputs(network)[1]).items()}
    except ImportError as error:
        return {"absent": f"{peer} is not installed ({error})"}
    return {"values": values, "max_abs_diff": max(abs(a - b) for a, b in values.values()),
            "tolerance": TOLERANCE[peer]}


def _case(peer: str, network: str) -> dict:
    if not (LOGITS / network).exists():
        return {"seconds": float("nan"), "skipped": f"{LOGITS} absent"}
    outputs(network)  # the split and the TS fit, untimed
    start = time.perf_counter()
    record = compare(peer, network)
    return {"seconds": time.perf_counter() - start, "network": network, **record}


for _peer in PEERS:
    for _network in NETWORKS:
        benchmark(f"peers.metrics.{_peer}.{_network}", repeat=1)(
            lambda repeat, peer=_peer, network=_network: _case(peer, network))
