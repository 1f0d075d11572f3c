"""The default run's measurement tools (docs/runtime.md, "The default run"): the per-rule breakdown of a finished
run and the CPU seconds of Snakemake's own process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from calbench.perf.run_breakdown import main as run_breakdown


def test_the_breakdown_takes_the_runners_cpu_seconds_and_the_benchmarks_elsewhere(tmp_path):
    head = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    for path, row in (("calibrate/s/ts/seed0.tsv", "0.5\t0\t1\t1\t1\t1\t0\t0\t0\t0.1"),
                      ("calibrate/s/ts/seed1.tsv", "0.7\t0\t1\t1\t1\t1\t0\t0\t0\t0.2"),
                      ("aggregate.tsv", "3.0\t0\t1\t1\t1\t1\t0\t0\t0\t4.5")):
        (tmp_path / "benchmarks" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "benchmarks" / path).write_text(head + row + "\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "job_runner.tsv").write_text(
        "script\tjob\texit\twall_s\tuser_s\tsys_s\tmax_rss_mb\n"
        "calibrate\ts/ts/0\t0\t0.4\t0.25\t0.05\t90\ncalibrate\ts/ts/1\t0\t0.6\t0.3\t0.1\t95\n")
    out = tmp_path / "record.json"
    run_breakdown([str(tmp_path), "--command", "make run", "--wall", "3 min", "--cpu", "300",
                   "--snakemake-cpu", "25.5", "--load", "2.1", "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["run"] == {"wall": "3 min", "cpu_seconds": 300.0, "snakemake_cpu_seconds": 25.5}
    rules = {e["name"]: e for e in record["benchmarks"]}
    assert rules["aggregate"] == {"name": "aggregate", "jobs": 1, "wall_seconds": 3.0, "cpu_seconds": 4.5,
                                  "cpu_source": "benchmark"}
    assert rules["calibrate"] == {"name": "calibrate", "jobs": 2, "wall_seconds": 1.2, "cpu_seconds": 0.7,
                                  "cpu_source": "runner"}


@pytest.mark.workflow  # starts a process
def test_snakemake_cpu_prints_the_own_process_line_when_snakemake_exits():
    run = subprocess.run([sys.executable, "-m", "calbench.perf.snakemake_cpu", "--version"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip()[0].isdigit(), run  # Snakemake's own answer
    assert "Snakemake's own process" in run.stderr and "CPU-s" in run.stderr, run.stderr
