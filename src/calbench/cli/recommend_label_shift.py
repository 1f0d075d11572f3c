"""``calbench recommend --under-label-shift``: rank the calibrators by a metric after EM prior adaptation, averaged
over the label-shifted test sets of each seed (docs/label_shift.md), from the per-seed values of the long table."""

from __future__ import annotations

NOTE = ("ranked by the mean over the label-shifted test sets of each seed (docs/label_shift.md), a metric given "
        "without an adaptation suffix taken after EM (nll → nll.em); no intervals or tests: the adapted outputs are "
        "not kept")


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
