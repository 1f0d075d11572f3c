"""docs/architecture.md and docs/developing.md describe the code as it is: every module, file and attribute they
name exists, and docs/architecture.md names every job module (a job module unnamed there is a stage nobody can
find from the design page)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "src" / "calbench"
PAGES = ("docs/architecture.md", "docs/developing.md")
#: ``calbench.jobs.evaluate.shifted_set``: a module, then possibly attributes.
DOTTED = re.compile(r"(?<![\w./])calbench(?:\.\w+)+")
#: ``src/calbench/jobs/shift.py``, ``jobs/shift.py``, ``workflow/rules/shift.smk``, ``tests/contract/test_layers.py``.
FILE = re.compile(r"(?<![\w./-])(?:[\w.-]+/)+[\w.-]+\.(?:py|smk|yaml|md|toml|json)(?![\w/])")
#: The roots a path of the two pages is relative to, in order: the repository, the package, docs/.
ROOTS = (REPO, PACKAGE, REPO / "docs")


def _names(page: str, pattern: re.Pattern) -> list[tuple[int, str]]:
    """``(line number, name)`` of every match of ``pattern`` in ``page`` outside example blocks (```` ``` ````),
    the output paths a run writes (``results/…``) and templates (``NAME.json``)."""
    found, fenced = [], False
    for number, line in enumerate((REPO / page).read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            found += [(number, m[0].rstrip(".")) for m in pattern.finditer(line)
                      if not m[0].startswith(("results/", "benchmarks/", "logs/")) and not _template(m[0])]
    return found


def _template(name: str) -> bool:
    """``docs/measurements/NAME.json``: a path with a placeholder part, not a file."""
    return any(part.split(".")[0].isupper() for part in name.split("/"))


@cache
def _top_level_names(module: Path) -> frozenset[str]:
    """The names ``module`` defines or imports at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def dotted_problem(name: str) -> str | None:
    """Why ``calbench.a.b.c`` names nothing (None where it does): the longest prefix that is a module or package
    of src/calbench, then each further part a name defined at the top level of that module."""
    parts = name.split(".")[1:]
    path = PACKAGE
    for i, part in enumerate(parts):
        if (path / part).is_dir():
            path = path / part
            continue
        if (path / f"{part}.py").is_file():
            path = path / f"{part}.py"
            continue
        module = path / "__init__.py" if path.is_dir() else path
        if i + 1 < len(parts) and not path.is_dir():
            return f"{module.relative_to(REPO)} has no attribute {part!r} (and attributes of attributes are unchecked)"
        if part not in _top_level_names(module):
            where = f"neither {(path / part).relative_to(REPO)}.py nor a" if path.is_dir() else "no"
            return f"{where} name {part!r} in {module.relative_to(REPO)}"
        return None
    return None


def file_exists(name: str) -> bool:
    """Whether the path ``name`` exists relative to the repository, src/calbench or docs/."""
    return any((root / name).exists() for root in ROOTS)


@pytest.mark.parametrize("page", PAGES)
def test_every_dotted_name_exists(page):
    missing = [f"{page}:{line}: `{name}`: {why}" for line, name in _names(page, DOTTED)
               if (why := dotted_problem(name))]
    assert not missing, "names of the code that do not exist (fix the page or the code):\n" + "\n".join(missing)


@pytest.mark.parametrize("page", PAGES)
def test_every_file_named_exists(page):
    missing = [f"{page}:{line}: `{name}` is not a file of the repository, of src/calbench or of docs/"
               for line, name in _names(page, FILE) if not file_exists(name)]
    assert not missing, "files named that do not exist (fix the page or the code):\n" + "\n".join(missing)


def _package_map() -> list[tuple[int, str, list[str]]]:
    """docs/developing.md's package map: ``(line, package or modules column, names of its "holds" column)``."""
    rows = []
    for number, line in enumerate((REPO / "docs" / "developing.md").read_text().splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            rows.append((number, cells[1], re.findall(r"`([a-z_][a-z0-9_]*)`", cells[2])))
    return rows


def test_package_map_names_existing_modules():
    """The map's second column names modules or packages of src/calbench (`atomic`, `kernels/`); where it names one
    package, the bare names of its third column are that package's modules (`solvers/` → `affine_penalty`)."""
    rows = _package_map()
    assert len(rows) >= 10, "docs/developing.md: the package map (| layer | package or module | holds |) not found"
    missing = []
    for line, column, held in rows:
        named = re.findall(r"`([\w/]+)`", column)
        for name in named:
            stem = name.rstrip("/")
            if not ((PACKAGE / stem).is_dir() or (PACKAGE / f"{stem}.py").is_file()):
                missing.append(f"docs/developing.md:{line}: `{name}` is not a module or package of src/calbench")
        if len(named) == 1 and named[0].endswith("/"):
            package = PACKAGE / named[0].rstrip("/")
            missing += [f"docs/developing.md:{line}: `{name}` is not a module of {package.relative_to(REPO)}/"
                        for name in held if not ((package / f"{name}.py").is_file() or (package / name).is_dir())]
    assert not missing, "\n".join(missing)


def test_architecture_names_every_job_module():
    """Each module of src/calbench/jobs/ appears in docs/architecture.md as `calbench.jobs.NAME` or `jobs/NAME.py`."""
    text = (REPO / "docs" / "architecture.md").read_text()
    named = {m[1] for m in re.finditer(r"calbench\.jobs\.(\w+)", text)} | \
            {m[1] for m in re.finditer(r"(?<![\w.])jobs/(\w+)\.py", text)}
    modules = {p.stem for p in (PACKAGE / "jobs").glob("*.py") if p.stem != "__init__"} | \
              {p.name for p in (PACKAGE / "jobs").iterdir() if (p / "__init__.py").is_file()}
    unnamed = sorted(modules - named)
    assert not unnamed, ("docs/architecture.md does not name these job modules (say, in section 6 where the job "
                         "modules are listed, what each does, as `jobs/NAME.py`): "
                         + ", ".join(f"src/calbench/jobs/{m}.py" for m in unnamed))
