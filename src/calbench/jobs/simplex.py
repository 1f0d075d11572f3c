"""The simplex-map job (config key ``figures.simplex``, docs/figures_and_studies.md); the drawing is in
:mod:`calbench.report.simplex`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import softmax

from calbench.data import splits, store
from calbench.data.entry import Source
from calbench.jobs import paths
from calbench.jobs.keys import runs_on
from calbench.jobs.spec import JobSpec, as_params, infile, outfile, param
from calbench.report.simplex import simplex_figure


@dataclass(frozen=True, kw_only=True)
class SimplexSpec(JobSpec):
    """The simplex maps of one source's first seed (the LECE paper draws seed 0; rule simplex_map): each method's
    (``calibrated``: ``{method: calibrated .h5}``) and, on synthetic sources, the true map."""

    source: str
    seed: int = param()
    split: dict | None = param()
    divisions: int = param()
    methods: list = param()
    calibrated: dict = infile()
    dump: str = infile()
    figure: str = outfile()


def spec(config: dict, *, source: str) -> SimplexSpec:
    section, entry = config["figures"]["simplex"], Source.of(config, source)
    seed = entry.seeds[0]
    methods = [m for m in section["methods"] if runs_on(m, entry)]
    return SimplexSpec(source=source, seed=seed, split=as_params(entry.split), divisions=section["divisions"],
                       methods=methods,
                       calibrated={m: paths.CALIBRATED.format(source=source, method=m, seed=seed) for m in methods},
                       dump=paths.DUMP.format(source=source), figure=paths.SIMPLEX_FIGURE.format(source=source))


def simplex_job(*, spec: SimplexSpec) -> None:
    """Maps of each method and, on synthetic sources, the true map."""
    dump, seed = spec.dump, spec.seed
    data = splits.load_split(dump, seed, spec.split)
    p_hat = softmax(data["test"]["logits"].astype(np.float64), axis=1)
    maps = {}
    for method, path in spec.calibrated.items():
        out = store.read_calibrated(path, "test")
        if not np.array_equal(out["index"], data["test_index"]):
            raise ValueError(f"{path}: its test rows are not those of {dump} for seed {seed}; rerun its calibrate job")
        maps[method] = out["probs"]
    if "true_probs" in data["test"]:
        maps["true map"] = data["test"]["true_probs"]
    simplex_figure(p_hat, maps, spec.figure, spec.source, spec.divisions)
