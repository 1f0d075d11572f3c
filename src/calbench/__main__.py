"""Command line (``calbench`` or ``python -m calbench``): use calibrators on your own scores, inspect what
calbench offers, and run single workflow jobs outside Snakemake (for debugging).

    calbench fit ts --scores cal.npy --labels y.npy -o ts.safetensors   # fit and save a calibrator
    calbench apply ts.safetensors test.npy -o probs.npy                 # calibrate new scores
    calbench recommend results/ --metric nll       # best method per source of a finished run
    calbench methods --verbose                     # methods, settings, input, cost
    calbench metrics                               # metric ids
    python -m calbench validate config/config.yaml
    python -m calbench calibrate --config config/config.yaml --source lece_synthetic --method ts --seed 0
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path


def _validate(path) -> int:
    """``validate``: the config (schema, names, settings), then its files; one line per problem."""
    from calbench.config import ConfigError, load
    from calbench.data.check import config_problems

    try:
        config = load(path)
    except ConfigError as err:
        print(f"{path}: {err}")
        return 1
    with warnings.catch_warnings(record=True) as caught:  # coarse probabilities: reported, not a problem
        warnings.simplefilter("always")
        problems = config_problems(config, deep=True)
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"{path}: warning: {message}")
    for problem in problems:
        print(f"{path}: {problem}")
    if problems:
        return 1
    warned = len(dict.fromkeys(str(w.message) for w in caught))
    print(f"{path}: valid ({len(config['sources'])} sources, {len(config['methods'])} methods; files checked"
          + (f"; {warned} warning{'s' * (warned > 1)} above)" if warned else ")"))
    return 0


def main(argv=None) -> int:
    from calbench import commands

    parser = argparse.ArgumentParser(prog="calbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    commands.add_subcommands(sub)
    validate = sub.add_parser("validate", help="check a config file and the files it names (one line per problem)")
    validate.add_argument("config")
    for name in ("dump", "calibrate", "evaluate"):
        job = sub.add_parser(name, help=f"run one {name} job as the workflow would (paths under results/)")
        job.add_argument("--config", required=True)
        job.add_argument("--source", required=True)
        if name != "dump":
            job.add_argument("--method", required=True)
            job.add_argument("--seed", type=int, required=True)
    args = parser.parse_args(argv)
    if hasattr(args, "handler"):
        return commands.run(args)
    if args.command == "validate":
        return _validate(args.config)

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

            dump_source_job(args.source, entry, entry.get("seeds", config["seeds"]), dump, config["downloads_dir"])
            return 0
        where = {"source": args.source, "method": args.method, "seed": args.seed}
        if args.command == "calibrate":
            from calbench.jobs.calibrate import calibrate_job

            calibrate_job(dump, paths.CALIBRATED.format(**where), args.method, chain_settings(config, args.method),
                          args.seed, entry.get("split"), calibrator_output=paths.CALIBRATOR.format(**where),
                          input_kind=entry.get("scores", "logits"))
        else:
            from calbench.jobs.evaluate import evaluate_job

            out = paths.METRICS.format(**where)
            shifted = entry.get("shifts") and {"shifts": paths.SHIFTS.format(source=args.source),
                                               "calibrator": paths.CALIBRATOR.format(**where)}
            evaluate_job(paths.CALIBRATED.format(**where), dump, out, config["metrics"], args.source, args.method,
                         args.seed, entry.get("split"), config["bootstrap"], **(shifted or {}))
            print(json.dumps(json.loads(Path(out).read_text()), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
