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
# projection with it); the registered calibration methods; saving and torch export of calibrators; the statistics
# of the tables (resampling, paired tests, ranks); config and report; the workflow's jobs; the performance
# studies (which time jobs too); the command line.
LAYERS = [
    {"mnist_c"},
    {"atomic", "scores", "version", "folds", "parallel", "convergence", "imports", "corruptions", "fitted_state",
     "caught"},
    {"kernels"},
    {"solvers"},
    {"maps1d"},
    {"metrics"},
    {"data"},
    {"models"},
    {"methods"},
    {"persist", "torch"},
    {"stats"},
    {"config", "report"},
    {"jobs"},
    {"perf"},
    {"cli"},
    {"__main__"},
]
LAYER = {name: depth for depth, names in enumerate(LAYERS) for name in names}
ROOT = "calbench"


def _component(path: Path) -> str:
    """``methods/lece.py`` → ``methods``; ``scores.py`` → ``scores``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def imported_modules(path: Path) -> list[str]:
    """The calbench modules that the file at ``path`` imports, anywhere in it: ``calbench`` itself for the root
    (``import calbench``, ``from calbench import save``); ``from calbench import kernels`` names the part."""
    modules = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == ROOT:
            modules += [f"{ROOT}.{alias.name}" if alias.name in LAYER else ROOT for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.append(node.module)
    return [module for module in modules if module.split(".")[0] == ROOT]


def root_layer() -> int:
    """The layer of the package root: the highest layer its ``__init__.py`` imports from."""
    parts = {module.split(".")[1] for module in imported_modules(PACKAGE / "__init__.py") if module != ROOT}
    return max(LAYER[part] for part in parts)


def import_edges() -> set[tuple[str, str, str]]:
    """(importing component, imported component or ``calbench`` for the root, importing file) for every calbench
    import outside the root's ``__init__.py``."""
    edges = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "__init__.py":
            continue
        source = _component(path)
        for module in imported_modules(path):
            target = module.split(".")[1] if module != ROOT else ROOT
            assert target in LAYER or target == ROOT, \
                f"{path}: imports {module}, a part of calbench missing from LAYERS"
            if target != source:
                edges.add((source, target, str(path.relative_to(REPO))))
    return edges


def private_imports() -> set[tuple[str, str]]:
    """(importing file, ``module.name``) for every name starting with ``_`` (dunders aside) that a calbench module
    imports from another calbench module: ``from calbench.x import _name`` or ``import calbench._x``."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and (node.level or node.module.split(".")[0] == ROOT):
                names = [f"{'.' * node.level}{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names if alias.name.split(".")[0] == ROOT]
            else:
                continue
            found |= {(str(path.relative_to(REPO)), name) for name in names
                      if any(part.startswith("_") and not part.startswith("__") for part in name.split(".")[1:])}
    return found


def test_every_part_of_the_package_has_a_layer():
    parts = {_component(p) for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py"}
    assert parts - set(LAYER) == set(), "add the new subpackage or module to LAYERS in tests/contract/test_layers.py"


def test_no_module_imports_a_higher_layer():
    edges = import_edges()
    assert ("jobs", "methods", "src/calbench/jobs/calibrate.py") in edges  # the parser sees imports
    layer = {**LAYER, ROOT: root_layer()}
    assert layer[ROOT] == LAYER["persist"]  # the facade's save/load import persist
    upward = sorted(f"{file}: {source} imports {target}" for source, target, file in edges
                    if layer[target] >= layer[source])
    assert upward == [], "upward imports (layers in tests/contract/test_layers.py):\n" + "\n".join(upward)


def test_imports_of_the_root_are_seen():
    """The parser sees the root imported (the jobs record its ``__version__``), so the test above can fail."""
    assert any(target == ROOT for _, target, _ in import_edges())


def test_the_package_saves_and_loads_calibrators_through_persist():
    """The root's ``save``/``load`` are the library user's door: the jobs and the command line write and read
    calibrator files through :mod:`calbench.persist`, the layer that owns the format (``calbench.save`` or
    ``from calbench import save`` would route a job through the package root, four layers up)."""
    facade = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and node.attr in ("save", "load") and isinstance(node.value, ast.Name)
                    and node.value.id == ROOT) or (isinstance(node, ast.ImportFrom) and node.module == ROOT
                                                   and {a.name for a in node.names} & {"save", "load"}):
                facade.add(f"{path.relative_to(REPO)}:{node.lineno}")
    assert facade == set(), f"use calbench.persist.save/load: {sorted(facade)}"


def test_no_module_imports_a_private_name_of_another():
    private = sorted(f"{file}: imports {name}" for file, name in private_imports())
    assert private == [], ("private names imported from another module; give them a public name (and a "
                           "docstring):\n" + "\n".join(private))
