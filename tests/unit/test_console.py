"""calbench's Snakemake console (src/snakemake_logger_plugin_calbench): the line of a finished job, its estimate of
the time left, the cut of overlong lines, a failed job in one line, and the closing lines of a complete run."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml

from conftest import REPO, SNAKEMAKE
from snakemake_logger_plugin_calbench import (
    MAX_LINE,
    ProgressLine,
    closing_lines,
    configfile,
    cut,
    duration,
    error_message,
)


def test_a_finished_job_gets_one_line_with_the_time_left_at_the_mean_pace():
    now = [100.0]
    line = ProgressLine(clock=lambda: now[0])
    line.job_info(7, "calibrate", {"source": "tiny", "method": "ts", "seed": "0"})
    now[0] += 30
    line.job_finished(7)
    assert line.progress(3, 12) == "[3/12] calibrate tiny/ts/0 done in 30.0 s; 30 s elapsed, ~1 min 30 s left"
    line.job_finished(8)  # a job whose header was never seen
    assert line.progress(12, 12) == "[12/12] job 8 done in 0.0 s; 30 s elapsed"


def test_durations_and_cut_lines():
    assert [duration(s) for s in (42, 185, 3720)] == ["42 s", "3 min 05 s", "1 h 02 min"]
    text = cut("short\n" + "x" * 5000)
    assert text.startswith("short\n") and max(map(len, text.split("\n"))) <= MAX_LINE + 60
    assert "--verbose prints all" in text


def test_the_error_of_a_failed_job_is_the_last_line_of_its_traceback(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("2026 INFO building\n2026 ERROR job failed\nTraceback (most recent call last):\n"
                   "  File \"x.py\", line 1, in <module>\n    f()\nValueError: bad scores; declare `scores: probs`\n")
    assert error_message([str(tmp_path / "none.log"), str(log)]) == "ValueError: bad scores; declare `scores: probs`"
    log.write_text("only a line\n\n")
    assert error_message([str(log)]) == "only a line" and error_message([]) == ""


def test_a_complete_run_ends_with_the_tables_the_next_commands_and_its_warnings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert configfile(["snakemake", "--cores", "1", "--configfile", "my.yaml"]) == "my.yaml"
    assert configfile(["snakemake", "--configfile=a.yaml"]) == "a.yaml"
    assert configfile(["snakemake"]) == "config/config.yaml"
    lines = closing_lines(["snakemake", "--configfile", "my.yaml"])
    assert lines[0].startswith("tables: results/tables/")
    assert lines[1] == "next: calbench recommend results/   ·   calbench report my.yaml" and len(lines) == 2
    (tmp_path / "results" / "tables").mkdir(parents=True)
    rows = [f"a,ts,{seed},calibrate,GridEdgeWarning,the best lambda is the last of the grid" for seed in (0, 1)]
    (tmp_path / "results" / "tables" / "warnings.csv").write_text(
        "source,method,seed,stage,category,message\n" + "\n".join(rows) + "\nb,irm,0,fit,UserWarning,other\n")
    lines = closing_lines(["snakemake"])
    assert lines[2].startswith("warnings (3 in the jobs' logs, 2 distinct")
    assert lines[3:] == ["  the best lambda is the last of the grid (a/ts)", "  other (b/irm)"]


@pytest.mark.workflow
def test_a_failing_job_prints_its_error_in_one_line_with_its_log(tmp_path):
    """Probabilities declared as logits, run without validate: the dump fails, and the console says why in one line
    (no traceback, no input list), the traceback staying in the job's log."""
    import subprocess

    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), size=400)
    np.save(tmp_path / "probs.npy", probs)
    np.save(tmp_path / "labels.npy", rng.integers(0, 4, size=400))
    config = {"seeds": [0], "methods": ["uncal", "ts"], "metrics": ["acc", "nll"], "figures": None,
              "sources": {"mine": {"type": "import", "format": "npy", "scores": "logits", "split": {"cal_size": 200},
                                   "files": {"logits": "probs.npy", "labels": "labels.npy"}}}}
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config))
    run = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--cores", "1", "--configfile", "my.yaml"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600, env={**os.environ})
    assert run.returncode != 0
    lines = (run.stdout + run.stderr).splitlines()
    first = next(i for i, line in enumerate(lines) if "error" in line.lower())
    failure = lines[first:]
    assert len(failure) <= 10, "\n".join(failure)
    (error,) = [line for line in failure if line.startswith("error: dump_source mine failed:")]
    assert "declare `scores: probs`" in error and error.endswith("log: logs/dump/mine.log")
    assert not any("Traceback" in line or line.strip().startswith("input:") for line in lines)
    assert "Traceback (most recent call last)" in (tmp_path / "logs" / "dump" / "mine.log").read_text()
