"""The reliability-diagram job (config key ``figures.reliability``, docs/figures_and_studies.md); the drawing is
in :mod:`calbench.report.reliability`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calbench.data import store
from calbench.data.entry import Source
from calbench.jobs import paths
from calbench.jobs.keys import runs_on
from calbench.jobs.spec import JobSpec, infile, outfile, param
from calbench.report.plotting import write_csv
from calbench.report.reliability import panels_table, pooled_pairs, reliability_figure, reliability_panel


@dataclass(frozen=True, kw_only=True)
class ReliabilitySpec(JobSpec):
    """The reliability diagram of one source and target (``conf`` or ``cw``; rule reliability_diagram):
    ``calibrated``: ``{method: [calibrated .h5 of each seed in seeds]}``, pooled; the bins, scheme, classes and axis
    are config key ``figures.reliability``'s, ``class_names`` the source's (the figures name the classes by them)."""

    source: str
    target: str
    seeds: list = param()
    n_bins: int = param()
    scheme: str = param()
    max_classes: int = param()
    axis: str = param("auto")
    class_names: list | None = param()
    calibrated: dict = infile()
    figure: str = outfile()
    table: str = outfile()


def spec(config: dict, *, source: str, target: str) -> ReliabilitySpec:
    section, entry = config["figures"]["reliability"], Source.of(config, source)
    seeds = section.get("seeds") or entry.seeds  # default: every seed of the source
    return ReliabilitySpec(
        source=source, target=target, seeds=list(seeds), n_bins=section["bins"], scheme=section["scheme"],
        max_classes=section["max_classes"], axis=section["axis"], class_names=entry.entry.get("class_names"),
        calibrated={m: [paths.CALIBRATED.format(source=source, method=m, seed=seed) for seed in seeds]
                    for m in section["methods"] if runs_on(m, entry)},
        figure=paths.RELIABILITY_FIGURE.format(source=source, target=target),
        table=paths.RELIABILITY_TABLE.format(source=source, target=target))


def reliability_job(*, spec: ReliabilitySpec) -> None:
    """Diagram of each method's pooled test predictions + the CSV of what is drawn."""
    panels, logit_axis, limits = reliability_panels(spec=spec)
    write_csv(panels_table(panels, spec.seeds), spec.table)
    reliability_figure(panels, spec.target, spec.figure, spec.source, spec.seeds, spec.n_bins, spec.scheme,
                       logit_axis, limits)


def reliability_panels(*, spec: ReliabilitySpec) -> tuple[list, bool, tuple[float, float]]:
    """Each method's panel of the pooled test predictions of ``spec.calibrated``, whether the axes are logit-scaled
    (``spec.axis``, or chosen from the scores where ``auto``) and the axis limits, one for every panel."""
    from calbench.report.smooth_reliability import axis_range, choose_logit_axis

    outputs = {method: [_test_outputs(path) for path in files] for method, files in spec.calibrated.items()}
    every = np.concatenate([pooled_pairs(o, spec.target)[0] for o in outputs.values()]) if outputs else np.zeros(1)
    logit_axis = choose_logit_axis(every) if spec.axis == "auto" else spec.axis == "logit"
    limits = axis_range(every, logit_axis)
    panels = [reliability_panel(method, o, spec.target, spec.n_bins, spec.scheme, logit_axis, limits,
                                spec.max_classes, spec.class_names)
              for method, o in outputs.items()]
    return panels, logit_axis, limits


def _test_outputs(path) -> tuple[np.ndarray, np.ndarray]:
    out = store.read_calibrated(path, "test")
    return out["probs"], out["labels"]
