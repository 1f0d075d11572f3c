"""The import graph of src/calbench has no upward arrow: a module imports only from its own subpackage or
from a lower layer, so that each layer can be read, tested and changed without the ones above it. Imports
inside functions count too; the package root ``calbench``
(``__version__`` and the public facade, whose functions import lazily) is not a layer."""

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "src" / "calbench"

# Lowest first. Generic helpers; the compiled (numba) kernels; the numerical solvers that call them; the 1-D maps
# and metrics; data and models (torch classifiers, the KCal projection, below methods because kcal trains its
# projection with it); the registered calibration methods; saving and torch export of calibrators; config and
# report; the workflow's jobs and the performance studies; the command line.
LAYERS = [
    {"atomic", "scores", "folds", "parallel", "convergence", "imports", "corruptions", "fitted_state"},
    {"kernels"},
    {"solvers"},
    {"maps1d"},
    {"metrics"},
    {"data"},
    {"models"},
    {"methods"},
    {"persist", "torch"},
    {"config", "report"},
    {"jobs", "perf"},
    {"cli"},
    {"__main__"},
]
LAYER = {name: depth for depth, names in enumerate(LAYERS) for name in names}


def _component(path: Path) -> str:
    """``methods/lece.py`` → ``methods``; ``scores.py`` → ``scores``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def import_edges() -> set[tuple[str, str, str]]:
    """(importing component, imported component, importing file) for every calbench import."""
    edges = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "__init__.py":
            continue
        source = _component(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # ``from calbench import kernels`` names a part; ``from calbench import save`` the root facade
                modules = ([f"calbench.{alias.name}" for alias in node.names if alias.name in LAYER]
                           if node.module == "calbench" else [node.module])
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] != "calbench" or len(parts) == 1:
                    continue
                assert parts[1] in LAYER, f"{path}: imports {module}, a part of calbench missing from LAYERS"
                if parts[1] != source:
                    edges.add((source, parts[1], str(path.relative_to(REPO))))
    return edges


def test_every_part_of_the_package_has_a_layer():
    parts = {_component(p) for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py"}
    assert parts - set(LAYER) == set(), "add the new subpackage or module to LAYERS in tests/test_layers.py"


def test_no_module_imports_a_higher_layer():
    edges = import_edges()
    assert ("jobs", "methods", "src/calbench/jobs/calibrate.py") in edges  # the parser sees imports
    upward = sorted(f"{file}: {source} imports {target}" for source, target, file in edges
                    if LAYER[target] >= LAYER[source])
    assert upward == [], "upward imports (layers in tests/test_layers.py):\n" + "\n".join(upward)
