"""``calbench report``: the HTML report of a finished run, from the run's own folder (Snakemake's ``--report`` with
calbench's Snakefile and the run's config; docs/figures_and_studies.md).

Its first page (:func:`front_page_rst`, written before Snakemake runs and named to the Snakefile in the environment
variable ``CALBENCH_FRONT_PAGE``) shows the answer
before anything else: the recommended method per source with its interval (what ``calbench recommend`` prints), the
summary table and the key figures (the sources' confidence reliability diagrams, then the shift figures, inline),
then the workflow's own description. It is reStructuredText, which Snakemake renders."""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import calbench
from calbench.jobs import paths

#: Key figures inlined on the first page at the most (each is also in the report's own sections).
KEY_FIGURES = 3


def _literal(text: str) -> str:
    """``text`` as a reStructuredText literal block (monospace, as printed)."""
    return "::\n\n" + textwrap.indent(text.rstrip() or "(empty)", "    ", lambda line: True) + "\n"


def recommendation_text(results: Path, metric: str = "nll") -> str:
    """What ``calbench recommend RESULTS --metric METRIC`` prints, or why there is nothing to recommend."""
    from calbench.cli import recommend

    parser = argparse.ArgumentParser(prog="calbench")
    recommend.add_parser(parser.add_subparsers())
    args = parser.parse_args(["recommend", str(results), "--metric", metric])  # its own defaults
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            recommend.run(args)
    except (ValueError, FileNotFoundError) as err:
        return f"no recommendation: {err}"
    return out.getvalue()


def markdown_tables_rst(text: str) -> str:
    """The tables' Markdown (headings, pipe tables, paragraphs) as reStructuredText: headings become bold lines,
    pipe tables ``list-table`` directives (rendered as HTML tables), other lines stay as they are."""
    out, table = [], []

    def flush():
        rows = [[cell.strip() or "–" for cell in row.strip().strip("|").split("|")] for row in table
                if not set(row) <= set("|-: ")]
        if rows:
            out.extend([".. list-table::", "   :header-rows: 1", ""])
            out.extend(f"   {'*' if j == 0 else ' '} - {cell}" for row in rows for j, cell in enumerate(row))
            out.append("")
        table.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        heading = line.lstrip("#").strip()
        out.append(f"**{heading}**" if line.startswith("#") and heading else line)
    flush()
    return "\n".join(out) + "\n"


def _image(path: Path, alt: str) -> str:
    """A PNG inline as raw HTML, its base64 data in lines of 76 characters (docutils refuses longer lines; browsers
    drop the line breaks of a URL)."""
    data = textwrap.indent(base64.encodebytes(path.read_bytes()).decode("ascii"), "    ")
    return (f'.. raw:: html\n\n    <figure><img alt="{alt}" style="max-width:100%" src="data:image/png;base64,\n'
            f'{data}    "><figcaption>{alt}</figcaption></figure>\n')


def front_page_rst(workdir: Path, description: str, metric: str = "nll") -> str:
    """The first page of the report of the run in ``workdir``: the answer, the summary table, the key figures, then
    ``description`` (the workflow's own text)."""
    results = Path(workdir) / "results"
    parts = ["The answer", "==========", "",
             f"Recommended calibration method per source, by {metric} (``calbench recommend results/ --metric "
             f"{metric}``; ``--all-metrics`` ranks by every metric):", "",
             _literal(recommendation_text(results, metric))]
    summary = Path(workdir) / paths.SUMMARY
    if summary.is_file():
        parts += ["Summary table", "-------------", "", f"``{paths.SUMMARY}``:", "",
                  markdown_tables_rst(summary.read_text())]
    figures = Path(workdir) / "results" / "figures"
    key = [(path, f"{path.parent.name}: confidence reliability diagrams")
           for path in sorted((figures / "reliability").glob("*/conf.png"))]
    key += [(path, f"{path.stem}: calibration under shift") for path in sorted((figures / "shift").glob("*.png"))]
    if key:
        parts += ["Key figures", "-----------", ""]
        parts += [_image(path, alt) for path, alt in key[:KEY_FIGURES]]
    # the run's own text stays out of Jinja (Snakemake renders the page as a template); the description is one
    return "{% raw %}\n" + "\n".join(parts) + "\n{% endraw %}\nThe run\n-------\n\n" + description + "\n"


def add_parser(sub) -> None:
    rep = sub.add_parser("report", help="the HTML report of a finished run, from its folder")
    rep.add_argument("config", nargs="?", default="config/config.yaml",
                     help="the run's config file (default config/config.yaml)")
    rep.add_argument("-o", "--output", default="results/report.html", help="where to write it (.html or .zip)")
    rep.add_argument("--snakefile", help="calbench's Snakefile (default: the one beside the installed package)")
    rep.set_defaults(handler=run)


def snakefile(given: str | None) -> Path:
    """calbench's Snakefile: ``given`` (``--snakefile``), else that of the source tree the package was imported from
    (a checkout: ``src/calbench`` beside the Snakefile, installed editable or on ``PYTHONPATH``), else the workflow
    installed with the package (pyproject.toml's data-files: ``share/calbench/`` of the environment)."""
    if given:
        candidates = [Path(given)]
    else:
        candidates = [Path(calbench.__file__).resolve().parents[1].parent / "Snakefile", *installed_snakefiles()]
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"{candidates[0]}: calbench's Snakefile is not there; pass --snakefile "
                            "PATH/TO/calbench/Snakefile")


def installed_snakefiles() -> list[Path]:
    """The Snakefile the installed distribution ``calbench`` holds among its files (none for a checkout)."""
    from importlib import metadata

    try:
        files = metadata.distribution("calbench").files or []
    except metadata.PackageNotFoundError:
        return []
    return [Path(f.locate()).resolve() for f in files if f.as_posix().endswith("share/calbench/Snakefile")]


def run(args) -> int:
    config = Path(args.config)
    if not config.is_file():
        raise FileNotFoundError(f"{config}: no such config; pass the config file the run used, e.g. "
                                "calbench report my.yaml")
    executable = Path(sys.executable).with_name("snakemake")
    workflow = snakefile(args.snakefile)
    command = [str(executable) if executable.is_file() else shutil.which("snakemake") or "snakemake",
               "-s", str(workflow), "--configfile", str(config), "--cores", "1", "--report", args.output]
    front_page = Path(".snakemake") / "calbench_front_page.rst"  # read by workflow/rules/report.smk
    front_page.parent.mkdir(exist_ok=True)
    description = (workflow.parent / "workflow" / "report" / "workflow.rst").read_text()
    front_page.write_text(front_page_rst(Path.cwd(), description))
    status = subprocess.run(command, env={**os.environ, "CALBENCH_FRONT_PAGE": str(front_page.resolve())}).returncode
    if status == 0:
        print(f"report: {args.output}")
    return status
