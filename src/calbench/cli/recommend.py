"""``calbench recommend``: the best method per source of a finished run, with intervals and paired tests
(:mod:`calbench.report.choice`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calbench.cli import recommend_label_shift


def add_parser(sub) -> None:
    rec = sub.add_parser("recommend", help="the best method per source of a finished run, with intervals and tests")
    rec.add_argument("results", nargs="?", default="results", help="results directory of a finished run")
    rec.add_argument("--metric", default="nll", help="metric id to rank by (default nll)")
    rec.add_argument("--all-metrics", action="store_true",
                     help="every metric of the run: the winner per metric and the methods not significantly worse")
    rec.add_argument("--level", type=float, default=0.95, help="confidence level of the interval")
    rec.add_argument("--alpha", type=float, default=0.05, help="significance level of the paired test")
    rec.add_argument("--resamples", type=int, default=1000,
                     help="bootstrap resamples of the test rows for one-seed sources (default 1000)")
    rec.add_argument("--under-shift", action="store_true",
                     help="rank by the mean over the shifted test sets instead of the clean test split")
    recommend_label_shift.add_argument(rec)
    rec.set_defaults(handler=run)


def run(args) -> int:
    import pandas as pd

    from calbench.jobs import paths
    from calbench.report.choice import compare, scale_note, shown

    results = Path(args.results)
    table = _under(results, paths.METRICS_LONG)
    if not table.is_file():
        raise FileNotFoundError(f"{table}: not found; run the workflow first (snakemake --cores N), or pass the "
                                "results directory of a finished run")
    from calbench.report.shift import ranking_rows

    if args.under_label_shift:
        long = recommend_label_shift.label_shift_view(pd.read_csv(table), args)
    else:
        long = ranking_rows(pd.read_csv(table), args.under_shift)
    available = sorted(m for m in long["metric"].unique() if not m.endswith((".ci_low", ".ci_high")))
    wanted = available if args.all_metrics else [args.metric]
    for metric in wanted:
        if metric not in available:
            raise ValueError(f"metric {metric!r} is not in {table}; it holds {', '.join(available)} "
                             "(`calbench metrics` explains each id)")

    def outputs(source, method, seed):
        return _under(results, paths.CALIBRATED, source=source, method=method, seed=seed)

    print(f"best method per source; interval: {args.level:.0%}, over seeds (t) where a source has several, else "
          f"over its test rows ({args.resamples} bootstrap resamples, the same for every method); a method is "
          f"'not significantly worse' when a two-sided paired test against the best gives p >= {args.alpha}")
    if args.under_shift:
        print("ranked by the mean over the shifted test sets of each seed (docs/shift.md); one-seed sources get "
              "no interval, since the bootstrap resamples the clean test rows")
    if args.under_label_shift:
        print(recommend_label_shift.NOTE)
    for metric in wanted:
        direction = "higher" if _higher_is_better(metric) else "lower"
        print(f"\n{metric}{scale_note(metric)}, {direction} is better, values as in the tables")
        rows = None if args.under_shift or args.under_label_shift else outputs
        for rec in compare(long, metric, rows, args.level, args.resamples):
            _print_choice(rec, args.alpha, shown)
            if not args.all_metrics:
                saved = _under(results, paths.CALIBRATOR, source=rec["source"], method=rec["method"], seed=rec["seed"])
                print(f"    saved calibrator: {saved}" + ("" if saved.is_file() else " (missing: rerun the workflow)"))
    return 0


def _under(results: Path, template: str, **fields) -> Path:
    """The workflow's output path ``template`` (:mod:`calbench.jobs.paths`) in the results directory ``results``."""
    return results / template.removeprefix("results/").format(**fields)


def _print_choice(rec: dict, alpha: float, shown) -> None:
    """Two lines per source: the best method with its interval and the verdict against the runner-up; the
    methods not significantly worse than it."""
    metric = rec["metric"]
    line = f"{rec['source']}: {rec['method']} {shown(metric, rec['value'])}"
    if rec["basis"] is not None and np.isfinite(rec["low"]):
        line += f" [{shown(metric, rec['low'])}, {shown(metric, rec['high'])}] over {rec['basis']}"
    else:
        line += " (no interval: one seed and no calibrated outputs to resample)"
    if not rec["others"]:
        print(line + "; the only method")
        return
    method, value, p_value = rec["others"][0]
    if np.isnan(p_value):
        line += f"; runner-up {method} {shown(metric, value)}, no paired test"
    else:
        verdict = "significantly better than" if p_value < alpha else "not significantly better than"
        line += f"; {verdict} the runner-up {method} {shown(metric, value)} (p = {p_value:.3g})"
    print(line)
    close = [m for m, _, p in rec["others"] if np.isfinite(p) and p >= alpha]
    print(f"    not significantly worse: {', '.join(close) if close else 'none'}")


def _higher_is_better(metric: str) -> bool:
    from calbench.metrics import lookup

    return lookup(metric)[0].higher_is_better
