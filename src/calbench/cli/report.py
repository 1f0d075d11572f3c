"""``calbench report``: the HTML report of a finished run, from the run's own folder (docs/figures_and_studies.md).

It asks Snakemake, with calbench's Snakefile and the run's config, for the config's own output files and whether
they are up to date (``snakemake --summary``), so that the page holds nothing from earlier runs of other configs
and says, in a red box on its first screen, how many jobs a rerun would run where the results are out of date.
The page itself is :mod:`calbench.report.page`: the recommendation per source first (the records of ``calbench
recommend``), the reliability of each recommendation (drawn here from the calibrated test outputs as one wide row of
panels, embedded; one source's at a time on the first screen), the run's warnings, then every table and figure of
the config (figures linked beside the page, so that it stays a few hundred kB)."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import calbench
from calbench.jobs import paths


def add_parser(sub) -> None:
    rep = sub.add_parser("report", help="the HTML report of a finished run, from its folder")
    rep.add_argument("config", nargs="?", default="config/config.yaml",
                     help="the run's config file (default config/config.yaml)")
    rep.add_argument("-o", "--output", default="results/report.html", help="where to write it (.html)")
    rep.add_argument("--metric", default="nll", help="metric id the recommendation ranks by (default nll)")
    rep.add_argument("--snakefile",
                     help="calbench's Snakefile (default: the checkout's, else the one installed with the package)")
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


def snakemake_command(config: Path, given_snakefile: str | None) -> list[str]:
    executable = Path(sys.executable).with_name("snakemake")
    return [str(executable) if executable.is_file() else shutil.which("snakemake") or "snakemake",
            "-s", str(snakefile(given_snakefile)), "--configfile", str(config), "--cores", "1"]


class OutputStatus:
    """Every output file of the config's run (``snakemake --summary``) → (its job: the rule and its log file, or the
    file where the rule keeps no log; its plan: ``no update`` where it is up to date, else ``update pending`` or
    ``missing``). Snakemake starts at once and is read when the status is first asked for (calling the object), so
    that the report computes its recommendation and figures while Snakemake reads the plan (about 10 s of the
    default run's report); leaving a ``with`` block stops a Snakemake that nothing asked for."""

    def __init__(self, config: Path, given_snakefile: str | None = None):
        self.config = config
        self._process = subprocess.Popen([*snakemake_command(config, given_snakefile), "--summary"],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._status: dict[str, tuple[str, str]] | None = None

    def __enter__(self) -> OutputStatus:
        return self

    def __exit__(self, *exc) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.communicate()

    def __call__(self) -> dict[str, tuple[str, str]]:
        if self._status is None:
            stdout, stderr = self._process.communicate()
            if self._process.returncode != 0:
                tail = (stderr.strip().splitlines() or ["(no message)"])[-1]
                raise ValueError(f"{self.config}: Snakemake could not read the run's plan: {tail}")
            self._status = {}
            for line in stdout.splitlines():
                fields = line.split("\t")
                if len(fields) >= 6 and fields[0] != "output_file":
                    job = f"{fields[2]} {fields[3] if fields[3] not in ('', '-') else fields[0]}"
                    self._status[fields[0]] = (job, "missing" if fields[4] == "missing" else fields[5])
        return self._status


def stale_jobs(status: dict[str, tuple[str, str]]) -> int:
    """How many jobs a rerun would run: those of the output files that are not up to date."""
    return len({job for job, plan in status.values() if plan != "no update"})


def recommendation_records(results: Path, metric: str) -> list[dict]:
    """The records ``calbench recommend RESULTS --metric METRIC --json`` prints (per source, every method best first,
    with its interval, ties, accuracy change, saved calibrator and caveats): the one library function both call,
    :func:`calbench.jobs.recommendation.recommend`, with recommend's defaults."""
    from calbench.jobs.recommendation import Request, recommend

    return recommend(results, Request(metrics=(metric,))).records


def run_warnings(results: Path) -> list[dict]:
    """The rows of ``results/tables/warnings.csv`` (source, method, seed, stage, category, message;
    :func:`calbench.report.warnings.read_warnings`); none where the run wrote no such file."""
    from calbench.report.warnings import read_warnings

    return read_warnings(results)


def recommendation_figure(config: dict, source: str, methods: list[str]) -> tuple[bytes, str] | None:
    """The confidence reliability diagram of ``methods`` on ``source`` (the seeds and bins of the config's
    ``figures.reliability``, the panels of the workflow's reliability job,
    :func:`calbench.jobs.reliability.reliability_panels`) as PNG bytes of one wide row of panels for the first
    screen, and its title for the caption; None where the config draws no reliability diagrams."""
    from dataclasses import replace

    from calbench.jobs import reliability
    from calbench.report.reliability import figure_title, reliability_figure

    if config["figures"].get("reliability") is None:
        return None
    drawn = reliability.spec(config, source=source, target="conf")
    drawn = replace(drawn, calibrated={m: [paths.CALIBRATED.format(source=source, method=m, seed=s)
                                           for s in drawn.seeds] for m in methods})
    panels, logit_axis, limits = reliability.reliability_panels(spec=drawn)
    with tempfile.TemporaryDirectory() as folder:
        figure = Path(folder) / "figure.png"
        reliability_figure(panels, "conf", figure, source, drawn.seeds, drawn.n_bins, drawn.scheme, logit_axis,
                           limits, row=True)
        return figure.read_bytes(), figure_title(panels, "conf", source, drawn.seeds, drawn.n_bins, drawn.scheme,
                                                 logit_axis)


def _figure_methods(decision) -> list[str]:
    """The panels of a recommendation's figure: uncal beside the recommended method or, where the report keeps the
    model as is, beside the best method (the runner-up where uncal is the best): two panels wherever two methods
    ran."""
    from calbench.report.page import REFERENCE

    other = decision.method
    if decision.keep:
        other = decision.best if decision.best != REFERENCE else decision.runner_up
    return [m for m in dict.fromkeys([REFERENCE, other]) if m is not None]


def _panels_said(decision, methods: list[str]) -> str:
    """What the panels of a recommendation's figure are, for its caption."""
    if len(methods) < 2:
        return f"{decision.source}: {methods[0]}, the only method drawn"
    other = methods[1]
    why = ("the recommendation" if not decision.keep else
           "the best method, which does not beat it" if other == decision.best else
           "the runner-up; no method beats uncal")
    return f"{decision.source}: {methods[0]} beside {other}, {why}"


def _caption(path: str) -> str:
    parts = Path(path).with_suffix("").parts[2:]  # below results/figures
    return ": ".join(parts[:1]) + (" / " + "/".join(parts[1:]) if len(parts) > 1 else "")


def build(config_path: Path, output: Path, metric: str, status: OutputStatus) -> str:
    """The report's HTML for the run of ``config_path`` in the current folder, its outputs' plan ``status``
    (:class:`OutputStatus`, read after the recommendation and its figures are computed)."""
    from calbench.config import load
    from calbench.metrics import lookup
    from calbench.report import page

    config = load(str(config_path))
    results = Path("results")
    if not Path(paths.METRICS_LONG).is_file():
        raise FileNotFoundError(f"{Path(paths.METRICS_LONG).resolve()}: not found; run the workflow first "
                                f"(snakemake --cores all --configfile {config_path}), then calbench report")
    warnings = run_warnings(results)
    records = recommendation_records(results, metric)
    order = {source: i for i, source in enumerate(config["sources"])}
    rows = sorted(page.decisions(records, metric, warnings), key=lambda d: order.get(d.source, len(order)))
    family, _ = lookup(metric)
    here = output.resolve().parent
    embedded = []
    for decision in rows:
        methods = [m for m in _figure_methods(decision) if m in config["methods"]]
        drawn = recommendation_figure(config, decision.source, methods)
        if drawn is not None:
            png, title = drawn
            title = title.removeprefix(f"{decision.source}: ")
            title = title[:1].upper() + title[1:]
            embedded.append((decision.source, f"data:image/png;base64,{base64.b64encode(png).decode('ascii')}",
                             f"{_panels_said(decision, methods)}. {title}"))
    pending = stale_jobs(status())
    stale = (f"Out of date: {pending} jobs would rerun (snakemake -n --configfile {config_path} lists them); this "
             "page shows the results as they are on disk, which the rerun would change."
             if pending else None)
    ordered = [p for p in status() if Path(p).is_file()]
    tables = [p for p in ordered if p.startswith("results/tables/") and p.endswith(".md")]
    tables.sort(key=lambda p: (p != paths.SUMMARY, p))
    figures = sorted(p for p in ordered if p.startswith("results/figures/") and p.endswith(".png"))
    sources = list(config["sources"])
    facts = [f"seeds: {', '.join(map(str, config['seeds']))}", f"{len(config['methods'])} methods",
             f"config: {config_path}", f"calbench {calbench.__version__}"]
    details = [f"methods: {', '.join(config['methods'])}", f"metrics: {', '.join(config['metrics'])}",
               f"results: {results.resolve()}"]
    answer = page.answer_html(rows, metric, "higher" if family.higher_is_better else "lower",
                              with_figures=[source for source, _, _ in embedded])
    return page.page(
        title=f"calbench report: {config_path.name}", sources=sources, facts=facts, details=details, stale=stale,
        answer=answer, chooser=page.chooser_html(embedded), warnings=page.warnings_html(warnings),
        tables=[(Path(p).relative_to("results/tables").as_posix(), Path(p).read_text()) for p in tables],
        figures=[(os.path.relpath(Path(p).resolve(), here), _caption(p)) for p in figures])


def run(args) -> int:
    from calbench.atomic import write_text_atomic

    config = Path(args.config)
    if not config.is_file():
        raise FileNotFoundError(f"{config}: no such config; pass the config file the run used, e.g. "
                                "calbench report my.yaml")
    output = Path(args.output)
    if output.suffix != ".html":
        raise ValueError(f"--output {output}: the report is one HTML page; give a path ending in .html")
    with OutputStatus(config, args.snakefile) as status:
        text = build(config, output, args.metric, status)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(output, text)
    pending = stale_jobs(status())
    print(f"report: {output}" + (f" (out of date: {pending} jobs would rerun)" if pending else ""))
    return 0
