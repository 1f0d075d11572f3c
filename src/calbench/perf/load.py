"""``make bench ONLY=load``: calbench's fits beside other work, the test of its thread policy
(:mod:`calbench.parallel`; docs/runtime.md, "Beside other work").

Each benchmark fits one method on CIFAR-100 ResNet-20's outputs (../shared/data; the 5,000 calibration rows of
seed 0's split, :func:`calbench.perf.defaults.split`) three times, each in a fresh process:

* ``idle``: nothing of the benchmark's beside it;
* ``loaded``: beside two CPU-bound neighbour processes that the benchmark starts before and stops after;
* ``pinned``: the same load, the fit's process pinned to one core (``os.sched_setaffinity``).

On two cores beside two neighbours a fair share is half the machine, so ``loaded_over_idle`` (wall seconds) is 2
where nothing is lost to threads that wait for each other; the target is ≤ 2.5, and ``loaded_over_pinned`` ≤ 1
(the fit's own threads never cost more than they give). Three paths of a user: ``library`` (the fit alone,
timed in the process: ``make(method).fit``), ``cli`` (the whole ``calbench fit`` command) and ``job`` (the whole
``calbench calibrate`` command: the workflow's calibrate job outside Snakemake).

A shared machine is seldom idle, so every run also records the load it saw: from /proc/stat, the cores busy
machine-wide during the run less the fit's and the neighbours' CPU time are other processes' (``other_cores``). The
ratios mean what they say where that is near 0 in all three runs. ``cpu_over_idle`` (CPU seconds loaded / idle)
depends little on it: threads that spin while they wait raise it above 1. Skipped where ../shared/data is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from calbench.perf import benchmark

ROOT = Path(__file__).resolve().parents[3]
NETWORK = "cifar100_resnet-20"
LOGITS = ROOT / ".." / "shared" / "data" / "logits" / NETWORK
NEIGHBOURS = 2
#: The fits: benchmark name → (method, whether to search the authors' grid: the Dirichlet paper's setting).
FITS = {"dir_odir": ("dir_odir", False), "ms_odir": ("ms_odir", False), "dir_l2": ("dir_l2", False),
        "dir_odir_authors": ("dir_odir", True)}


def _busy_seconds() -> float:
    """CPU seconds the whole machine has been busy since boot (/proc/stat: every state but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run(command: list[str], cwd: Path, pinned: bool, neighbours: list) -> dict:
    """Run ``command`` to its end: wall and CPU seconds (of it and its children), the fit's own figures where it
    prints a JSON line of them last, and the cores busy beside it (neighbours, other processes)."""
    core = min(os.sched_getaffinity(0))
    neighbour_cpu = sum(_cpu_seconds(p.pid) for p in neighbours)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        busy, start = _busy_seconds(), time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=err,
                                 preexec_fn=lambda: (_die_with_parent(), pinned and os.sched_setaffinity(0, {core})))
        _, status, usage = os.wait4(child.pid, 0)  # the child's own rusage, not the neighbours'
        wall = time.perf_counter() - start
        busy = _busy_seconds() - busy
        child.returncode = os.waitstatus_to_exitcode(status)
        neighbour_cpu = sum(_cpu_seconds(p.pid) for p in neighbours) - neighbour_cpu
        out.seek(0), err.seek(0)
        lines, errors = out.read().strip().splitlines(), err.read()
    if child.returncode:
        raise RuntimeError(f"{' '.join(command)} failed ({child.returncode}):\n{errors[-3000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    record = {"seconds": wall, "cpu_seconds": cpu}
    if lines and lines[-1].startswith("{"):
        record |= json.loads(lines[-1])  # the fit alone: its wall and CPU seconds
    record |= {"neighbour_cores": neighbour_cpu / wall, "other_cores": max(0.0, busy - cpu - neighbour_cpu) / wall}
    return {key: round(value, 2) for key, value in record.items()}


def _die_with_parent() -> None:
    """In a child before it runs: SIGKILL when the benchmark's process ends, however it ends (Linux prctl), so that
    no neighbour or fit outlives an interrupted benchmark."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _neighbours() -> list:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=_die_with_parent)
            for _ in range(NEIGHBOURS)]


def _stop(processes: list) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait()


def _compare(command: list[str], cwd: Path) -> dict:
    """The three runs of ``command`` (idle, loaded, pinned under the same load) and their ratios."""
    runs = {"idle": _run(command, cwd, False, [])}
    neighbours = _neighbours()
    try:
        time.sleep(0.5)  # the neighbours running before the fit starts
        runs["loaded"] = _run(command, cwd, False, neighbours)
        runs["pinned"] = _run(command, cwd, True, neighbours)
    finally:
        _stop(neighbours)
    wall, cpu = ("fit_seconds", "fit_cpu_seconds") if "fit_seconds" in runs["idle"] else ("seconds", "cpu_seconds")
    return {"seconds": runs["loaded"][wall], "loaded_over_idle": round(runs["loaded"][wall] / runs["idle"][wall], 2),
            "loaded_over_pinned": round(runs["loaded"][wall] / runs["pinned"][wall], 2),
            "cpu_over_idle": round(runs["loaded"][cpu] / runs["idle"][cpu], 2),
            "timed": "the fit alone" if wall == "fit_seconds" else "the whole command", **runs}


def _skipped() -> dict | None:
    if not LOGITS.exists():
        return {"seconds": float("nan"), "skipped": f"{LOGITS} absent"}
    if not hasattr(os, "sched_setaffinity"):
        return {"seconds": float("nan"), "skipped": "no os.sched_setaffinity on this system (pinned run)"}
    return None


def library(name: str) -> dict:
    """``make(method).fit`` on the calibration split, in a fresh process per run, the fit timed alone."""
    skipped = _skipped()
    if skipped:
        return skipped
    method, authors = FITS[name]
    command = [sys.executable, "-m", "calbench.perf.load", method, "authors" if authors else "default"]
    return {"path": "library", "method": method, "grid": "authors' grid" if authors else "default grid",
            **_compare(command, ROOT)}


def _fit_here(method: str, grid: str) -> None:
    """A library run's process: fit ``method`` on the split and print the fit's wall and CPU seconds as JSON."""
    from calbench.methods import make
    from calbench.methods.linear_maps import authors_odir_grid
    from calbench.perf.defaults import split

    z, y = split(NETWORK, 0)[:2]
    settings = {"grid": authors_odir_grid(z.shape[1])} if grid == "authors" else {}
    cpu, start = time.process_time(), time.perf_counter()
    make(method, **settings).fit(z, y)
    print(json.dumps({"fit_seconds": time.perf_counter() - start, "fit_cpu_seconds": time.process_time() - cpu}))


def _arrays(where: Path) -> tuple[Path, Path]:
    """The calibration split as .npy files in ``where``."""
    import numpy as np

    from calbench.perf.defaults import split

    z, y = split(NETWORK, 0)[:2]
    np.save(where / "scores.npy", z)
    np.save(where / "labels.npy", y)
    return where / "scores.npy", where / "labels.npy"


@benchmark("load.cli.dir_odir", repeat=1)
def cli(repeat):
    """``calbench fit dir_odir`` on the split's .npy files: the whole command."""
    skipped = _skipped()
    if skipped:
        return skipped
    with tempfile.TemporaryDirectory() as tmp:
        scores, labels = _arrays(Path(tmp))
        command = [sys.executable, "-m", "calbench", "fit", "dir_odir", "--scores", str(scores), "--labels",
                   str(labels), "-o", str(Path(tmp) / "fitted.safetensors")]
        return {"path": "cli", "method": "dir_odir", "grid": "default grid", **_compare(command, Path(tmp))}


@benchmark("load.job.dir_odir", repeat=1)
def job(repeat):
    """The calibrate job of dir_odir on an import source of the 10,000 rows (5,000 calibration rows, stratified,
    seed 0) as ``calbench job calibrate`` runs it outside Snakemake (``calibrate_job``: read the dump, fit, write the
    outputs): the whole command. Its folds run on the process's cores; in a workflow the job runs on its
    ``calibrate_threads`` (``share_cores``, default one thread), which cannot oversubscribe."""
    skipped = _skipped()
    if skipped:
        return skipped
    import yaml

    with tempfile.TemporaryDirectory() as tmp:
        config = {"seeds": [0], "methods": ["dir_odir"], "metrics": ["nll"],
                  "sources": {NETWORK: {"type": "import", "format": "npy", "scores": "logits",
                                        "files": {"logits": str((LOGITS / "scores.npy").resolve()),
                                                  "labels": str((LOGITS / "targets.npy").resolve())},
                                        "split": {"cal_size": 5000, "stratify": True}}}}
        (Path(tmp) / "config.yaml").write_text(yaml.safe_dump(config))
        calbench = [sys.executable, "-m", "calbench"]
        subprocess.run([*calbench, "job", "dump", "--config", "config.yaml", "--source", NETWORK], cwd=tmp, check=True,
                       capture_output=True)
        command = [*calbench, "job", "calibrate", "--config", "config.yaml", "--source", NETWORK,
                   "--method", "dir_odir", "--seed", "0"]
        return {"path": "job", "method": "dir_odir", "grid": "default grid", **_compare(command, Path(tmp))}


for _name in FITS:
    benchmark(f"load.library.{_name}", repeat=1)(lambda repeat, name=_name: library(name))

if __name__ == "__main__":
    _fit_here(sys.argv[1], sys.argv[2])
