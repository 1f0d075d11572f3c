"""Compare TS, VS, MS-ODIR, Dir-L2 and Dir-ODIR on the real CIFAR logits of ../shared/data (issue 4).

For each model and seed: a stratified 5,000/5,000 split of the 10,000 test images (``split_pool``),
each method fitted on the first half with its default settings (5-fold CV over the authors' grids,
fold models averaged, for the tuned ones), evaluated on the second. Prints one row per
(model, method) with means over seeds of classwise ECE (×100; 15 equal-width and equal-mass bins)
and log-loss, to set beside Dirichlet paper Tables 3–4 (Supp. Tables 16, 13).

    PYTHONPATH=src python scripts/dirichlet_cifar.py [--seeds 0 1] [--models cifar10_resnet-20 ...] [--out f.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from calbench.data.atomic import write_text_atomic
from calbench.data.splits import split_pool
from calbench.methods import make
from calbench.metrics import evaluate

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "logits"  # as tests/conftest.py
MODELS = ["cifar10_resnet-20", "cifar10_vgg19_bn", "cifar100_resnet-20", "cifar100_vgg19_bn"]
METHODS = ["uncal", "ts", "vs", "ms_odir", "dir_l2", "dir_odir"]
METRICS = ["ece.cw.ew15.l1", "ece.cw.em15.l1", "nll", "acc"]


def run(models, methods, seeds, data: Path = DATA) -> list[dict]:
    rows = []
    for model in models:
        logits = np.load(data / model / "scores.npy").astype(np.float64)
        labels = np.load(data / model / "targets.npy")
        for seed in seeds:
            cal, test = split_pool(labels, seed, cal_size=5000)
            for method in methods:
                start = time.perf_counter()
                est = make(method).fit(logits[cal], labels[cal])
                seconds = time.perf_counter() - start
                scores = evaluate(est.predict_proba(logits[test]), labels[test], METRICS)
                best = est.fitted_summary().get("best_params") if hasattr(est, "best_params_") else None
                rows.append({"model": model, "seed": seed, "method": method, "fit_seconds": seconds,
                             "best_params": best, **scores})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def summary(rows) -> str:
    lines = [f"{'model':20s} {'method':9s} " + " ".join(f"{m:>15s}" for m in METRICS)]
    keys = sorted({(r["model"], r["method"]) for r in rows}, key=lambda k: (k[0], METHODS.index(k[1])))
    for model, method in keys:
        sel = [r for r in rows if r["model"] == model and r["method"] == method]
        values = [np.mean([r[m] for r in sel]) * (100 if m.startswith("ece") else 1) for m in METRICS]
        lines.append(f"{model:20s} {method:9s} " + " ".join(f"{v:15.4f}" for v in values))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--methods", nargs="+", default=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of <model>/scores.npy, targets.npy")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = run(args.models, args.methods, args.seeds, args.data)
    print(summary(rows))
    if args.out:
        write_text_atomic(args.out, json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
