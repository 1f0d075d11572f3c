"""``calbench recommend --under-label-shift``: rank the calibrators by a metric after EM prior adaptation, averaged
over the label-shifted test sets of each seed (docs/label_shift.md), with the paired bootstrap and the tests of
``calbench recommend`` (:mod:`calbench.report.paired_bootstrap`) on the resamples that the evaluate jobs drew of
each set's rows (:mod:`calbench.report.label_shift`)."""

from __future__ import annotations

from calbench.report.paired_bootstrap import TABLE_RESAMPLES as RESAMPLES

NOTE = (f"ranked by the mean over the label-shifted test sets of each seed (docs/label_shift.md), a metric given "
        f"without an adaptation suffix taken after EM (nll → nll.em); the {RESAMPLES} resamples of every set's rows "
        "(drawn within classes, the priors re-estimated on each) are the evaluate jobs', so --resamples and "
        "--recompute do not apply")


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
