"""``calbench validate``: the config (schema, names, settings), then its files, then what ``fit`` and the metrics
would refuse of their data (:mod:`calbench.cli.fit_checks`); one line per problem."""

from __future__ import annotations

import warnings


def add_parser(sub) -> None:
    validate = sub.add_parser("validate", help="check a config file and the files it names (one line per problem)")
    validate.add_argument("config")
    validate.set_defaults(handler=run, reports_own_errors=True)


def run(args) -> int:
    from calbench.cli.fit_checks import fit_problems
    from calbench.config import ConfigError, load
    from calbench.data.check import config_problems

    path = args.config
    try:
        config = load(path)
    except ConfigError as err:  # a message about the file itself names it already
        print(err if str(err).startswith(f"{path}:") else f"{path}: {err}")
        return 1
    with warnings.catch_warnings(record=True) as caught:  # coarse probabilities: reported, not a problem
        warnings.simplefilter("always")
        problems = config_problems(config, deep=True)
        if not problems:  # the files read: what fit and evaluate would refuse of them
            problems = fit_problems(config)
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
