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
from workflow_helpers import copy_repository, job_files, planned_jobs, rerun_by_inputs, tiny_config

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("reruns")]

METHODS = ("uncal", "ts", "ts+ets")  # a chain: validate refuses chains that are one calibrator (uncal+ts)


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
    assert _planned_after(done, undo) == _jobs_of("ts", "ts+ets")


def test_method_module_edit_reruns_that_method_and_its_chains(done):
    module = done[0] / "src" / "calbench" / "methods" / "temperature.py"
    undo = _edit_file(module, module.read_text() + "\n# an edit of the implementation\n")
    assert _planned_after(done, undo) == _jobs_of("ts", "ts+ets")
    module = done[0] / "src" / "calbench" / "methods" / "ets.py"
    undo = _edit_file(module, module.read_text() + "\n# an edit of the implementation\n")
    assert _planned_after(done, undo) == _jobs_of("ts+ets")


def test_nothing_reruns_after_a_complete_run_even_with_a_touched_module(done):
    module = done[0] / "src" / "calbench" / "methods" / "temperature.py"
    stat = module.stat()
    os.utime(module)  # newer mtime, same content: the checksum of small inputs says nothing changed
    try:
        assert planned_jobs(done[1], **done[2]) == set()
    finally:
        os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_an_edit_that_keeps_the_files_old_modification_time_reruns_its_jobs(done):
    """``cp -p`` or ``rsync -a`` of an edited module: the code manifest (calbench.jobs.code_inputs) records content,
    so the jobs rerun although the file is no newer than their outputs."""
    module = done[0] / "src" / "calbench" / "methods" / "temperature.py"
    stat = module.stat()
    undo = _edit_file(module, module.read_text() + "\n# an edit copied with its old time\n")
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _planned_after(done, undo) == _jobs_of("ts", "ts+ets")


def test_adding_a_metric_reruns_evaluation_and_aggregation_only(done):
    undo = _edit_config(done[1], lambda c: c["metrics"].append("brier"))
    assert _planned_after(done, undo) == _jobs_of(*METHODS, rules=("evaluate",))


@pytest.mark.parametrize("method", ["vs", "ms", "ms_odir", "dir", "dir_diag", "dir_l2", "dir_odir", "ts+dir_odir"])
def test_editing_the_affine_softmax_solver_reruns_the_affine_map_methods(method):
    """The solver (solvers/affine_softmax_fit.py and its parts, solvers/affine_*.py) is two or more imports away
    from dirichlet.py/scaling.py, its compiled passes (kernels/softmax_residual.py) further: the import closure
    follows them."""
    from calbench.methods import code_files

    files = code_files(method)
    solver = sorted(p.relative_to(REPO / "src" / "calbench").as_posix()
                    for p in (REPO / "src" / "calbench" / "solvers").glob("affine_*.py"))
    assert "solvers/affine_softmax_fit.py" in solver and len(solver) > 1
    for module in (*solver, "methods/linear_maps.py", "kernels/softmax_residual.py"):
        assert any(f.endswith(module) for f in files), (module, files)


def _expected_after_editing(relative: str) -> set[tuple[str, str]]:
    """The jobs of the tiny run that an edit of src/calbench/``relative`` must schedule, from the code inputs
    (each rule's script closure, and each method's) and the dependencies between the rules."""
    from calbench.imports import code_files
    from calbench.methods import code_files as method_files

    def touches(files):
        return any(Path(f).relative_to(REPO / "src" / "calbench").as_posix() == relative for f in files)

    def script(name):
        return code_files(scripts=[REPO / "workflow" / "scripts" / f"{name}.py"])

    if touches(script("dump_source")):
        return _jobs_of(*METHODS) | {("dump_source", "tiny")}
    calibrated = [m for m in METHODS if touches(script("calibrate")) or touches(method_files(m))]
    jobs = _jobs_of(*calibrated) if calibrated else set()
    if touches(script("evaluate")):
        jobs |= _jobs_of(*METHODS, rules=("evaluate",))
    jobs |= {(rule, "") for rule in ("aggregate", "runtime_table") if touches(script(rule.replace("_table", "")))}
    return jobs


def test_an_edit_reruns_exactly_the_jobs_whose_code_imports_the_file(done):
    """Each file in the closure of the methods' code (their class modules' imports, lazy ones too, e.g. the
    compiled passes of ts) and a few outside it: an edit schedules exactly the jobs whose rule's code input (the
    closure of its script's and method's calbench imports) holds the file, and their downstream; a file outside
    every closure schedules nothing. Every file is checked against the inputs each job declares (one forced dry
    run lists them); an appended comment, with a dry run after it, checks one file of each distinct set of jobs
    (Snakemake reruns a job whose input's content changed: one edit per set shows that it does for these inputs)."""
    from calbench.methods import code_files as method_files

    package = done[0] / "src" / "calbench"
    root = REPO / "src" / "calbench"
    inside = sorted({Path(f).relative_to(root).as_posix() for m in METHODS for f in method_files(m)})
    outside = ["methods/lece.py", "solvers/affine_softmax_fit.py", "report/simplex.py", "metrics/kcal.py"]
    assert "kernels/vector_exp.py" in inside and not set(outside) & set(inside)
    jobs = job_files(done[1], **done[2])
    one_per_plan = {}
    for relative in inside + outside:
        expected = _expected_after_editing(relative)
        assert rerun_by_inputs(jobs, str(package / relative)) == expected, relative
        one_per_plan.setdefault(frozenset(expected), relative)
    assert one_per_plan[frozenset()] == "methods/lece.py" and len(one_per_plan) >= 4, one_per_plan
    for expected, relative in one_per_plan.items():
        module = package / relative
        undo = _edit_file(module, module.read_text() + "\n# an edit\n")
        assert _planned_after(done, undo) == expected, relative


def test_every_rule_that_runs_a_script_declares_that_scripts_import_closure():
    """No rule runs calbench code without a code input derived from it: each rule that runs a script (``script:``,
    or a shell command ``job_command("<script>", ...)``) has ``script_code("<its script>")`` in its ``input`` (or
    ``method_code``, which adds the method's closure to it)."""
    import re

    rules = {}
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        for block in re.split(r"\n\s*rule ", path.read_text())[1:]:
            script = re.search(r'script:\s*"\.\./scripts/(\w+)\.py"|shell:\s*job_command\("(\w+)"', block)
            if script:
                rules[block.split(":")[0]] = (script[1] or script[2],
                                              re.search(r'code=(?:script|method)_code\("(\w+)"\)', block))
    assert {script for script, _ in rules.values()} == {p.stem for p in (REPO / "workflow" / "scripts").glob("*.py")}
    assert {rule: code and code[1] for rule, (script, code) in rules.items()} == {
        rule: script for rule, (script, _) in rules.items()}
