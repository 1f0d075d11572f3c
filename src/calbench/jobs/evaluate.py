"""The evaluate job: the metrics of one calibrate job's test predictions."""

from __future__ import annotations

import json
import sys

from calbench.data import splits, store
from calbench.data.atomic import write_text_atomic
from calbench.data.store import PEAK_KEY
from calbench.metrics import evaluate, lookup
from calbench.scores import Scores


def evaluate_job(calibrated, dump, output, metrics, source: str, method: str, seed: int,
                 split: dict | None = None, bootstrap: dict | None = None) -> None:
    """Compute ``metrics`` on the test predictions; ``true_ce.*`` only where the dump knows the true map.

    ``bootstrap`` (config key ``bootstrap: {samples, level, interval}``) adds confidence intervals.
    """
    out = store.read_calibrated(calibrated, "test")
    wanted = list(metrics)
    true_probs = uncal_probs = None
    if any(lookup(m)[0].needs_true_probs or lookup(m)[0].needs_uncal_probs for m in wanted):
        test = splits.load_split(dump, seed, split, test_index=out["index"])["test"]
        true_probs = test.get("true_probs")
        uncal_probs = Scores(test["logits"]).probs
        if true_probs is None:
            wanted = [m for m in wanted if not lookup(m)[0].needs_true_probs]
    bootstrap = bootstrap or {}
    values = evaluate(out["probs"], out["labels"], wanted, true_probs=true_probs, seed=seed,
                      uncal_probs=uncal_probs, bootstrap=int(bootstrap.get("samples", 0)),
                      level=float(bootstrap.get("level", 0.95)), interval=bootstrap.get("interval", "basic"),
                      method=f"{method}, {calibrated}:test/probs")
    record = {"source": source, "method": method, "seed": seed, **values, PEAK_KEY: peak_rss_mb()}
    write_text_atomic(output, json.dumps(record, indent=1) + "\n")


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (MB): an evaluate job ends within Snakemake's first
    benchmark sample, whose ``max_rss`` then shows the freshly started process (0-2 MB)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB on Linux
