"""``calbench recommend``: the best method per source of a finished run, its interval, the methods tied with it
and whether it changes the classifier's accuracy (:mod:`calbench.report.paired_bootstrap`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from calbench.cli import recommend_label_shift


def add_parser(sub) -> None:
    rec = sub.add_parser("recommend", help="the best method per source of a finished run, with intervals and tests")
    rec.add_argument("results", nargs="?", default="results", help="results directory of a finished run")
    rec.add_argument("--metric", default="nll", help="metric id to rank by (default nll)")
    rec.add_argument("--all-metrics", action="store_true",
                     help="every metric of the run: the winner per metric and the methods tied with it")
    rec.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    rec.add_argument("--alpha", type=float, default=0.05,
                     help="family-wise significance level of the tests against the best (Holm)")
    rec.add_argument("--resamples", type=int, default=1000,
                     help="paired bootstrap resamples of the test rows (default 1000)")
    rec.add_argument("--recompute", action="store_true",
                     help="recompute every estimator without a row-weighted form (KDE, kernel, fit-on-test, CV "
                          "bins, KS) on every resample, whatever the cost (--resamples times theirs); without it, "
                          "only those that fit the engine's budget of recomputation per source")
    rec.add_argument("--under-shift", action="store_true",
                     help="rank by the mean over the shifted test sets instead of the clean test split")
    recommend_label_shift.add_argument(rec)
    rec.add_argument("--json", action="store_true",
                     help="print a JSON list of records {source, metric, method, estimate, low, high, best, "
                          "tied_with_best, p_value, note, acc_change, calibrator} instead of text")
    rec.set_defaults(handler=run)


def run(args) -> int:
    import pandas as pd

    from calbench.jobs import paths
    from calbench.report.shift import ranking_rows

    if not 0 < args.level < 1 or not 0 < args.alpha < 1 or args.resamples < 10:
        raise ValueError(f"--level and --alpha must lie in (0, 1) and --resamples be at least 10; got "
                         f"{args.level}, {args.alpha}, {args.resamples}")
    results = Path(args.results)
    table = _under(results, paths.METRICS_LONG)
    if not table.is_file():
        raise FileNotFoundError(f"{table}: not found; run the workflow first (snakemake --cores N), or pass the "
                                "results directory of a finished run")
    everything = pd.read_csv(table)
    if args.under_label_shift:
        long = recommend_label_shift.label_shift_view(everything, args)
    else:
        long = ranking_rows(everything, args.under_shift)
    available = sorted(m for m in long["metric"].unique() if not m.endswith((".ci_low", ".ci_high")))
    wanted = available if args.all_metrics else [args.metric]
    for metric in wanted:
        if metric not in available:
            raise ValueError(f"metric {metric!r} is not in {table}; it holds {', '.join(available)} "
                             "(`calbench metrics` explains each id)")
    from calbench.metrics import lookup

    signed = [m for m in wanted if lookup(m)[0].signed]
    if signed and not args.all_metrics:
        raise ValueError(f"{signed[0]} is signed (0 is best): recommend ranks methods in one direction; use its "
                         "unsigned parts (e.g. sce.conf.em15.over and .under) or an ECE")
    wanted = [m for m in wanted if m not in signed]
    records = []
    for source, rows in long.groupby("source", sort=True):
        draws = (_shifted_draws(source, everything, wanted, results, args) if args.under_shift else None) \
            or _source_draws(source, rows, wanted, results, args)
        records += _records(draws, wanted, results, args)
    if args.json:
        print(json.dumps(records, indent=1))
        return 0
    _print_text(records, wanted, args)
    if args.under_label_shift:
        best = {r["source"]: r["method"] for r in records if r["metric"] == wanted[0] and r["best"] == r["method"]}
        recommend_label_shift.print_adaptation(everything, [
            _under(results, paths.METRICS, source=s, method=m, seed=int(e))
            for s, m, e in everything[["source", "method", "seed"]].drop_duplicates().itertuples(index=False)], best)
    if signed:
        print(f"\nnot ranked, signed (0 is best; docs/metrics.md): {', '.join(signed)}")
    return 0


def _source_draws(source: str, rows, metrics, results: Path, args):
    """The paired bootstrap of ``source``'s test rows for ``metrics`` and accuracy (under label shift, of the
    resamples the evaluate jobs kept); under shift without the saved calibrators or shifted sets
    (:func:`_shifted_draws`), or where a calibrated output is missing, the per-seed values of the long table
    without resamples."""
    from calbench.data.store import read_calibrated
    from calbench.jobs import paths
    from calbench.report.paired_bootstrap import estimates_only, source_draws

    seeds = sorted(int(s) for s in rows["seed"].unique())
    methods = list(dict.fromkeys(rows["method"]))
    wanted = list(dict.fromkeys([*metrics, "acc"]))
    wanted = [m for m in wanted if m in set(rows["metric"])]
    files = {(m, s): _under(results, paths.CALIBRATED, source=source, method=m, seed=s) for m in methods for s in seeds}
    if args.under_label_shift:
        return recommend_label_shift.label_shift_draws_of(source, rows, wanted, [
            _under(results, paths.METRICS, source=source, method=m, seed=s) for m in methods for s in seeds])
    if args.under_shift:
        return estimates_only(source, rows, wanted, "the saved calibrators, calibrated test outputs or shifted "
                                                     "sets are missing (rerun the workflow)")
    if not all(path.is_file() for path in files.values()):
        return estimates_only(source, rows, wanted, "the calibrated test outputs are missing (rerun the workflow)")
    values = rows.set_index(["method", "seed", "metric"])["value"].to_dict()
    return source_draws(source, seeds, methods, wanted, lambda m, s: read_calibrated(files[m, s], "test"),
                        args.resamples, recompute=args.recompute, known=lambda m, s, metric: values.get((m, s, metric)))


def _shifted_draws(source: str, everything, metrics, results: Path, args):
    """The paired bootstrap of the mean over ``source``'s shifted test sets (the shift tables' ``under shift``
    column, :func:`calbench.report.shift.column_draws`): each saved calibrator applied to each shifted set; None
    where a calibrated output, saved calibrator or the shifted sets' file is missing."""
    from calbench.jobs import paths
    from calbench.jobs.shift import shifted_outputs
    from calbench.report.shift import UNDER_SHIFT, column_draws, with_severity

    rows = with_severity(everything[everything["source"] == source])
    wanted = [m for m in dict.fromkeys([*metrics, "acc"]) if m in set(rows["metric"])]
    rows = rows[rows["metric"].isin(wanted)]
    keys = rows[["method", "seed"]].drop_duplicates().itertuples(index=False)
    outputs = [tuple(_under(results, template, source=source, method=m, seed=int(s))
                     for template in (paths.METRICS, paths.CALIBRATED, paths.CALIBRATOR)) for m, s in keys]
    shifts = _under(results, paths.SHIFTS, source=source)
    if not shifts.is_file() or not all(path.is_file() for files in outputs for path in files):
        return None
    load = shifted_outputs(outputs, {source: str(shifts)})
    return column_draws(source, rows, wanted, load, args.resamples, [UNDER_SHIFT], args.recompute)[UNDER_SHIFT]


def _records(draws, metrics, results: Path, args) -> list[dict]:
    """``recommend --json``'s records of one source: every method per metric, best first, with ``acc_change``
    (its accuracy minus uncal's), the saved calibrator's path and, on the best, ``acc_flag``: how its accuracy
    change compares with uncal's accuracy interval."""
    from calbench.jobs import paths
    from calbench.report.paired_bootstrap import REFERENCE, compare

    accuracy = {v.method: v for v in compare(draws, "acc", args.level, args.alpha)} if "acc" in draws.estimates \
        else {}
    reference = accuracy.get(REFERENCE)
    out = []
    for metric in metrics:
        for rank, verdict in enumerate(compare(draws, metric, args.level, args.alpha)):
            record = {k: _plain(v) for k, v in verdict.record().items()}
            own = accuracy.get(verdict.method)
            record["acc_change"] = _plain(own.estimate - reference.estimate) if own and reference else None
            record["calibrator"] = str(_under(results, paths.CALIBRATOR, source=verdict.source,
                                              method=verdict.method, seed=draws.seeds[0]))
            if rank == 0:
                record["acc_flag"] = _accuracy_flag(own, reference)
            out.append(record)
    return out


def _accuracy_flag(own, reference) -> str | None:
    """``"raises"`` or ``"lowers"`` where the method's accuracy lies outside uncal's accuracy interval, else
    None (also when either has no interval)."""
    if own is None or reference is None or not np.isfinite(reference.low):
        return None
    if own.estimate > reference.high:
        return "raises"
    if own.estimate < reference.low:
        return "lowers"
    return None


def _plain(value):
    """JSON-ready: NaN → None, numpy scalars → Python."""
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value.item() if isinstance(value, np.generic) else value


def _under(results: Path, template: str, **fields) -> Path:
    """The workflow's output path ``template`` (:mod:`calbench.jobs.paths`) in the results directory ``results``."""
    return results / template.removeprefix("results/").format(**fields)


def _print_text(records: list[dict], metrics, args) -> None:
    from calbench.metrics import lookup

    resamples = recommend_label_shift.RESAMPLES if args.under_label_shift else args.resamples
    print(f"best method per source; [interval]: {args.level:.0%} percentile interval from {resamples} paired "
          "bootstrap resamples of the test rows (the same for every method; several seeds pooled; shifted by the "
          "bootstrap's estimate of bias, never below 0 for an ECE); 'tied with the "
          f"best': a paired test against the best cannot reject 'no difference' at family-wise α = {args.alpha:g} "
          "(Holm-adjusted p shown), 'worse': it can")
    if args.under_shift:
        print("ranked by the mean over the shifted test sets (docs/shift.md), the shift tables' 'under shift' "
              "column: each saved calibrator applied to each shifted set, every set's test rows resampled within "
              "each seed (shifted copies of the same rows together)")
    if args.under_label_shift:
        print(recommend_label_shift.NOTE)
    for metric in metrics:
        family, _ = lookup(metric)
        direction = "higher" if family.higher_is_better else "lower"
        print(f"\n{metric}{_scale_note(family)}, {direction} is better, values as in the tables")
        for source in dict.fromkeys(r["source"] for r in records if r["metric"] == metric):
            _print_source([r for r in records if r["metric"] == metric and r["source"] == source], family)


def _print_source(records: list[dict], family) -> None:
    """The best method with its interval; the methods tied with it and those worse (with adjusted p-values);
    its change of accuracy where it leaves uncal's interval; its saved calibrator."""
    best = records[0]
    line = f"{best['source']}: {best['method']} {_shown(family, best['estimate'])}{_interval(family, best)}"
    if best["low"] is None:
        line += f" (no interval: {best['note']})"
    print(line + ("; the only method" if len(records) == 1 else ""))
    others = records[1:]
    tested = [r for r in others if r["tied_with_best"] is not None]
    untested = [r for r in others if r["tied_with_best"] is None]
    listed = lambda group: ", ".join(f"{r['method']} {_shown(family, r['estimate'])}{_interval(family, r)} "  # noqa: E731
                                     f"(p = {r['p_value']:.2g})" for r in group) or "none"
    if tested:
        print(f"    tied with the best: {listed([r for r in tested if r['tied_with_best']])}")
        print(f"    worse than {best['method']}: {listed([r for r in tested if not r['tied_with_best']])}")
    if untested:
        print("    untested: " + ", ".join(f"{r['method']} {_shown(family, r['estimate'])}{_interval(family, r)}"
                                         for r in untested)
              + "".join(f" ({note})" for note in dict.fromkeys(r.get("note") for r in untested) if note))
    if best.get("acc_flag"):
        print(f"    note: {best['method']} {best['acc_flag']} accuracy by {100 * abs(best['acc_change']):.1f} points, "
              "beyond the interval of uncal's accuracy: it changes the classifier's decisions, not only its "
              "probabilities (check that this is wanted before deploying it)")
    saved = Path(best["calibrator"])
    print(f"    saved calibrator: {saved}" + ("" if saved.is_file() else " (missing: rerun the workflow)"))


def _shown(family, value) -> str:
    """``value`` as the tables show the metric (e.g. ECE ×100, the table's decimals)."""
    return f"{value * family.scale:.{family.decimals}f}" if value is not None and np.isfinite(value) else "n/a"


def _interval(family, record) -> str:
    """`` [low, high]`` of ``record`` as the tables show the metric; empty without one."""
    if record["low"] is None:
        return ""
    return f" [{_shown(family, record['low'])}, {_shown(family, record['high'])}]"


def _scale_note(family) -> str:
    return "" if family.scale == 1 else f" (×{family.scale:g})"
