"""Benchmarks of KCal (issue 5): training on 20,000 × 512 embeddings with 100 classes, and prediction.

The embeddings are Gaussian class clusters (a stand-in for a CIFAR-100 network's penultimate layer,
KCal paper Table 1: 45,000 train / 5,000 cal). The training time covers the whole ``fit``: the
projection's episodes with early stopping, and the bandwidth's golden-section search by 20-fold CV
on the 5,000 calibration points. Target (issue 5): under 2 minutes. ``cpu_seconds`` (process CPU
time) is the fairer number on a shared machine, where wall time mostly measures waiting.
"""

import time

import numpy as np

from calbench.methods import make
from calbench.perf import benchmark, timed
from calbench.scores import Scores

N_TRAIN, N_CAL, N_TEST, H, K = 20_000, 5_000, 10_000, 512, 100


def _embeddings(n, seed):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(0).normal(size=(K, H)) * 0.25
    y = rng.integers(0, K, n)
    emb = (centres[y] + rng.normal(size=(n, H))).astype(np.float32)
    return Scores(emb @ centres.T.astype(np.float32), emb), y


@benchmark("kcal.fit_20000x512_k100", repeat=1)
def kcal_fit(repeat):
    train, cal = _embeddings(N_TRAIN, 1), _embeddings(N_CAL, 2)
    fitted = {}

    def run(*_):
        start = time.process_time()
        fitted["model"] = make("kcal").fit(cal[0], cal[1], train=train)
        fitted["cpu_seconds"] = time.process_time() - start

    seconds = timed(lambda: (), run, repeat)
    summary = fitted["model"].fitted_summary()
    return {"seconds": seconds, "cpu_seconds": round(fitted["cpu_seconds"], 2), "n_train": N_TRAIN, "n_cal": N_CAL,
            "dim": H, "classes": K,
            "epochs": summary["epochs"], "bandwidth_evaluations": summary["bandwidth_evaluations"]}


@benchmark("kcal.predict_10000", repeat=3)
def kcal_predict(repeat):
    train, cal = _embeddings(4_000, 1), _embeddings(N_CAL, 2)
    test = _embeddings(N_TEST, 3)[0]
    model = make("kcal", max_epochs=2, steps_per_epoch=10).fit(cal[0], cal[1], train=train)
    seconds = timed(lambda: (test,), model.predict_proba, repeat)
    return {"seconds": seconds, "n_test": N_TEST, "n_cal": N_CAL, "dim": H, "classes": K}
