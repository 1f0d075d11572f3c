"""The simplex-map job (config key ``figures.simplex``, docs/figures_and_studies.md); the drawing is in
:mod:`calbench.report.simplex`."""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from calbench.data import splits, store
from calbench.report.simplex import simplex_figure


def simplex_job(calibrated: dict[str, str], dump, figure, source: str, seed: int, split: dict | None,
                divisions: int) -> None:
    """Maps of each method (``{method: calibrated .h5}``) and, on synthetic sources, the true map."""
    data = splits.load_split(dump, seed, split)
    p_hat = softmax(data["test"]["logits"].astype(np.float64), axis=1)
    maps = {}
    for method, path in calibrated.items():
        out = store.read_calibrated(path, "test")
        if not np.array_equal(out["index"], data["test_index"]):
            raise ValueError(f"{path}: its test rows are not those of {dump} for seed {seed}; rerun its calibrate job")
        maps[method] = out["probs"]
    if "true_probs" in data["test"]:
        maps["true map"] = data["test"]["true_probs"]
    simplex_figure(p_hat, maps, figure, source, divisions)
