"""Benchmark of one label-shift evaluate job of the default run (docs/label_shift.md): config/config.yaml's
``planted_t2.5`` source (5,000 test rows, 10 classes; its Dirichlet(1) and tweak-one 0.9 sets, one draw each, and
their 1,000 redraws with EM, BBSE-soft and RLLS re-estimated on each), its ``ts`` calibrator on seed 0.

The source's dump and the ``ts`` calibrate job run first, in a temporary folder, untimed; then the evaluate job's
function (:func:`calbench.jobs.evaluate.evaluate_job`) in this process, kernels loaded: ``cpu_seconds`` is its user +
system time (one BLAS thread where ``OMP_NUM_THREADS=1``, as make sets it), ``seconds`` its best wall time; the
default run has 38 such jobs (19 methods × 2 seeds)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import yaml

from calbench.perf import benchmark, timed

ROOT = Path(__file__).resolve().parents[3]
SOURCE, METHOD, SEED = "planted_t2.5", "ts", 0


def _config() -> dict:
    """The default config cut to the source and the method (its metrics, bootstrap and label-shift entry kept)."""
    from calbench.config import load

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["sources"] = {SOURCE: config["sources"][SOURCE]}
    config["methods"], config["seeds"] = [METHOD], [SEED]
    config.pop("figures", None)
    config.pop("studies", None)
    return load(config)


@benchmark("label_shift.evaluate_job", repeat=3)
def label_shift_evaluate_job(repeat):
    """One label-shift evaluate job of the default run (module docstring)."""
    from calbench.jobs import calibrate, evaluate, sources
    from calbench.stats.resampling import RESAMPLES

    config = _config()
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the jobs' paths are relative to the run's folder (results/...)
        try:
            sources.dump_source_job(spec=sources.spec(config, source=SOURCE))
            calibrate.calibrate_job(spec=calibrate.spec(config, source=SOURCE, method=METHOD, seed=SEED))
            job = evaluate.spec(config, source=SOURCE, method=METHOD, seed=SEED)
            evaluate.evaluate_job(spec=job)  # kernels compiled or loaded, untimed
            cpu = time.process_time()
            seconds = timed(lambda: (), lambda: evaluate.evaluate_job(spec=job), repeat)
            cpu_seconds = (time.process_time() - cpu) / repeat
        finally:
            os.chdir(here)
    entry = config["sources"][SOURCE]
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "test_rows": entry["n_test"],
            "classes": entry["num_classes"], "sets": len(job.label_shift.get("dirichlet", []))
            + len(job.label_shift.get("tweak_one", [])), "redraws": RESAMPLES,
            "metrics": len(job.label_shift["metrics"])}
