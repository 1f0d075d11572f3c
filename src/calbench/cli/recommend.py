"""``calbench recommend``: the best method per source of a finished run, its interval, the methods tied with it and
the caveats the tables carry (:mod:`calbench.jobs.recommendation`, which ``calbench report`` shares)."""

from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    from calbench.jobs.recommendation import BEST_FIELDS, FIELDS
    from calbench.stats.resampling import RESAMPLES

    rec = sub.add_parser("recommend", help="the best method per source of a finished run, with intervals and tests")
    rec.add_argument("results", nargs="?", default="results", help="results directory of a finished run")
    rec.add_argument("--metric", default="nll", help="metric id to rank by (default nll)")
    rec.add_argument("--all-metrics", action="store_true",
                     help="every metric of the run, proper scores first: the winner per metric and the methods "
                          "tied with it (one progress line per source and metric on stderr)")
    rec.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    rec.add_argument("--alpha", type=float, default=0.05,
                     help="family-wise significance level of the tests against the best (Holm)")
    rec.add_argument("--resamples", type=int, default=RESAMPLES,
                     help=f"paired bootstrap resamples (default {RESAMPLES}, as the tables and intervals.csv)")
    rec.add_argument("--recompute", action="store_true",
                     help="recompute every estimator without a row-weighted form (KDE, kernel, fit-on-test, CV "
                          "bins, KS) on every resample, whatever the cost (--resamples times theirs); without it, "
                          "only those that fit the engine's budget of recomputation per source")
    rec.add_argument("--under-shift", action="store_true",
                     help="rank by the mean over the shifted test sets instead of the clean test split")
    rec.add_argument("--under-label-shift", action="store_true",
                     help="rank by the mean over the label-shifted test sets after EM prior adaptation "
                          "(--metric nll ranks by nll.em; name nll.bbse, nll.oracle or acc.em explicitly)")
    rec.add_argument("--json", action="store_true",
                     help=f"print a JSON list of records {{{', '.join(FIELDS)}}} (values unscaled: the tables show "
                          f"value × scale; the best also has {', '.join(BEST_FIELDS)}, the last three for an ECE)")
    rec.set_defaults(handler=run)


def request_of(args):
    """The :class:`calbench.jobs.recommendation.Request` of the parsed arguments."""
    from calbench.jobs.recommendation import Request

    if not 0 < args.level < 1 or not 0 < args.alpha < 1 or args.resamples < 10:
        raise ValueError(f"--level and --alpha must lie in (0, 1) and --resamples be at least 10; got "
                         f"{args.level}, {args.alpha}, {args.resamples}")
    return Request(metrics=None if args.all_metrics else (args.metric,), level=args.level, alpha=args.alpha,
                   resamples=args.resamples, recompute=args.recompute, under_shift=args.under_shift,
                   under_label_shift=args.under_label_shift)


def run(args) -> int:
    from calbench.jobs.recommendation import recommend, render

    request = request_of(args)
    progress = (lambda line: print(line, file=sys.stderr, flush=True)) if args.all_metrics else None
    result = recommend(args.results, request, progress)
    if args.json:
        print(json.dumps(result.records, indent=1))
        return 0
    print(render(result, request), end="")
    if args.under_label_shift:  # per calibrator and shift: does adaptation help it (docs/label_shift.md)
        from calbench.cli.recommend_label_shift import print_adaptation

        print_adaptation(args.results, result.records, result.metrics[0])
    return 0
