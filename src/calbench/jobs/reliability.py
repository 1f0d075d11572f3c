"""The reliability-diagram job (config key ``figures.reliability``, docs/figures_and_studies.md); the drawing is
in :mod:`calbench.report.reliability`."""

from __future__ import annotations

import numpy as np

from calbench.data import store
from calbench.report.plotting import write_csv
from calbench.report.reliability import panels_table, pooled_pairs, reliability_figure, reliability_panel


def reliability_job(calibrated: dict[str, list[str]], figure, table, target: str, source: str, seeds, n_bins: int,
                    scheme: str, max_classes: int, axis: str = "auto", class_names=None) -> None:
    """Diagram of each method's test predictions (``{method: [calibrated .h5 of each seed in seeds]}``, pooled)
    + the CSV of what is drawn; the bins, scheme, classes and axis are config key ``figures.reliability``'s,
    ``class_names`` the source's."""
    from calbench.report.smooth_reliability import axis_range, choose_logit_axis

    outputs = {method: [_test_outputs(path) for path in files] for method, files in calibrated.items()}
    every = np.concatenate([pooled_pairs(o, target)[0] for o in outputs.values()]) if outputs else np.zeros(1)
    logit_axis = choose_logit_axis(every) if axis == "auto" else axis == "logit"
    limits = axis_range(every, logit_axis)
    panels = [reliability_panel(method, o, target, n_bins, scheme, logit_axis, limits, max_classes, class_names)
              for method, o in outputs.items()]
    write_csv(panels_table(panels, seeds), table)
    reliability_figure(panels, target, figure, source, seeds, n_bins, scheme, logit_axis, limits)


def _test_outputs(path) -> tuple[np.ndarray, np.ndarray]:
    out = store.read_calibrated(path, "test")
    return out["probs"], out["labels"]
