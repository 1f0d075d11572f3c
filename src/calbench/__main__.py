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
from pathlib import Path

import yaml

REPO_SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


def _load_config(path):
    from calbench.config import validate

    return validate(yaml.safe_load(Path(path).read_text()), REPO_SCHEMA)


def main(argv=None) -> int:
    from calbench import commands

    parser = argparse.ArgumentParser(prog="calbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    commands.add_subcommands(sub)
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
    if hasattr(args, "handler"):
        return commands.run(args)
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
            where = f"{args.source}/{args.method}/seed{args.seed}"
            pipeline.calibrate_job(dump, f"results/calibrated/{where}.h5", args.method,
                                   chain_settings(config, args.method), args.seed, entry.get("split"),
                                   calibrator_output=f"results/calibrators/{where}.safetensors",
                                   input_kind=entry.get("scores", "logits"))
        else:
            out = f"results/metrics/{args.source}/{args.method}/seed{args.seed}.json"
            pipeline.evaluate_job(f"results/calibrated/{args.source}/{args.method}/seed{args.seed}.h5", dump, out,
                                  config["metrics"], args.source, args.method, args.seed, entry.get("split"))
            print(json.dumps(json.loads(Path(out).read_text()), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
