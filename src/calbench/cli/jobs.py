"""``calbench dump|calibrate|evaluate``: one workflow job run as the rule would run it (paths of
:mod:`calbench.jobs.paths`, under results/), outside Snakemake, for debugging."""

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
    from calbench.config import ConfigError, chain_settings, load
    from calbench.jobs import paths
    from calbench.jobs.logs import job_logging

    try:
        config = load(args.config)
    except ConfigError as err:
        print(f"{args.config}: {err}", file=sys.stderr)
        return 1

    entry = config["sources"][args.source]
    dump = paths.DUMP.format(source=args.source)
    with job_logging():
        if args.command == "dump":
            from calbench.jobs.sources import dump_source_job

            dump_source_job(args.source, entry, entry["seeds"], dump, config["downloads_dir"])
            return 0
        where = {"source": args.source, "method": args.method, "seed": args.seed}
        if args.command == "calibrate":
            from calbench.jobs.calibrate import calibrate_job

            calibrate_job(dump, paths.CALIBRATED.format(**where), args.method, chain_settings(config, args.method),
                          args.seed, entry.get("split"), calibrator_output=paths.CALIBRATOR.format(**where),
                          input_kind=entry["scores"])
        else:
            from calbench.data.store import LABEL_SHIFT_RESAMPLES
            from calbench.jobs.evaluate import evaluate_job

            out = paths.METRICS.format(**where)
            shifted = {"shifts": paths.SHIFTS.format(source=args.source)} if entry.get("shifts") else {}
            if shifted or entry.get("label_shift"):
                shifted |= {"calibrator": paths.CALIBRATOR.format(**where), "label_shift": entry.get("label_shift")}
            evaluate_job(paths.CALIBRATED.format(**where), dump, out, config["metrics"], args.source, args.method,
                         args.seed, entry.get("split"), config["bootstrap"], **shifted)
            record = json.loads(Path(out).read_text())
            record.pop(LABEL_SHIFT_RESAMPLES, None)  # the tables' bootstrap resamples: thousands of numbers
            print(json.dumps(record, indent=1))
    return 0
