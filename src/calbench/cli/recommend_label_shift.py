"""``calbench recommend --under-label-shift``: rank the calibrators by a metric after EM prior adaptation, averaged
over the label-shifted test sets of each seed (docs/label_shift.md), with the paired bootstrap and the tests of
``calbench recommend`` (:mod:`calbench.report.paired_bootstrap`) on the resamples that the evaluate jobs drew of
each set (:mod:`calbench.report.label_shift`); then, per calibrator and shift strength, whether adaptation helps it
(Δacc and Δnll with intervals, the weights' MSE, collapse; :mod:`calbench.report.label_shift_adapt`), and a warning
where it does not help the recommended calibrator."""

from __future__ import annotations

from calbench.report.paired_bootstrap import TABLE_RESAMPLES as RESAMPLES

NOTE = (f"ranked by the mean over the label-shifted test sets of each seed (docs/label_shift.md), a metric given "
        f"without an adaptation suffix taken after EM (nll → nll.em); the {RESAMPLES} resamples of every set (each "
        "redrawn from resampled test rows, the weights re-estimated on each) are the evaluate jobs', so --resamples "
        "and --recompute do not apply")


def add_argument(parser) -> None:
    parser.add_argument("--under-label-shift", action="store_true",
                        help="rank by the mean over the label-shifted test sets after EM prior adaptation "
                             "(--metric nll ranks by nll.em; name nll.bbse, nll.oracle or acc.em explicitly)")


def adapted_metric(metric: str) -> str:
    """``metric`` itself where it is an adaptation metric (``nll.bbse``, ``prior_mse.em``), else ``metric.em``."""
    from calbench.metrics import lookup

    return metric if lookup(metric)[0].needs_label_shift else f"{metric}.em"


def label_shift_view(long, args):
    """The long table's per-seed means over the label-shifted sets; ``args.metric`` made an adaptation metric."""
    from calbench.report.label_shift import label_shift_rows

    args.metric = adapted_metric(args.metric)
    return label_shift_rows(long)


def label_shift_draws_of(source: str, rows, metrics, metric_files):
    """The engine's draws of ``source`` from per-seed means ``rows`` and the resamples in the run's metrics JSONs
    ``metric_files`` (none where a file is missing)."""
    from calbench.report.label_shift import label_shift_draws, read_resamples

    return label_shift_draws(source, rows, metrics, read_resamples([f for f in metric_files if f.is_file()]))


def print_adaptation(long, metric_files, best: dict[str, str], estimator: str = "em") -> None:
    """Per source, each calibrator's adaptation by ``estimator`` at every shift strength (Δacc in points and Δnll
    with intervals, weight MSE, collapse share, verdict); a warning for the recommended calibrator ``best[source]``
    wherever adaptation does not help it, and for each calibrator whose adaptation collapsed."""
    import math

    from calbench.report.label_shift import read_resamples
    from calbench.report.label_shift_adapt import ADAPT, DO_NOT, adaptations

    resamples = read_resamples([f for f in metric_files if f.is_file()])
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
            print(f"    {a.method:>10} {a.column:>20}: Δacc {_triple(acc, 100, 2)}, Δnll {_triple(nll, 1, 3)}, "
                  f"weight MSE {a.weight_mse:.4f}, collapsed "
                  f"{'n/a' if math.isnan(a.collapsed) else format(a.collapsed, '.0%')}: {a.verdict}")
        for a in (a for a in found if a.source == source):
            if a.method == best.get(source) and a.verdict != ADAPT:
                how = "hurts" if a.verdict == DO_NOT else "does not clearly help"
                print(f"    warning: {estimator} adaptation {how} {a.method} at {a.column} (Δacc "
                      f"{_triple(a.delta_acc, 100, 2)} points): recommended under label shift only with that caveat; "
                      "compare its unadapted outputs")
            elif a.collapsed > 0:  # NaN (not computed) compares False
                print(f"    warning: {estimator} collapsed on {a.collapsed:.0%} of {a.method}'s sets at {a.column}")


def _triple(triple, scale: float, decimals: int) -> str:
    import math

    estimate, low, high = triple
    if math.isnan(estimate):
        return "n/a"
    text = f"{estimate * scale:+.{decimals}f}"
    return text if math.isnan(low) else f"{text} [{low * scale:+.{decimals}f}, {high * scale:+.{decimals}f}]"
