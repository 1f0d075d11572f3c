"""The load benchmark (src/calbench/perf/load.py): its three runs of a command — idle, beside two CPU-bound
neighbours, pinned to one core beside them — measure what they say, and the neighbours are stopped afterwards."""

import os
import sys

import pytest

import calbench.perf.load as load
from calbench.perf import discover

#: A command that spins for ~0.3 s of CPU and prints, as the library runs do, its own figures as a JSON line: here
#: the cores it may run on.
SPIN = ("import json, os, time\nstart = time.process_time()\nwhile time.process_time() - start < 0.3: pass\n"
        "print(json.dumps({'fit_seconds': 1.0, 'fit_cpu_seconds': 1.0, 'cores': len(os.sched_getaffinity(0))}))")


@pytest.mark.workflow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")
def test_the_three_runs_pin_load_and_stop_their_neighbours(monkeypatch, tmp_path):
    started = []
    spawn = load._neighbours

    def neighbours():
        started.extend(spawn())
        return started

    monkeypatch.setattr(load, "_neighbours", neighbours)
    record = load._compare([sys.executable, "-c", SPIN], tmp_path)
    assert len(started) == load.NEIGHBOURS and all(p.poll() is not None for p in started)  # stopped
    assert record["pinned"]["cores"] == 1 and record["idle"]["cores"] == len(os.sched_getaffinity(0))
    assert record["idle"]["neighbour_cores"] == 0 and record["loaded"]["neighbour_cores"] > 0
    for phase in ("idle", "loaded", "pinned"):  # the child's own CPU time (0.3 s spun), not the neighbours'
        assert 0.3 <= record[phase]["cpu_seconds"] < 0.3 + record[phase]["seconds"], record[phase]
        assert record[phase]["other_cores"] >= 0
    assert record["timed"] == "the fit alone" and record["loaded_over_idle"] == 1.0  # the printed fit seconds


@pytest.mark.workflow
def test_a_failing_run_names_the_command_and_its_error(tmp_path):
    with pytest.raises(RuntimeError, match="(?s)failed \\(1\\):.*ZeroDivisionError"):
        load._run([sys.executable, "-c", "1 / 0"], tmp_path, False, [])


def test_every_fit_of_the_load_benchmark_is_registered():
    names = {name for name, _, _ in discover()}
    assert {f"load.library.{fit}" for fit in load.FITS} | {"load.cli.dir_odir", "load.job.dir_odir"} <= names
