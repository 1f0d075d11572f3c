"""Command line: inspect what calbench offers and run single jobs outside Snakemake (for debugging).

    python -m calbench methods                     # registered methods
    python -m calbench metrics                     # metric id patterns
    python -m calbench validate config/config.yaml
    python -m calbench calibrate --config config/config.yaml --source lece_synthetic --method ts --seed 0
"""

from __future__ import annotations

import argparse
import json
import sys
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
    problems = config_problems(config, deep=True)
    for problem in problems:
        print(f"{path}: {problem}")
    if problems:
        return 1
    print(f"{path}: valid ({len(config['sources'])} sources, {len(config['methods'])} methods; files checked)")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("methods", help="list registered calibration methods")
    sub.add_parser("metrics", help="list metric id patterns")
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

    if args.command == "methods":
        from calbench.methods import available, method_class

        for name in available():
            doc = (method_class(name).__doc__ or "").strip().splitlines()[0]
            print(f"{name:14s} {doc}")
        return 0
    if args.command == "metrics":
        from calbench.metrics import known_patterns

        print("\n".join(known_patterns()))
        return 0
    if args.command == "validate":
        return _validate(args.config)

    from calbench import pipeline
    from calbench.config import ConfigError, chain_settings, load

    try:
        config = load(args.config)
    except ConfigError as err:
        print(f"{args.config}: {err}", file=sys.stderr)
        return 1

    entry = config["sources"][args.source]
    dump = f"results/dumps/{args.source}.h5"
    with pipeline.job_logging():
        if args.command == "dump":
            pipeline.dump_job(args.source, entry, entry.get("seeds", config["seeds"]), dump, config["downloads_dir"])
        elif args.command == "calibrate":
            pipeline.calibrate_job(dump, f"results/calibrated/{args.source}/{args.method}/seed{args.seed}.h5",
                                   args.method, chain_settings(config, args.method), args.seed, entry.get("split"))
        else:
            out = f"results/metrics/{args.source}/{args.method}/seed{args.seed}.json"
            pipeline.evaluate_job(f"results/calibrated/{args.source}/{args.method}/seed{args.seed}.h5", dump, out,
                                  config["metrics"], args.source, args.method, args.seed, entry.get("split"),
                                  config["bootstrap"])
            print(json.dumps(json.loads(Path(out).read_text()), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
