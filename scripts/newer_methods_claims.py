"""Check the headline claims of the newest calibrators on the shared CIFAR logits (docs/methods_newer.md).

SMS (Berta et al. 2025): SMS ≤ MS-ODIR / Dir-ODIR in test NLL on CIFAR-100. TvA (Le Coz et al. 2024): the
TvA variant lowers the confidence ECE (15 equal-mass bins) of the method it wraps on CIFAR-100.
Each model's 10,000 test rows are split 5,000/5,000 (stratified, seeds as config/cifar.yaml), in-process:

    python scripts/newer_methods_claims.py [--seeds 0 1 2] [--models cifar100_resnet-20 ...] [--methods sms ...]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from calbench.data.splits import split_pool
from calbench.methods import make
from calbench.metrics import evaluate

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "logits"
MODELS = ["cifar10_resnet-20", "cifar10_vgg19_bn", "cifar100_resnet-20", "cifar100_vgg19_bn"]
METHODS = ["uncal", "ts", "tva_ts", "vs", "tva_vs", "hist", "tva_hist", "irova", "tva_iso", "svs", "sms",
           "ms_odir", "dir_odir", "tlhb", "venn_abers"]
METRICS = ["acc", "nll", "ece.conf.em15.l1", "ece.tl.em15.l1", "smece.conf"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--methods", nargs="+", default=METHODS)
    parser.add_argument("--out", default="results/newer_methods_claims.json")
    args = parser.parse_args()
    rows = []
    for model in args.models:
        z = np.load(DATA / model / "scores.npy").astype(np.float64)
        y = np.load(DATA / model / "targets.npy")
        for seed in args.seeds:
            cal, test = split_pool(y, seed, cal_size=5000)
            for method in args.methods:
                start = time.process_time()
                probs = make(method).fit(z[cal], y[cal]).predict_proba(z[test])
                row = {"model": model, "seed": seed, "method": method, "cpu_s": time.process_time() - start,
                       **evaluate(probs, y[test], METRICS)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
