"""``calbench job dump|calibrate|evaluate``: one workflow job run as the rule would run it, with the spec its rule's
script builds (``calbench.jobs.calibrate.spec`` and the like; paths under results/), outside Snakemake, for
debugging."""

from __future__ import annotations

import json
import sys
from pathlib import Path

NAMES = ("dump", "calibrate", "evaluate")


def add_parser(sub) -> None:
    job = sub.add_parser("job", help="run one workflow job as the workflow would (dump, calibrate, evaluate; paths "
                                     "under results/), for debugging")
    kinds = job.add_subparsers(dest="job", required=True)
    for name in NAMES:
        kind = kinds.add_parser(name, help=f"run one {name} job as the workflow would (paths under results/)")
        kind.add_argument("--config", required=True)
        kind.add_argument("--source", required=True)
        if name != "dump":
            kind.add_argument("--method", required=True)
            kind.add_argument("--seed", type=int, required=True)
    job.set_defaults(handler=run)


def run(args) -> int:
    from calbench.config import ConfigError, load
    from calbench.jobs.logs import job_logging

    try:
        config = load(args.config)
        problem = _unknown(config, args)
    except ConfigError as err:
        problem = str(err)
    if problem:
        print(f"calbench job: error: {args.config}: {problem}", file=sys.stderr)
        return 1
    with job_logging():
        if args.job == "dump":
            from calbench.jobs.sources import dump_source_job, spec

            dump_source_job(spec=spec(config, source=args.source))
        elif args.job == "calibrate":
            from calbench.jobs.calibrate import calibrate_job, spec
            from calbench.jobs.sources import draw_split_job, split_spec

            job = spec(config, source=args.source, method=args.method, seed=args.seed)
            if job.test_rows is not None and not Path(job.test_rows).is_file():
                draw_split_job(spec=split_spec(config, source=args.source, seed=args.seed))
            if job.perturbed_cal is not None and not Path(job.perturbed_cal).is_file():
                print(f"calbench job: error: {job.perturbed_cal}: missing; {args.method} fits on the perturbed "
                      f"calibration set, which the workflow makes: snakemake --configfile {args.config} "
                      f"{job.perturbed_cal}", file=sys.stderr)
                return 1
            calibrate_job(spec=job)
        else:
            from calbench.data.store import LABEL_SHIFT_RESAMPLES
            from calbench.jobs.evaluate import evaluate_job, spec

            job = spec(config, source=args.source, method=args.method, seed=args.seed)
            evaluate_job(spec=job)
            record = json.loads(Path(job.output).read_text())
            record.pop(LABEL_SHIFT_RESAMPLES, None)  # the tables' bootstrap resamples: thousands of numbers
            print(json.dumps(record, indent=1))
    return 0


def _unknown(config: dict, args) -> str | None:
    """What of the command line the config lacks or cannot run, as one line (``None``: nothing)."""
    from calbench.config import method_runs_on
    from calbench.data.entry import is_model

    if args.source not in config["sources"]:
        return f"no source {args.source!r} in config key sources ({', '.join(config['sources'])})"
    entry = config["sources"][args.source]
    if args.job == "dump" and is_model(entry):
        return (f"sources.{args.source} is a {entry['type']} source: its dump is made by the model rules "
                f"(snakemake --configfile {args.config} results/dumps/{args.source}.h5), not by calbench job dump")
    if args.job == "dump":
        return None
    try:
        runs = method_runs_on(args.method, entry)
    except (KeyError, ValueError) as err:
        return f"--method {args.method!r}: {err}"
    if not runs:
        return f"method {args.method!r} does not run on source {args.source!r} (it lacks what the method needs)"
    return None
