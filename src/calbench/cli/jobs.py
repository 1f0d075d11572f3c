"""``calbench dump|calibrate|evaluate``: one workflow job run as the rule would run it, with the arguments its
rule's script builds (``calibrate_arguments`` and the like, beside each job; paths under results/), outside
Snakemake, for debugging."""

from __future__ import annotations

import json
import sys
from pathlib import Path

NAMES = ("dump", "calibrate", "evaluate")


def add_parser(sub) -> None:
    for name in NAMES:
        job = sub.add_parser(name, help=f"run one {name} job as the workflow would (paths under results/)")
        job.add_argument("--config", required=True)
        job.add_argument("--source", required=True)
        if name != "dump":
            job.add_argument("--method", required=True)
            job.add_argument("--seed", type=int, required=True)
        job.set_defaults(handler=run, reports_own_errors=True)


def run(args) -> int:
    from calbench.config import ConfigError, load
    from calbench.jobs import paths
    from calbench.jobs.logs import job_logging

    try:
        config = load(args.config)
        problem = _unknown(config, args)
    except ConfigError as err:
        problem = str(err)
    if problem:
        print(f"{args.config}: {problem}", file=sys.stderr)
        return 1
    with job_logging():
        if args.command == "dump":
            from calbench.jobs.sources import dump_source_arguments, dump_source_job

            dump_source_job(**dump_source_arguments(config, args.source))
        elif args.command == "calibrate":
            from calbench.jobs.calibrate import calibrate_arguments, calibrate_job

            job = calibrate_arguments(config, args.source, args.method, args.seed)
            if job["test_rows"] is not None and not Path(job["test_rows"]).is_file():
                from calbench.data.splits import write_test_index

                write_test_index(**paths.draw_split_arguments(config, args.source, args.seed))
            if job["perturbed_cal"] is not None and not Path(job["perturbed_cal"]).is_file():
                print(f"{job['perturbed_cal']}: missing; {args.method} fits on the perturbed calibration set, which "
                      f"the workflow makes: snakemake --configfile {args.config} {job['perturbed_cal']}",
                      file=sys.stderr)
                return 1
            calibrate_job(**job)
        else:
            from calbench.data.store import LABEL_SHIFT_RESAMPLES
            from calbench.jobs.evaluate import evaluate_arguments, evaluate_job

            job = evaluate_arguments(config, args.source, args.method, args.seed)
            evaluate_job(**job)
            record = json.loads(Path(job["output"]).read_text())
            record.pop(LABEL_SHIFT_RESAMPLES, None)  # the tables' bootstrap resamples: thousands of numbers
            print(json.dumps(record, indent=1))
    return 0


def _unknown(config: dict, args) -> str | None:
    """What of the command line the config lacks or cannot run, as one line (``None``: nothing)."""
    from calbench.config import method_runs_on

    if args.source not in config["sources"]:
        return f"no source {args.source!r} in config key sources ({', '.join(config['sources'])})"
    entry = config["sources"][args.source]
    if args.command == "dump" and entry["type"] in ("train", "pretrained"):
        return (f"sources.{args.source} is a {entry['type']} source: its dump is made by the model rules "
                f"(snakemake --configfile {args.config} results/dumps/{args.source}.h5), not by calbench dump")
    if args.command == "dump":
        return None
    try:
        runs = method_runs_on(args.method, entry)
    except (KeyError, ValueError) as err:
        return f"--method {args.method!r}: {err}"
    if not runs:
        return f"method {args.method!r} does not run on source {args.source!r} (it lacks what the method needs)"
    return None
