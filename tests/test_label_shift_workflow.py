"""Label shift in the workflow (docs/label_shift.md): adding `label_shift` to a source schedules its evaluations and
tables but no calibrate job; the label-shifted sets reach the metrics, the long table and the per-strength tables."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import run_snakemake
from workflow_helpers import planned_jobs, run_then_configure

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("label_shift")]

CLASSES = 4
LABEL_SHIFT = {"dirichlet": [0.3], "tweak_one": [0.7], "draws": 2, "metrics": ["acc", "nll", "nll.em", "acc.oracle",
                                                                                 "prior_mse.em", "prior_mse.bbse"]}


def _config(folder, label_shift: bool) -> dict:
    rng = np.random.default_rng(0)
    calibrated = rng.normal(scale=1.5, size=(800, CLASSES))
    probs = np.exp(calibrated) / np.exp(calibrated).sum(1, keepdims=True)
    labels = (rng.random(800)[:, None] > probs.cumsum(1)).sum(1)
    np.save(folder / "logits.npy", (2.0 * calibrated).astype(np.float32))
    np.save(folder / "labels.npy", labels)
    entry = {"type": "import", "format": "npy", "split": {"cal_size": 400},
             "files": {"logits": str(folder / "logits.npy"), "labels": str(folder / "labels.npy")}}
    if label_shift:
        entry["label_shift"] = LABEL_SHIFT
    return {"seeds": [0, 1], "sources": {"mine": entry}, "methods": ["uncal", "ts", "bcts"], "metrics": ["acc", "nll"]}


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """A complete run without label shift, then the same config with one (not yet run)."""
    work = tmp_path_factory.mktemp("label_shift")
    return run_then_configure(work, _config(work, label_shift=False), _config(work, label_shift=True))


def test_adding_a_label_shift_reruns_evaluations_and_no_calibrate_job(done):
    planned = planned_jobs(done)
    assert {rule for rule, _ in planned} == {"evaluate", "aggregate", "runtime_table", "label_shift_report"}
    assert {w for rule, w in planned if rule == "evaluate"} == {f"mine/{m}/{s}" for m in ("uncal", "ts", "bcts")
                                                                 for s in (0, 1)}


def test_label_shifted_sets_are_evaluated_and_tabulated(done):
    run_snakemake(done, None)
    names = {f"prior/{kind}/{i}" for kind in ("dirichlet0.3", "tweak_one0.7") for i in (0, 1)}
    records = {m: json.loads((done / f"results/metrics/mine/{m}/seed0.json").read_text()) for m in ("ts", "bcts")}
    assert set(records["ts"]["shifts"]) == names
    assert set(records["ts"]["shifts"]["prior/tweak_one0.7/0"]) == set(LABEL_SHIFT["metrics"])
    # the same draws for every method of a seed: TS keeps uncal's argmax, so their unadapted accuracies are equal
    uncal = json.loads((done / "results/metrics/mine/uncal/seed0.json").read_text())
    assert all(uncal["shifts"][n]["acc"] == records["ts"]["shifts"][n]["acc"] for n in names)
    # a calibrated model (TS on a planted temperature) under a strong tweak: the oracle priors help
    shifted = records["ts"]["shifts"]["prior/tweak_one0.7/0"]
    assert shifted["acc.oracle"] >= shifted["acc"]
    assert shifted["prior_mse.em"] < 0.01
    long = pd.read_csv(done / "results/tables/metrics_long.csv")
    assert set(long["test_set"]) == {"clean"} | names
    table = (done / "results/tables/label_shift/nll.em.md").read_text()
    assert "| method | Dirichlet α=0.3 | tweak-one ρ=0.7 |" in table
    assert "| ts | " in table and " [" in table  # the paired bootstrap's interval of every cell
    resamples = records["ts"]["label_shift_resamples"]
    assert set(resamples) == {"dirichlet0.3", "tweak_one0.7"} and len(resamples["dirichlet0.3"]["nll.em"]) == 200
    # the clean tables are still computed from the clean test set alone
    clean = long[(long["test_set"] == "clean") & (long["metric"] == "nll") & (long["method"] == "ts")]
    assert f"{clean['value'].mean():.3f}" in (done / "results/tables/nll.md").read_text()
