"""``calbench validate``: the config (schema, names, settings), then its files, then what ``fit`` and the metrics
would refuse of their data (:mod:`calbench.cli.fit_checks`); one line per problem on stderr (``--json``: one JSON
object on stdout), exit status 1 where there is one."""

from __future__ import annotations

import json
import sys
import warnings


def add_parser(sub) -> None:
    validate = sub.add_parser("validate", help="check a config file and the files it names (one line per problem)")
    validate.add_argument("config")
    validate.add_argument("--json", action="store_true",
                          help="print {config, valid, problems, warnings, sources, methods} as JSON on stdout")
    validate.set_defaults(handler=run, reports_own_errors=True)


def run(args) -> int:
    from calbench.cli.fit_checks import fit_problems
    from calbench.config import ConfigError, load
    from calbench.data.check import config_problems

    path, config, warned = args.config, None, []
    try:
        config = load(path)
    except ConfigError as err:  # a message about the file itself names it already
        problems = [str(err).removeprefix(f"{path}: ")]
    else:
        with warnings.catch_warnings(record=True) as caught:  # coarse probabilities: reported, not a problem
            warnings.simplefilter("always")
            problems = config_problems(config, deep=True)
            if not problems:  # the files read: what fit and evaluate would refuse of them
                problems = fit_problems(config)
        warned = list(dict.fromkeys(str(w.message) for w in caught))
    if args.json:
        print(json.dumps({"config": path, "valid": not problems, "problems": problems, "warnings": warned,
                          "sources": len(config["sources"]) if config else None,
                          "methods": len(config["methods"]) if config else None}, indent=1))
        return 1 if problems else 0
    for message in warned:
        print(f"{path}: warning: {message}", file=sys.stderr)
    for problem in problems:
        print(f"{path}: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"{path}: valid ({len(config['sources'])} sources, {len(config['methods'])} methods; files checked"
          + (f"; {len(warned)} warning{'s' * (len(warned) > 1)} above)" if warned else ")"))
    return 0
