"""Kill and resume: SIGKILL a running workflow, rerun with --rerun-incomplete, and get the tables of an
uninterrupted run, with every result finished before the kill kept as it was (not recomputed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SNAKEMAKE, run_snakemake
from workflow_helpers import planned_jobs, table_texts, tiny_config

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("resume")]

CONFIG = tiny_config(methods=("uncal", "ts"), seeds=(0, 1))


def _results(work: Path) -> dict[Path, tuple[bytes, int]]:
    """Content and mtime of every calibrated, saved-calibrator and metrics file."""
    files = [*work.glob("results/calibrated/**/*.h5"), *work.glob("results/calibrators/**/*.safetensors"),
             *work.glob("results/metrics/**/*.json")]
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def _job_of(work: Path, path: Path) -> tuple[str, str]:
    """``results/metrics/tiny/ts/seed0.json`` → ``("evaluate", "tiny/ts/0")``."""
    stage, source, method, seed = path.relative_to(work / "results").with_suffix("").parts
    job = {"calibrated": "calibrate", "calibrators": "calibrate", "metrics": "evaluate"}[stage]
    return job, f"{source}/{method}/{seed[4:]}"


def _kill_once_a_result_is_written(work: Path) -> None:
    work.mkdir()
    (work / "config.yaml").write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--configfile",
           str(work / "config.yaml"), "--cores", "2"]
    proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # its own process group: the kill reaches every job
    try:
        deadline = time.monotonic() + 600
        while not list(work.glob("results/metrics/**/*.json")):
            assert proc.poll() is None, "snakemake ended before the test could kill it"
            assert time.monotonic() < deadline, "no metrics file after 10 minutes"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (work / "results" / "tables" / "summary.md").exists(), "killed too late: the run had finished"


def test_a_killed_run_resumes_to_the_results_of_an_uninterrupted_run(tmp_path):
    reference = tmp_path / "uninterrupted"
    run_snakemake(reference, CONFIG)

    work = tmp_path / "killed"
    _kill_once_a_result_is_written(work)
    at_kill = _results(work)
    assert at_kill, "nothing had been written before the kill"
    redo = planned_jobs(work, extra=("--rerun-incomplete",))
    resumed = run_snakemake(work, None, "--rerun-incomplete", check=False)
    if resumed.returncode != 0:  # a lock left by the killed run: the message says to unlock
        assert "--unlock" in resumed.stdout + resumed.stderr, resumed.stdout + resumed.stderr
        run_snakemake(work, None, "--unlock")
        run_snakemake(work, None, "--rerun-incomplete")

    after = _results(work)
    kept = [p for p in at_kill if _job_of(work, p) not in redo]
    assert kept, "no result was complete at the kill: kill later to test that finished results are kept"
    for path in kept:  # finished before the kill: not recomputed
        assert after[path] == at_kill[path], f"{path} was recomputed or changed by the resumed run"
    for path in work.glob("results/metrics/**/*.json"):  # recomputed ones: the same numbers as without a kill
        assert _metrics(path) == _metrics(reference / path.relative_to(work)), path
    assert table_texts(work) == table_texts(reference)  # two runs of one config: identical tables
    assert not list(work.glob("results/**/.*.tmp")), "temporary files of killed jobs were left behind"
    runtime = (work / "results" / "tables" / "runtime.md").read_text()
    assert "| tiny | uncal |" in runtime and "| tiny | ts |" in runtime


def _metrics(path: Path) -> dict:
    """A metrics JSON without the evaluate job's measured peak memory (a measurement, as the benchmark files)."""
    from calbench.data.store import PEAK_KEY

    record = json.loads(path.read_text())
    record.pop(PEAK_KEY)
    return record
