"""Which rules an edit of each file of src/calbench reschedules in the default run, from its DAG.

``snakemake -n`` of ``config/config.yaml`` in an empty folder lists every job with its input and output files;
a job's inputs hold its code manifest, which lists the import closure of its script and method
(``calbench.imports``, ``calbench.jobs.code_inputs``). Editing a file reschedules the jobs whose manifest lists it
and every job downstream of them: :func:`rerun_table` follows the outputs. The table, files grouped by the rules
they reschedule, is the section "Which rules each file reschedules" of docs/operations.md
(``tests/workflow/test_edit_reruns.py`` checks that the two agree):

    python scripts/edit_reruns.py            # rewrite that section of docs/operations.md
    python scripts/edit_reruns.py --check    # exit 1 when it is out of date
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from calbench.jobs.code_inputs import with_code_files
from calbench.perf.docs_blocks import replace_blocks, write_or_check

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "calbench"
DOCS = REPO / "docs" / "operations.md"
BLOCK = "edit-reruns"  # the generated block of docs/operations.md (calbench.perf.docs_blocks)


def planned_jobs(config: Path = REPO / "config" / "config.yaml") -> list[dict]:
    """Every job of a dry run of ``config`` from scratch: ``{"rule", "input", "output"}`` (sets of paths as
    Snakemake prints them, and the absolute paths of the source files that the job's code manifest lists)."""
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    with tempfile.TemporaryDirectory(prefix="edit_reruns_") as work:
        shutil.copy(config, Path(work) / "config.yaml")
        result = subprocess.run([snakemake, "-s", str(REPO / "Snakefile"), "--directory", work, "--configfile",
                                 str(Path(work) / "config.yaml"), "--cores", "1", "-n"], cwd=work,
                                capture_output=True, text=True, timeout=600)
        if result.returncode:
            raise RuntimeError(f"snakemake -n failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        jobs, job = [], None
        for line in result.stdout.splitlines():
            head = re.match(r"^\s*(?:local)?rule (\w+):$", line)
            if head:
                job = {"rule": head[1], "input": set(), "output": set()}
                jobs.append(job)
            elif job is not None and re.match(r"^\s+(input|output): ", line):
                key, _, files = line.strip().partition(": ")
                job[key] = set(files.split(", "))
        for job in jobs:  # the code manifests, read before the folder goes
            job["input"] = with_code_files(job["input"], work, REPO)
    return [j for j in jobs if j["rule"] != "all"]


def rescheduled(jobs: list[dict], path: str) -> set[str]:
    """The rules of the jobs that an edit of ``path`` reschedules: those that read it, and everything after them."""
    dirty = [j for j in jobs if path in j["input"]]
    seen = {id(j) for j in dirty}
    while dirty:
        outputs = dirty.pop()["output"]
        for job in jobs:
            if id(job) not in seen and job["input"] & outputs:
                seen.add(id(job))
                dirty.append(job)
    return {j["rule"] for j in jobs if id(j) in seen}


def source_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def rerun_table(jobs: list[dict]) -> dict[str, frozenset[str]]:
    """``methods/lece.py`` → the rules its edit reschedules, for every file of src/calbench."""
    return {p.relative_to(PACKAGE).as_posix(): frozenset(rescheduled(jobs, str(p))) for p in source_files()}


def markdown(table: dict[str, frozenset[str]], jobs: list[dict]) -> str:
    """The table's rows grouped by the rules they reschedule, the rules in the DAG's order (upstream first, then by
    name: the dry run lists jobs in no fixed order)."""
    memo: dict = {}
    depth = {}
    for job in jobs:
        depth[job["rule"]] = min(depth.get(job["rule"], len(jobs)), _depth(jobs, job, memo))
    order = sorted(depth, key=lambda rule: (depth[rule], rule))
    groups: dict[frozenset, list[str]] = {}
    for path, rules in table.items():
        groups.setdefault(rules, []).append(path)
    rows = sorted(groups.items(), key=lambda item: (-len(item[0]), [order.index(r) for r in sorted(
        item[0], key=order.index)]))
    lines = ["| an edit of (src/calbench/…) | reschedules (rules of the default run) |", "|---|---|"]
    for rules, paths in rows:
        shown = ", ".join(f"`{r}`" for r in sorted(rules, key=order.index)) or "nothing"
        lines.append(f"| {', '.join(f'`{p}`' for p in sorted(paths))} | {shown} |")
    return "\n".join(lines)


def _depth(jobs: list[dict], job: dict, memo: dict | None = None) -> int:
    """The length of the longest chain of jobs that ``job`` reads the outputs of (0: reads none)."""
    memo = {} if memo is None else memo
    if id(job) not in memo:
        memo[id(job)] = 0
        memo[id(job)] = max([_depth(jobs, j, memo) + 1 for j in jobs if j["output"] & job["input"]], default=0)
    return memo[id(job)]


def updated_docs(text: str, table_md: str) -> str:
    """docs/operations.md with the generated section replaced by ``table_md``."""
    return replace_blocks(DOCS, text, {BLOCK: table_md})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/operations.md is out of date")
    args = parser.parse_args()
    jobs = planned_jobs()
    new = updated_docs(DOCS.read_text(), markdown(rerun_table(jobs), jobs))
    return write_or_check(DOCS, new, args.check, "python scripts/edit_reruns.py")


if __name__ == "__main__":
    sys.exit(main())
