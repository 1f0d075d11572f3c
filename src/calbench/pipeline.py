"""The jobs of the workflow as plain functions: Snakemake scripts call them, so does ``python -m calbench``.

Each job reads the files of the stage before it and writes its output atomically.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

import calbench
from calbench.data import splits, store
from calbench.data.atomic import write_text_atomic
from calbench.metrics import evaluate, lookup
from calbench.scores import Scores

log = logging.getLogger("calbench")


def dump_job(source: str, entry: dict, seeds, output, cache_dir="resources/downloads") -> None:
    """Build the HDF5 dump of one source."""
    from calbench.data import sources

    log.info("building dump of source %s (%s)", source, entry.get("type"))
    sources.make_dump(source, entry, seeds, output, cache_dir)


def build_method(method: str, settings: dict, seed: int):
    """The calibrator of a job: ``settings`` maps each stage name to its config slice."""
    from calbench.methods import make, split_chain  # imported per job: evaluation jobs do not need them

    parts = split_chain(method)
    estimator = make(method, **settings[parts[0]]) if len(parts) == 1 else make(method, **settings)
    _set_seed(estimator, seed)
    return estimator


def _set_seed(estimator, seed: int) -> None:
    """The job seed drives every source of randomness (CV folds, initialisations, sampling)."""
    for child in getattr(estimator, "steps", []):
        _set_seed(child, seed)
    if hasattr(estimator, "estimator"):
        _set_seed(estimator.estimator, seed)
    if "seed" in estimator.get_params(deep=False):
        estimator.set_params(seed=seed)


def _scores(part: dict) -> Scores:
    return Scores(part["logits"], part.get("embeddings"))


def calibrate_job(dump, output, method: str, settings: dict, seed: int, split: dict | None = None,
                  calibrator_output=None, input_kind: str = "logits", keep_cal_outputs: bool = False) -> None:
    """Fit ``method`` on the calibration split of ``dump`` for ``seed``; predict the test split.

    ``calibrator_output``: where to save the fitted calibrator (:func:`calbench.save`), marked as taking
    ``input_kind`` (the source's declared ``scores``: logits or probs). ``keep_cal_outputs``: also predict
    and store the calibration split (in-sample) outputs, which no calbench stage reads (77 MB per job at
    1,000 classes × 25,000 rows).
    """
    data = splits.load_split(dump, seed, split)
    estimator = build_method(method, settings, seed)
    cal, test = _scores(data["cal"]), _scores(data["test"])
    log.info("fitting %s on %d x %d (seed %d)", method, cal.n, cal.num_classes, seed)
    start = time.perf_counter()
    train = None
    if "train" in estimator.needs:
        train_part = store.read_group(dump, "train")
        train = (_scores(train_part), train_part["labels"])
    try:
        estimator.fit(cal, data["cal"]["labels"], train=train)
    except ValueError as err:
        raise ValueError(f"{dump} (seed {seed}), fitting {method}: {err}") from err
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    test_probs = estimator.predict_proba(test)
    predict_seconds = time.perf_counter() - start
    cal_probs = estimator.predict_proba(cal) if keep_cal_outputs else None
    log.info("fit %.3fs, predict %.3fs for %d test rows", fit_seconds, predict_seconds, test.n)
    if calibrator_output is not None:
        calbench.save(estimator, calibrator_output, input_kind=input_kind)
    store.write_calibrated(output, cal_probs, test_probs, data["cal_index"], data["test_index"],
                           data["test"]["labels"],
                           {"method": method, "seed": seed, "settings": settings, "fit_seconds": fit_seconds,
                            "predict_seconds": predict_seconds, "fitted": estimator.fitted_summary(),
                            "calbench_version": calbench.__version__})


def evaluate_job(calibrated, dump, output, metrics, source: str, method: str, seed: int,
                 split: dict | None = None, bootstrap: dict | None = None) -> None:
    """Compute ``metrics`` on the test predictions; ``true_ce.*`` only where the dump knows the true map.

    ``bootstrap`` (config key ``bootstrap: {samples, level, interval}``) adds confidence intervals.
    """
    out = store.read_calibrated(calibrated, "test")
    wanted = list(metrics)
    true_probs = uncal_probs = None
    if any(lookup(m)[0].needs_true_probs or lookup(m)[0].needs_uncal_probs for m in wanted):
        test = splits.load_split(dump, seed, split)["test"]
        true_probs = test.get("true_probs")
        uncal_probs = Scores(test["logits"]).probs
        if true_probs is None:
            wanted = [m for m in wanted if not lookup(m)[0].needs_true_probs]
    bootstrap = bootstrap or {}
    values = evaluate(out["probs"], out["labels"], wanted, true_probs=true_probs, seed=seed,
                      uncal_probs=uncal_probs, bootstrap=int(bootstrap.get("samples", 0)),
                      level=float(bootstrap.get("level", 0.95)), interval=bootstrap.get("interval", "basic"),
                      method=f"{method}, {calibrated}:test/probs")
    record = {"source": source, "method": method, "seed": seed, **values}
    write_text_atomic(output, json.dumps(record, indent=1) + "\n")


def aggregate_job(metric_files, out_dir, metrics, methods) -> None:
    """Fold every metrics JSON into the tables of ``results/tables``."""
    from calbench.report.tables import write_tables

    write_tables(metric_files, out_dir, metrics, methods)


@contextlib.contextmanager
def job_logging(log_file=None):
    """Send calbench's log (and warnings) to the job's log file, or to stderr outside Snakemake."""
    handler = logging.FileHandler(log_file, mode="w") if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    try:
        yield
    except Exception:
        log.exception("job failed")
        raise
    finally:
        root.removeHandler(handler)
        handler.close()


def snakemake_log(smk) -> str | None:
    return smk.log[0] if smk is not None and len(smk.log) else None
