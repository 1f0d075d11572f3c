"""The workflow on a real one-node SLURM cluster (started here) gives the tables of a local run.

`.ci/slurm-setup.sh` installs Debian's slurmctld, slurmd, slurm-client and munge and writes
/etc/slurm/slurm.conf; this test starts munged, slurmctld and slurmd, runs a tiny config with
`--executor slurm` through profiles/slurm, and stops the daemons it started by PID. It skips, loudly,
only where SLURM is not installed; with CALBENCH_REQUIRE_SLURM=1 (set by .ci/run when the set-up
succeeded) it fails instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import warnings
from pathlib import Path

import pytest

from conftest import REPO, run_snakemake
from workflow_helpers import table_texts, tiny_config

pytestmark = [pytest.mark.slurm, pytest.mark.workflow, pytest.mark.xdist_group("slurm")]

DAEMONS = ("munged", "slurmctld", "slurmd")
CONF = Path("/etc/slurm/slurm.conf")


def _skip_or_fail(reason: str):
    if os.environ.get("CALBENCH_REQUIRE_SLURM") == "1":
        pytest.fail(f"SLURM test cannot run although .ci/slurm-setup.sh succeeded: {reason}")
    warnings.warn(f"SLURM INTEGRATION TEST SKIPPED: {reason}")
    pytest.skip(f"SLURM INTEGRATION TEST SKIPPED: {reason}")


def _cluster_up() -> bool:
    result = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    return result.returncode == 0 and any(s.strip() in ("idle", "mixed") for s in result.stdout.split())


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each daemon this test started (reverse order), SIGKILL where it does not stop."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    missing = [d for d in (*DAEMONS, "sbatch", "squeue", "srun") if shutil.which(d) is None]
    if missing:
        _skip_or_fail(f"{', '.join(missing)} not installed; run .ci/slurm-setup.sh as root (apt-get install "
                      "slurmctld slurmd slurm-client munge)")
    if not CONF.exists():
        _skip_or_fail(f"{CONF} is missing; run .ci/slurm-setup.sh as root")
    if _cluster_up():  # a cluster is already running: use it, stop nothing
        yield
        return
    if os.geteuid() != 0:
        _skip_or_fail("the daemons of a one-node cluster must be started as root")
    logs = tmp_path_factory.mktemp("slurm-daemons")
    procs = []
    try:
        munge_up = subprocess.run(["munge", "-n"], capture_output=True, timeout=20).returncode == 0
        daemons = ([] if munge_up else [["munged", "-F", "--force"]]) + [["slurmctld", "-D", "-c"], ["slurmd", "-D"]]
        for cmd in daemons:
            out = open(logs / f"{cmd[0]}.log", "w")
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
            time.sleep(1.0)
        deadline = time.monotonic() + 60
        while not _cluster_up():
            dead = [p.args[0] for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                detail = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in logs.iterdir())
                pytest.fail(f"the one-node SLURM cluster did not come up (exited: {dead}):\n{detail}")
            time.sleep(1.0)
        yield
    finally:
        _stop(procs)


def test_slurm_run_gives_the_tables_of_a_local_run(slurm_cluster, tmp_path):
    config = tiny_config(methods=("uncal", "ts"), seeds=(0,))
    run_snakemake(tmp_path / "local", config)
    cluster = run_snakemake(
        tmp_path / "slurm", config, "--workflow-profile", str(REPO / "profiles" / "slurm"),
        "--slurm-no-account", "--slurm-status-command", "squeue",
        "--slurm-init-seconds-before-status-checks", "2", "--latency-wait", "5",
    )
    assert "sbatch" in cluster.stdout + cluster.stderr or "SLURM jobid" in cluster.stdout + cluster.stderr
    submitted = (cluster.stdout + cluster.stderr).count("has been submitted with SLURM jobid")
    # the aggregate job's paired bootstrap is heavy: a cluster job too, not a local rule on the login node
    assert submitted == 3, f"expected a dump, a grouped calibrate/evaluate and the aggregate job, saw {submitted}"
    assert table_texts(tmp_path / "slurm") == table_texts(tmp_path / "local")
