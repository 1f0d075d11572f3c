"""The calbench files a job can execute, derived from the source: the workflow's code inputs.

:func:`code_files` follows calbench imports from the given modules to their transitive closure, read from
the syntax tree (nothing is imported): ``import calbench.a.b`` and ``from calbench.a import b`` anywhere in a
module, lazy imports inside functions included. Importing ``calbench.a.b`` also runs the ``__init__`` of
``calbench`` and ``calbench.a``: their module-level imports count, and their functions' lazy imports only
for the names taken from the package (``from calbench import save`` runs ``calbench.save``, ``import
calbench.scores`` does not; ``import calbench`` runs the names the module reads as ``calbench.<name>``, so
that reading ``calbench.__version__`` runs no calibrator loading). Imports by name at run time
(``importlib.import_module``, the method registry's discovery) are not followed: the rules add each method's own
class module (``methods.code_files``).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = "calbench"
ROOT = Path(__file__).resolve().parent


def module_file(name: str) -> Path | None:
    """The source file of calbench module ``name`` (``calbench.a.b`` → ``a/b.py`` or ``a/b/__init__.py``)."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = ROOT.joinpath(*parts[1:])
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join((PACKAGE, *(parts[:-1] if parts[-1] == "__init__" else parts)))


#: An import: the module, and the names taken from it (None: the module itself, e.g. ``import calbench.a``).
Imported = tuple[str, frozenset | None]


def _imports_in(nodes, package: str, attributes: frozenset = frozenset()) -> list[Imported]:
    """The calbench imports among ``nodes`` (``from m import x``: module ``m.x`` where that is a module, else
    name ``x`` of ``m``; ``import calbench``: the names ``attributes`` that the module reads as ``calbench.x``)."""
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.partition(".")[0] == PACKAGE and alias.asname is None:  # binds the name `calbench`
                    found.append((PACKAGE, attributes))
                    if alias.name != PACKAGE:
                        found.append((alias.name, None))
                else:
                    found.append((alias.name, None))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from the importing module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(anchor + ([module] if module else []))
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.append((sub, None) if module_file(sub) else (module, frozenset({alias.name})))
    return [(m, names) for m, names in found if m == PACKAGE or m.startswith(PACKAGE + ".")]


#: Named function definitions, and every node whose body runs only when called.
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
FUNCTIONS = (*DEFINITIONS, ast.Lambda)


def _scan(tree):
    """One pass over a module's tree: (every import node, those outside any function (class bodies run at import),
    each top-level function's import nodes, the names each top-level function calls, the attributes read as
    ``calbench.<name>``)."""
    everything, at_import, lazy, calls, attributes = [], [], {}, {}, set()
    stack = [(node, node.name if isinstance(node, DEFINITIONS) else None, isinstance(node, FUNCTIONS))
             for node in reversed(tree.body)]
    while stack:
        node, function, inside = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            everything.append(node)
            (lazy.setdefault(function, []) if inside else at_import).append(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and function is not None:
            calls.setdefault(function, set()).add(node.func.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == PACKAGE:
            attributes.add(node.attr)
        stack += [(child, function, inside or isinstance(child, FUNCTIONS)) for child in ast.iter_child_nodes(node)]
    return everything, at_import, lazy, calls, frozenset(attributes)


@cache
def _module_imports(path: Path):
    """(every import of the module, those that run at import time, each top-level function's own imports, the
    module's functions that each top-level function calls by name)."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module_name(path) if path.is_relative_to(ROOT) else ""
    if package and path.name != "__init__.py":
        package = package.rpartition(".")[0]
    functions = {node.name for node in tree.body if isinstance(node, DEFINITIONS)}
    everything, at_import, lazy, calls, attributes = _scan(tree)
    return (_imports_in(everything, package, attributes), _imports_in(at_import, package, attributes),
            {name: _imports_in(lazy.get(name, []), package, attributes) for name in functions},
            {name: calls.get(name, set()) & functions for name in functions})


def imported_modules(path: Path, names: frozenset | None = None) -> list[Imported]:
    """The calbench imports that importing the file at ``path`` can run: every one (``names`` None), or those
    at import time plus those of the top-level functions ``names`` (a name it does not define: its module
    ``__getattr__``) and of the module's functions they call."""
    everything, at_import, lazy, calls = _module_imports(path)
    if names is None:
        return everything
    reached, todo = set(), [n if n in lazy else "__getattr__" for n in names]
    while todo:
        name = todo.pop()
        if name in lazy and name not in reached:
            reached.add(name)
            todo += calls[name]
    return at_import + [imp for name in sorted(reached) for imp in lazy[name]]


def code_files(*modules: str, scripts=()) -> list[str]:
    """The sorted paths of the calbench files that importing ``modules`` (and running ``scripts``, files outside
    the package such as the workflow's scripts) can execute. A package's ``__init__`` counts its functions'
    imports only for the names taken from it (all of them where the package itself is imported)."""
    todo: list[Imported] = [(m, None) for m in modules]
    for script in scripts:
        todo += imported_modules(Path(script).resolve())
    covered: dict[str, frozenset | None] = {}
    while todo:
        name, names = todo.pop()
        path = module_file(name)
        if path is None:
            raise ValueError(f"{name}: no such calbench module (imported, so its file is a code input)")
        if path.name != "__init__.py":
            names = None  # a module's functions call each other and its classes' methods: all of its imports
        if name in covered:
            before = covered[name]
            if before is None or (names is not None and names <= before):
                continue
            names = None if names is None else names | before
        covered[name] = names
        parts = name.split(".")
        todo += [(".".join(parts[:i]), frozenset()) for i in range(1, len(parts))]  # the packages' __init__ run first
        todo += imported_modules(path, names)
    return sorted(str(module_file(name)) for name in covered)
