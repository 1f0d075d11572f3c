"""Every job a workflow script runs takes its spec keyword-only and little else (calbench.jobs.spec): at most four
parameters, all keyword-only, the first ``spec``; the script passes the spec its rule declares."""

from __future__ import annotations

import ast
import importlib
import inspect

from conftest import REPO

SCRIPTS = sorted((REPO / "workflow" / "scripts").glob("*.py"))


def _jobs_called(path) -> list[tuple[str, str]]:
    """``(module, function)`` of each job the script imports and calls with ``spec=``."""
    tree = ast.parse(path.read_text())
    imported = {alias.asname or alias.name: node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}
    return [(imported[node.func.id], node.func.id) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and any(k.arg == "spec" for k in node.keywords)]


def test_every_script_runs_a_job_with_its_spec():
    lacking = [path.name for path in SCRIPTS if not _jobs_called(path)]
    assert not lacking, f"scripts that call no job with spec=: {lacking}"


def test_every_job_takes_its_spec_keyword_only_and_at_most_four_parameters():
    problems = []
    for path in SCRIPTS:
        for module, name in _jobs_called(path):
            try:
                job = getattr(importlib.import_module(module), name)
            except ImportError:  # a model job without the `models` extra: read its signature from the source
                source = (REPO / "src" / (module.replace(".", "/") + ".py")).read_text()
                node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
                params = [(a.arg, "KEYWORD_ONLY") for a in node.args.kwonlyargs] + \
                         [(a.arg, "POSITIONAL_OR_KEYWORD") for a in node.args.posonlyargs + node.args.args]
            else:
                params = [(p.name, p.kind.name) for p in inspect.signature(job).parameters.values()]
            if (len(params) > 4 or params[0][0] != "spec" or any(kind != "KEYWORD_ONLY" for _, kind in params)):
                problems.append(f"{module}.{name}{params}")
    assert not problems, problems
