"""``calbench recommend --under-label-shift``'s second part (docs/label_shift.md): after the ranking, per calibrator
and shift strength whether adaptation helps it (Δacc and Δnll with intervals, the weights' MSE, collapse;
:mod:`calbench.report.label_shift_adapt`), and a warning where it does not help the calibrator ranked first."""

from __future__ import annotations


def print_adaptation(results, records: list[dict], metric: str, estimator: str = "em") -> None:
    """Per source of the finished run in ``results``, each calibrator's adaptation by ``estimator`` at every shift
    strength (Δacc in points and Δnll with intervals, weight MSE, collapse share, verdict); a warning for the
    calibrator that ``records`` rank first by ``metric`` wherever adaptation does not help it, and for each calibrator
    whose adaptation collapsed."""
    import math
    from pathlib import Path

    import pandas as pd

    from calbench.jobs import paths
    from calbench.jobs.recommendation import under
    from calbench.report.label_shift import read_resamples
    from calbench.report.label_shift_adapt import ADAPT, DO_NOT, adaptations, signed_interval

    long = pd.read_csv(under(Path(results), paths.METRICS_LONG))
    keys = long[["source", "method", "seed"]].drop_duplicates().itertuples(index=False)
    files = [under(Path(results), paths.METRICS, source=s, method=m, seed=int(e)) for s, m, e in keys]
    resamples = read_resamples([f for f in files if f.is_file()])
    best = {r["source"]: r["method"] for r in records if r["metric"] == metric and r["best"] == r["method"]}
    found = [a for a in adaptations(long, resamples) if a.estimator == estimator]
    if not found:
        print(f"\nadapt or not: the run has no delta.acc.{estimator} (add it to label_shift.metrics)")
        return
    print(f"\nadapt or not ({estimator}): each calibrator adapted against its own unadapted outputs; Δacc in points "
          "and Δnll [95 % interval], weight MSE, share of sets collapsed, verdict")
    for source in dict.fromkeys(a.source for a in found):
        print(f"{source}:")
        for a in (a for a in found if a.source == source):
            acc, nll = a.delta_acc, a.delta_nll
            print(f"    {a.method:>10} {a.column:>20}: Δacc {signed_interval(acc, 100, 2, 'n/a')}, "
                  f"Δnll {signed_interval(nll, 1, 3, 'n/a')}, "
                  f"weight MSE {a.weight_mse:.4f}, collapsed "
                  f"{'n/a' if math.isnan(a.collapsed) else format(a.collapsed, '.0%')}: {a.verdict}")
        for a in (a for a in found if a.source == source):
            if a.method == best.get(source) and a.verdict != ADAPT:
                how = "hurts" if a.verdict == DO_NOT else "does not clearly help"
                print(f"    warning: {estimator} adaptation {how} {a.method} at {a.column} (Δacc "
                      f"{signed_interval(a.delta_acc, 100, 2, 'n/a')} points): recommended under label shift only "
                      "with that caveat; "
                      "compare its unadapted outputs")
            elif a.collapsed > 0:  # NaN (not computed) compares False
                print(f"    warning: {estimator} collapsed on {a.collapsed:.0%} of {a.method}'s sets at {a.column}")

