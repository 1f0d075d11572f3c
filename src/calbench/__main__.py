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

import yaml

REPO_SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


def _load_config(path):
    from calbench.config import validate

    return validate(yaml.safe_load(Path(path).read_text()), REPO_SCHEMA)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("methods", help="list registered calibration methods")
    sub.add_parser("metrics", help="list metric id patterns")
    validate = sub.add_parser("validate", help="validate a config file")
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
    config = _load_config(args.config)
    if args.command == "validate":
        print(f"{args.config}: valid ({len(config['sources'])} sources, {len(config['methods'])} methods)")
        return 0

    from calbench import pipeline
    from calbench.config import chain_settings

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
                                  config["metrics"], args.source, args.method, args.seed, entry.get("split"))
            print(json.dumps(json.loads(Path(out).read_text()), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
