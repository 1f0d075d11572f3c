"""Command line (``calbench`` or ``python -m calbench``): use calibrators on your own scores, inspect what
calbench offers, and run single workflow jobs outside Snakemake (for debugging).

    calbench fit ts --scores cal.npy --labels y.npy -o ts.safetensors   # fit and save a calibrator
    calbench apply ts.safetensors test.npy -o probs.npy                 # calibrate new scores
    calbench recommend results/ --metric nll       # best method per source of a finished run
    calbench report my.yaml                        # its HTML report → results/report.html
    calbench methods --verbose                     # methods, settings, input, cost
    calbench metrics                               # metric ids
    python -m calbench validate config/config.yaml
    python -m calbench calibrate --config config/config.yaml --source lece_synthetic --method ts --seed 0
"""

from __future__ import annotations

import argparse
import sys
import warnings

from calbench.cli import apply, compile, fit, jobs, methods, metrics, recommend, report, validate

#: One module per subcommand (``add_parser(sub)``: its arguments, and ``handler``: its ``run``), in the order of
#: ``calbench --help``; :func:`main` is the one dispatch.
SUBCOMMANDS = (methods, metrics, fit, apply, recommend, report, compile, validate, jobs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="calbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for subcommand in SUBCOMMANDS:
        subcommand.add_parser(sub)
    args = parser.parse_args(argv)
    if getattr(args, "reports_own_errors", False):  # validate and the workflow jobs: their own messages
        return args.handler(args)
    return run(args)


def run(args) -> int:
    """Run a parsed subcommand; user errors become one line on stderr and exit status 2."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            status = args.handler(args)
        except (ValueError, FileNotFoundError) as err:
            print(f"calbench {args.command}: error: {err}", file=sys.stderr)
            status = 2
    for message in dict.fromkeys(str(w.message) for w in caught):  # one line each, after the command's output
        print(f"calbench {args.command}: warning: {message}", file=sys.stderr)
    return status
