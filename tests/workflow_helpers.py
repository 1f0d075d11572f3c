"""Tiny configs, table readers and run set-ups shared by the tests that run the workflow (tests/workflow/ and the
few tests elsewhere marked ``workflow``)."""

from __future__ import annotations

from pathlib import Path

TINY_METRICS = ["acc", "nll", "ece.conf.ew15.l1"]


def tiny_config(methods=("uncal", "ts"), seeds=(0,), metrics=TINY_METRICS, n_cal=300, n_test=500,
                method_settings=None) -> dict:
    """One small planted-temperature source: each job takes well under a second of computing. No figures (a config
    without the key draws the reliability diagrams): the tests that use it count the tables' jobs."""
    config = {
        "seeds": list(seeds),
        "sources": {"tiny": {"type": "synthetic", "task": "planted_temperature", "num_classes": 4,
                             "temperature": 2.0, "n_cal": n_cal, "n_test": n_test}},
        "methods": list(methods),
        "metrics": list(metrics),
        "figures": None,
    }
    if method_settings:
        config["method_settings"] = method_settings
    return config


def run_then_configure(work: Path, before: dict, after: dict) -> tuple[Path, set[tuple[str, str]]]:
    """A complete run of the config ``before`` in ``work``, then ``after`` written as its config, and the jobs
    ``after`` plans. The plan is taken here, once: tests sharing the run execute in random order, and one that runs
    ``after`` first would leave nothing planned for the others."""
    import yaml

    from conftest import run_snakemake

    run_snakemake(work, before)
    (work / "config.yaml").write_text(yaml.safe_dump(after, sort_keys=False))
    return work, planned_jobs(work)


def table_texts(workdir: Path) -> dict[str, str]:
    """Every file of ``results/tables`` but runtime.md (timings differ between runs), by name."""
    tables = Path(workdir) / "results" / "tables"
    return {p.name: p.read_text() for p in sorted(tables.iterdir()) if p.name != "runtime.md"}


def planned_jobs(workdir: Path, extra=(), **run_options) -> set[tuple[str, str]]:
    """``(rule, wildcards)`` of every job ``snakemake -n`` (plus ``extra`` arguments) would run, e.g.
    ``("calibrate", "tiny/ts/0")``."""
    return set(_dry_run_jobs(workdir, ("-n", *extra), run_options))


def job_files(workdir: Path, **run_options) -> dict[tuple[str, str], tuple[set[str], set[str]]]:
    """Every job of the workflow in ``workdir`` as ``snakemake -n --forceall`` lists it: ``(rule, wildcards)`` (as
    :func:`planned_jobs` names jobs) → (its input files, its output files), each as printed (and the source files its
    code manifest lists)."""
    return _dry_run_jobs(workdir, ("-n", "--forceall"), run_options)


def _dry_run_jobs(workdir: Path, args, run_options) -> dict[tuple[str, str], tuple[set[str], set[str]]]:
    """The jobs of a dry run's listing (``rule NAME:`` blocks; a group job's jobs follow each other, indented), but
    ``all``: ``(rule, wildcards)`` → (input files, output files), the input files with the source files that each
    code manifest lists (:func:`calbench.jobs.code_inputs.with_code_files`)."""
    from calbench.jobs.code_inputs import with_code_files
    from conftest import REPO, run_snakemake

    result = run_snakemake(Path(workdir), None, *args, **run_options)
    root = Path(run_options.get("snakefile") or REPO / "Snakefile").parent
    jobs, job = {}, None

    def close():
        if job is not None and job["rule"] != "all":
            inputs = with_code_files(job["input:"], workdir, root)
            jobs[(job["rule"], job["wildcards:"])] = (inputs, job["output:"])

    for line in [*result.stdout.splitlines(), ""]:
        words = line.split()
        if len(words) == 2 and words[0] in ("rule", "localrule") and words[1].endswith(":"):
            close()
            job = {"rule": words[1][:-1], "input:": set(), "output:": set(), "wildcards:": ""}
        elif job is not None and words[:1] in (["input:"], ["output:"]):
            job[words[0]] = set(line.split(":", 1)[1].strip().split(", "))
        elif job is not None and words[:1] == ["wildcards:"]:
            job["wildcards:"] = "/".join(w.split("=", 1)[1].rstrip(",") for w in words[1:])
        elif job is not None and not line.startswith((" ", "\t")):  # the job's block has ended
            close()
            job = None
    return jobs


def rerun_by_inputs(jobs: dict, changed: str) -> set[tuple[str, str]]:
    """The jobs of :func:`job_files`'s ``jobs`` that a change of file ``changed`` reruns by Snakemake's rule: those
    that list it as an input, then every job that reads an output of a rerun job."""
    rerun = {job for job, (inputs, _) in jobs.items() if changed in inputs}
    while True:
        produced = set().union(*(jobs[job][1] for job in rerun))
        more = {job for job, (inputs, _) in jobs.items() if inputs & produced} - rerun
        if not more:
            return rerun
        rerun |= more


def copy_repository(repo: Path, dest: Path) -> Path:
    """A copy of the tracked workflow and package (no results, venvs or test caches) for tests that edit code. The
    ``__pycache__`` folders come along, with their modification times: numba's cache of the compiled kernels
    (``calbench compile``) stays valid for every unedited module, so the copy's jobs load the kernels instead of
    compiling them again (~30 CPU-s for all of them)."""
    import shutil

    ignore = shutil.ignore_patterns(".git", ".venv", "results", "logs", "benchmarks", ".snakemake", "*.egg-info",
                                    ".pytest_cache", "resources")
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "workflow", "src", "profiles", "envs", "config"):
        source = repo / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=ignore)
        else:
            shutil.copy2(source, dest / name)
    return dest
