"""Where a finished workflow run's time went, per rule: jobs, CPU seconds and wall seconds, written as a record of
docs/measurements (docs/runtime.md, "The default run")::

    python -m calbench.perf.run_breakdown RUN_DIR --command "snakemake --cores 2 --configfile config/config.yaml" \\
        --wall "4 min 10 s" --cpu 300.1 --out docs/measurements/default_run.json

``RUN_DIR`` is the folder the run wrote ``benchmarks/`` and ``logs/`` in. Wall seconds per rule are the sum of
its jobs' ``s`` in Snakemake's benchmark files. CPU seconds: for the jobs that the local job runner ran
(:mod:`calbench.jobs.runner`), the user + system seconds of their forked children from ``logs/job_runner.tsv``
(exact: the runner waits for each child); for the other jobs, Snakemake's ``cpu_time``, which samples the job's
processes and misses what they spend between samples (a job shorter than a sample reads 0). ``--wall`` and
``--cpu`` are the whole run's (``/usr/bin/time``: every process, Snakemake's own and the jobs' start-up included);
``--snakemake-cpu``, Snakemake's own process's part of it (:mod:`calbench.perf.snakemake_cpu` prints it).
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

from calbench.perf import provenance


def _rule_of(path: Path, root: Path) -> str:
    """A benchmark file's rule: the first folder below ``benchmarks/`` (the rules name their benchmark files so),
    the file's stem for files directly in it."""
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else path.stem


def breakdown(run_dir: Path) -> list[dict]:
    """One entry per rule: ``jobs``, ``wall_seconds`` (benchmark files) and ``cpu_seconds`` with its ``cpu_source``
    (``runner``: the runner's record; ``benchmark``: Snakemake's sampled ``cpu_time``)."""
    root = run_dir / "benchmarks"
    rules: dict[str, dict] = defaultdict(lambda: {"jobs": 0, "wall_seconds": 0.0, "sampled_cpu": 0.0})
    for path in sorted(root.rglob("*.tsv")):
        with path.open() as f:
            row = next(csv.DictReader(f, delimiter="\t"))
        rule = rules[_rule_of(path, root)]
        rule["jobs"] += 1
        rule["wall_seconds"] += float(row["s"])
        rule["sampled_cpu"] += float(row["cpu_time"]) if row["cpu_time"] not in ("", "NA") else 0.0
    runner_cpu: dict[str, float] = defaultdict(float)
    record = run_dir / "logs" / "job_runner.tsv"
    if record.exists():
        with record.open() as f:
            for row in csv.DictReader(f, delimiter="\t"):
                runner_cpu[row["script"]] += float(row["user_s"]) + float(row["sys_s"])
    entries = []
    for name, rule in sorted(rules.items(), key=lambda kv: -kv[1]["wall_seconds"]):
        ran = name in runner_cpu
        entries.append({"name": name, "jobs": rule["jobs"], "wall_seconds": round(rule["wall_seconds"], 1),
                        "cpu_seconds": round(runner_cpu[name] if ran else rule["sampled_cpu"], 1),
                        "cpu_source": "runner" if ran else "benchmark"})
    return entries


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--command", required=True, help="the run's command line, as the record shows it")
    parser.add_argument("--wall", required=True, help="the whole run's wall time, as /usr/bin/time printed it")
    parser.add_argument("--cpu", type=float, required=True, help="the whole run's user + system CPU seconds")
    parser.add_argument("--snakemake-cpu", type=float, default=None,
                        help="the CPU seconds of Snakemake's own process (python -m calbench.perf.snakemake_cpu)")
    parser.add_argument("--setting", default=None, help="words on how it was run (shown beside the command)")
    parser.add_argument("--load", default=None, help="the load average seen during the run (default: now)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    record = {**provenance(args.command), **({"setting": args.setting} if args.setting else {}),
              **({"load_average": args.load} if args.load else {}),
              "run": {"wall": args.wall, "cpu_seconds": args.cpu,
                      **({"snakemake_cpu_seconds": args.snakemake_cpu} if args.snakemake_cpu is not None else {})},
              "benchmarks": breakdown(args.run_dir)}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
