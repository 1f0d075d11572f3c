"""The local job runner (calbench.jobs.runner): a job that a rule's shell command (workflow/scripts/job_runner/
client.py) hands to it runs its script in a child forked from the runner, with the job's streams, working directory
and environment, and its exit status becomes the job's; without a runner, or for a job it declines, the client
runs the script in a Python of its own (calbench.jobs.script_job)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calbench.jobs import runner
from conftest import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the runner runs on Linux only")

CLIENT = REPO / "workflow" / "scripts" / "job_runner" / "client.py"
SCRIPT = """
import os, sys
print("pid", os.getpid(), "parent", os.getppid(), "cwd", os.getcwd(), "env", os.environ.get("JOB_VALUE"),
      "config", snakemake.config["marker"], "rule", snakemake.rule, "threads", snakemake.threads)
action = snakemake.wildcards["action"]
if action == "exit":
    sys.exit(3)
if action == "raise":
    raise ValueError("the job's own error")
if action == "sleep":
    open("started", "w").close()
    import time
    time.sleep(60)
"""


@pytest.fixture
def started(tmp_path, monkeypatch):
    """A runner for this test (its record in tmp_path), stopped afterwards."""
    monkeypatch.delenv(runner.ADDRESS_ENV, raising=False)
    runner.start(record=tmp_path / "record.tsv")
    yield runner._server.pid
    runner.stop()
    assert runner.ADDRESS_ENV not in os.environ


def _command(tmp_path, action) -> list[str]:
    """The shell command of a rule that runs the script above (workflow/rules/common.smk, ``job_command``)."""
    script, config = tmp_path / "rule_script.py", tmp_path / "config.json"
    script.write_text(SCRIPT)
    config.write_text('{"marker": "the resolved config"}')
    (tmp_path / "work").mkdir(exist_ok=True)
    return [sys.executable, "-S", str(CLIENT), "calibrate", str(script), str(config), "2", str(tmp_path / "job.log"),
            "source=src", f"action={action}"]


def _job(tmp_path, action, **kwargs):
    env = {**os.environ, "JOB_VALUE": "from the job"}
    return subprocess.run(_command(tmp_path, action), cwd=tmp_path / "work", env=env, capture_output=True, text=True,
                          timeout=120, **kwargs)


def test_a_job_runs_in_a_child_of_the_runner_with_its_streams_directory_and_environment(tmp_path, started):
    done = _job(tmp_path, "print")
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert words[3] == str(started)  # the child's parent is the runner, not the job's process
    assert words[5] == str(tmp_path / "work")
    assert " ".join(words[6:]) == "env from the job config the resolved config rule calibrate threads 2"
    lines = (tmp_path / "record.tsv").read_text().splitlines()
    assert lines[0] == runner.RECORD_HEADER.strip() and lines[1].split("\t")[:3] == ["rule_script", "src/print", "0"]


def test_the_jobs_exit_status_and_traceback_are_the_jobs(tmp_path, started):
    assert _job(tmp_path, "exit").returncode == 3
    failed = _job(tmp_path, "raise")
    assert failed.returncode == 1 and "ValueError: the job's own error" in failed.stderr


def test_a_cancelled_job_ends_its_child(tmp_path, started):
    job = subprocess.Popen(_command(tmp_path, "sleep"), cwd=tmp_path / "work")
    deadline = time.monotonic() + 60
    while not (tmp_path / "work" / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    children = subprocess.run(["pgrep", "-P", str(started)], capture_output=True, text=True).stdout.split()
    assert len(children) == 1
    job.kill()
    job.wait()
    while Path(f"/proc/{children[0]}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{children[0]}").exists()


def test_the_runner_ends_with_its_run_and_removes_its_socket(tmp_path):
    """A killed Snakemake process (here a stand-in parent) leaves no runner and no socket behind."""
    code = ("import sys, time; from calbench.jobs import runner; runner.start(record=None); "
            "print(runner._server.pid, runner.os.environ[runner.ADDRESS_ENV], flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid, address = parent.stdout.readline().split()
    parent.kill()
    parent.wait()
    status = Path(f"/proc/{pid}/stat")

    def running() -> bool:  # a zombie has ended (until init reaps it)
        try:
            return status.read_text().split()[2] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 60
    while (Path(address).parent.exists() or running()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(address).parent.exists() and not running()


def test_without_a_runner_the_script_runs_in_its_own_process(tmp_path, monkeypatch):
    """The client becomes a Python with its site packages (calbench.jobs.script_job): the same process, the same
    job, exit status and traceback."""
    monkeypatch.delenv(runner.ADDRESS_ENV, raising=False)
    done = _job(tmp_path, "print")
    assert done.returncode == 0 and done.stdout.split()[3] == str(os.getpid()), done.stderr
    assert " ".join(done.stdout.split()[6:]) == "env from the job config the resolved config rule calibrate threads 2"
    assert _job(tmp_path, "exit").returncode == 3
    failed = _job(tmp_path, "raise")
    assert failed.returncode == 1 and "ValueError: the job's own error" in failed.stderr


def test_the_runner_is_off_where_asked_and_for_cluster_runs(monkeypatch):
    monkeypatch.delenv(runner.SWITCH_ENV, raising=False)
    assert runner.enabled(local_exec=True) and not runner.enabled(local_exec=False)
    monkeypatch.setenv(runner.SWITCH_ENV, "off")
    assert not runner.enabled(local_exec=True)
