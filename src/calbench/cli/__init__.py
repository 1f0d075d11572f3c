"""Command line (``calbench`` or ``python -m calbench``): use calibrators on your own scores, inspect what
calbench offers, and run single workflow jobs outside Snakemake (for debugging).

    calbench fit ts --scores cal.npy --labels y.npy -o ts.safetensors   # fit and save a calibrator
    calbench apply ts.safetensors test.npy -o probs.npy                 # calibrate new scores
    calbench recommend results/ --metric nll       # best method per source of a finished run
    calbench report my.yaml                        # its HTML report → results/report.html
    calbench methods --verbose                     # methods, settings, input, cost
    calbench metrics --json                        # metric ids, as JSON
    calbench validate config/config.yaml
    calbench job calibrate --config config/config.yaml --source lece_synthetic --method ts --seed 0

Exit status, the same for every subcommand: 0 done; 1 a user error (a config, file or value calbench refuses: one
line on stderr naming it and the fix, never a traceback); 2 a usage error (an unknown subcommand or option, a
missing argument: argparse's message).
"""

from __future__ import annotations

import argparse
import sys
import warnings

from calbench.cli import apply, compile, fit, jobs, methods, metrics, recommend, report, validate
from calbench.version import __version__

#: One module per subcommand (``add_parser(sub)``: its arguments, and ``handler``: its ``run``), in the order of
#: ``calbench --help``; :func:`main` is the one dispatch.
SUBCOMMANDS = (methods, metrics, fit, apply, recommend, report, compile, validate, jobs)
#: The exit statuses (the module docstring says what each means).
OK, USER_ERROR, USAGE = 0, 1, 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="calbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"calbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for subcommand in SUBCOMMANDS:
        subcommand.add_parser(sub)
    args = parser.parse_args(argv)
    if getattr(args, "reports_own_errors", False):  # validate: its own list of problems and warnings
        return args.handler(args)
    return run(args)


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that are a user's error, not calbench's: a refused value or config (``ValueError``, which
    ``ConfigError`` and ``CalibratorFileError`` are), a file that cannot be read or written, a missing optional
    extra (``ImportError`` naming it) and a download that failed offline."""
    from calbench.models.errors import OfflineError

    return ValueError, OSError, ImportError, OfflineError


def run(args) -> int:
    """Run a parsed subcommand; a user error becomes one line on stderr and exit status 1."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            status = args.handler(args)
        except user_errors() as err:
            print(f"calbench {args.command}: error: {' '.join(str(err).split())}", file=sys.stderr)
            status = USER_ERROR
    for message in dict.fromkeys(str(w.message) for w in caught):  # one line each, after the command's output
        print(f"calbench {args.command}: warning: {message}", file=sys.stderr)
    return status
