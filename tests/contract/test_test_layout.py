"""The test suite's layout (docs/developing.md, "Tests"): every test file lives in the folder of what it protects, no
two share a name, and every test that starts a process (snakemake, the command line, a pip install) carries the
``workflow`` marker, so that ``pytest -m "not workflow"`` runs in process only."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

TESTS = REPO / "tests"
FOLDERS = ("unit", "contract", "workflow", "docs")
#: Calls that start a process themselves.
STARTERS = {"Popen", "check_output", "check_call", "call"}


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """Top-level functions and methods of top-level classes, by name (a class's marks given to its methods)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for method in node.body:
                if isinstance(method, ast.FunctionDef):
                    method.decorator_list = [*method.decorator_list, *node.decorator_list]
                    found[method.name] = method
    return found


def _called(function: ast.FunctionDef) -> set[str]:
    """Names ``function`` calls (``f(...)``, ``x.f(...)``), ``subprocess.run`` as ``subprocess.run``."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                names.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                names.add(node.func.attr)
                if isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess":
                    names.add(f"subprocess.{node.func.attr}")
    return names


def _starting(functions: dict[str, ast.FunctionDef], known: set[str]) -> set[str]:
    """Names of ``functions`` that start a process: directly, through ``known`` starters, or through another of
    ``functions`` they call or take as a fixture (an argument named as a fixture of the module)."""
    calls = {name: _called(f) for name, f in functions.items()}
    starting = {name for name, c in calls.items()
                if c & (STARTERS | known) or any(n.startswith("subprocess.") for n in c)}
    grown = True
    while grown:
        grown = False
        for name, function in functions.items():
            uses = calls[name] | {a.arg for a in function.args.args}
            if name not in starting and uses & starting:
                starting.add(name)
                grown = True
    return starting


def _helpers() -> set[str]:
    """The helpers of tests/conftest.py and tests/workflow_helpers.py that start a process (``run_snakemake``, …)."""
    functions = {}
    for name in ("conftest.py", "workflow_helpers.py"):
        functions |= _functions(ast.parse((TESTS / name).read_text()))
    return _starting(functions, set())


def _marked(decorators: list[ast.expr]) -> bool:
    return any("mark.workflow" in ast.unparse(d) for d in decorators)


def test_every_test_file_lives_in_a_folder_of_what_it_protects():
    misplaced = [str(p.relative_to(REPO)) for p in _test_files() if p.parent.parent != TESTS
                 or p.parent.name not in FOLDERS]
    assert not misplaced, (f"test files outside tests/{{{','.join(FOLDERS)}}}/ (docs/developing.md, \"Tests\", says "
                           "which folder a test goes in): " + ", ".join(misplaced))


def test_no_two_test_files_share_a_name():
    """pytest imports test files by their name (the folders have no ``__init__.py``): a second file of the same
    name in another folder fails the collection."""
    names = [p.name for p in _test_files()]
    assert sorted(names) == sorted(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_every_test_that_starts_a_process_carries_the_workflow_marker():
    """tests/workflow/ is marked by its folder (tests/conftest.py); elsewhere the test, its class or its module."""
    helpers = _helpers()
    assert {"run_snakemake", "dry_run_jobs", "planned_jobs"} <= helpers, helpers
    unmarked = []
    for path in _test_files():
        if path.parent.name == "workflow":
            continue
        tree = ast.parse(path.read_text())
        module_marked = any(isinstance(node, ast.Assign) and "pytestmark" in ast.unparse(node.targets[0])
                            and "mark.workflow" in ast.unparse(node.value) for node in tree.body)
        functions = _functions(tree)
        for name in sorted(_starting(functions, helpers)):
            if name.startswith("test") and not (module_marked or _marked(functions[name].decorator_list)):
                unmarked.append(f"{path.relative_to(REPO)}::{name}")
    assert not unmarked, "tests that start a process without @pytest.mark.workflow:\n" + "\n".join(unmarked)


def test_the_process_check_sees_a_process():
    """The check above finds a subprocess call, one through a module helper and one through a fixture."""
    tree = ast.parse(
        "import subprocess\n"
        "def helper():\n    subprocess.run(['true'])\n"
        "def fixture_run():\n    return helper()\n"
        "def test_direct():\n    subprocess.check_output(['true'])\n"
        "def test_helper():\n    helper()\n"
        "def test_fixture(fixture_run):\n    pass\n"
        "def test_none():\n    pass\n")
    assert _starting(_functions(tree), set()) == {"helper", "fixture_run", "test_direct", "test_helper",
                                                  "test_fixture"}
