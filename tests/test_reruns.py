"""Incremental reruns (landscape B5): an edit reruns exactly the jobs it affects, asserted on `snakemake -n`.

A copy of the repository is run once; each test then edits the copy (config, a method's module, the
metric list), reads the job list of a dry run and restores the edit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_snakemake
from workflow_helpers import copy_repository, planned_jobs, tiny_config

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("reruns")]

METHODS = ("uncal", "ts", "uncal+ts")


def _jobs_of(*methods, rules=("calibrate", "evaluate")):
    return {(rule, f"tiny/{m}/0") for m in methods for rule in rules} | {("aggregate", ""), ("runtime_table", "")}


@pytest.fixture(scope="session")  # session: kept when xdist interleaves tests of other modules
def done(tmp_path_factory):
    """(repository copy, work dir, run options) after one complete run of a three-method config."""
    root = tmp_path_factory.mktemp("reruns")
    repo = copy_repository(REPO, root / "repo")
    options = {"snakefile": repo / "Snakefile", "env": {"PYTHONPATH": str(repo / "src")}}
    run_snakemake(root / "work", tiny_config(methods=METHODS), **options)
    return repo, root / "work", options


def _edit_config(work: Path, change):
    path = work / "config.yaml"
    original = path.read_text()
    config = yaml.safe_load(original)
    change(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return lambda: path.write_text(original)


def _edit_file(path: Path, new_text: str):
    original, stat = path.read_text(), path.stat()

    def restore():
        path.write_text(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    path.write_text(new_text)
    return restore


def _planned_after(done, undo):
    try:
        return planned_jobs(done[1], **done[2])
    finally:
        undo()


def test_method_settings_rerun_that_method_and_its_chains(done):
    undo = _edit_config(done[1], lambda c: c.setdefault("method_settings", {}).update(ts={"grid": None}))
    assert _planned_after(done, undo) == _jobs_of("ts", "uncal+ts")


def test_method_module_edit_reruns_that_method_and_its_chains(done):
    module = done[0] / "src" / "calbench" / "methods" / "temperature.py"
    undo = _edit_file(module, module.read_text() + "\n# an edit of the implementation\n")
    assert _planned_after(done, undo) == _jobs_of("ts", "uncal+ts")
    module = done[0] / "src" / "calbench" / "methods" / "uncal.py"
    undo = _edit_file(module, module.read_text() + "\n# an edit of the implementation\n")
    assert _planned_after(done, undo) == _jobs_of("uncal", "uncal+ts")


def test_nothing_reruns_after_a_complete_run_even_with_a_touched_module(done):
    module = done[0] / "src" / "calbench" / "methods" / "temperature.py"
    stat = module.stat()
    os.utime(module)  # newer mtime, same content: the checksum of small inputs says nothing changed
    try:
        assert planned_jobs(done[1], **done[2]) == set()
    finally:
        os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_adding_a_metric_reruns_evaluation_and_aggregation_only(done):
    undo = _edit_config(done[1], lambda c: c["metrics"].append("brier"))
    assert _planned_after(done, undo) == _jobs_of(*METHODS, rules=("evaluate",))


@pytest.mark.parametrize("method", ["vs", "ms", "ms_odir", "dir", "dir_diag", "dir_l2", "dir_odir", "ts+dir_odir"])
def test_editing_the_affine_softmax_solver_reruns_the_affine_map_methods(method):
    """The solver (methods/affine_softmax.py) is two imports away from dirichlet.py/scaling.py: through the
    estimator module linear_maps.py, whose imports source_files follows."""
    from calbench.methods import source_files

    files = source_files(method)
    assert any(f.endswith("methods/affine_softmax.py") for f in files), files
    assert any(f.endswith("methods/linear_maps.py") for f in files), files
