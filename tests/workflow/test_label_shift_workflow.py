"""Label shift in the workflow (docs/label_shift.md): adding `label_shift` to a source schedules its evaluations and
tables but no calibrate job; the label-shifted sets reach the metrics, the long table and the per-strength tables."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from calbench.stats.resampling import RESAMPLES
from conftest import run_snakemake
from workflow_helpers import run_then_configure

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("label_shift")]

CLASSES = 4
LABEL_SHIFT = {"dirichlet": [0.3], "tweak_one": [0.7], "draws": 2,
               "metrics": ["acc", "nll", "nll.em", "acc.em", "acc.oracle", "prior_mse.em", "prior_mse.bbse",
                           "delta.acc.em", "delta.nll.em", "weight_mse.em", "collapse.em", "acc.rlls", "acc.bbse_soft"]}


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
    # one seed: each evaluate job adapts on every resample of every set (its cost); seeds are bookkeeping that the
    # shift and job-path runs cover
    return {"seeds": [0], "sources": {"mine": entry}, "methods": ["uncal", "ts", "bcts"], "metrics": ["acc", "nll"]}


@pytest.fixture(scope="module")
def configured(tmp_path_factory):
    """A complete run without label shift, then the same config with one (not yet run), and the jobs it plans."""
    work = tmp_path_factory.mktemp("label_shift")
    return run_then_configure(work, _config(work, label_shift=False), _config(work, label_shift=True))


@pytest.fixture
def done(configured):
    return configured[0]


def test_adding_a_label_shift_reruns_evaluations_and_no_calibrate_job(configured):
    _, planned = configured
    assert {rule for rule, _ in planned} == {"evaluate", "aggregate", "runtime_table", "label_shift_report"}
    assert {w for rule, w in planned if rule == "evaluate"} == {f"mine/{m}/{s}" for m in ("uncal", "ts", "bcts")
                                                                 for s in (0,)}


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
    resamples = records["ts"]["label_shift_resamples"]["sets"]
    assert set(resamples) == {"dirichlet0.3", "tweak_one0.7"}
    assert len(resamples["dirichlet0.3"]["nll.em"]) == RESAMPLES
    # the paper's headline scores and the adapt-or-not verdict per calibrator and strength
    assert shifted["delta.acc.em"] == pytest.approx(shifted["acc.em"] - shifted["acc"])
    assert shifted["weight_mse.em"] >= 0 and shifted["collapse.em"] in (0.0, 1.0)
    adapt = (done / "results/tables/label_shift/adapt_or_not.md").read_text()
    assert "| method | estimator | shift | Δacc (points) | Δnll |" in adapt
    assert re.search(r"\| bcts \| em \| tweak-one ρ=0.7 \| [+-][0-9.]+ \[[+-][0-9.]+, [+-][0-9.]+\] \|", adapt), adapt
    # the clean tables are still computed from the clean test set alone
    clean = long[(long["test_set"] == "clean") & (long["metric"] == "nll") & (long["method"] == "ts")]
    assert f"{clean['value'].mean():.3f}" in (done / "results/tables/nll.md").read_text()


def _reduced_shipped_config(work) -> dict:
    """config/label_shift.yaml as shipped, reduced to run in a test: its CIFAR-10 ResNet-20 download source (served
    from the download cache, filled from ../shared/data: the sha256 is checked as a download's), seed 0, one draw
    per shift strength and one strength of each kind (the first Dirichlet α, the last tweak-one ρ); its methods,
    metrics and split unchanged. (Each evaluate job adapts on 200 resamples of every set: 41 CPU-s with all five
    strengths on this source; a CIFAR-100 source's takes about 30 CPU-s a set.)"""
    import shutil

    import yaml

    from conftest import REPO, shared_data

    shipped = yaml.safe_load((REPO / "config" / "label_shift.yaml").read_text())
    cache = work / "downloads"
    cache.mkdir()
    sources = {}
    for name in ("cifar10_resnet-20",):
        entry = shipped["sources"][name]
        for file in entry["files"].values():
            local = shared_data("logits", name, file["url"].rsplit("/", 1)[-1])
            shutil.copy(local, cache / f"{file['sha256'][:16]}-{local.name}")
        shifts = entry["label_shift"]
        sources[name] = {**entry, "label_shift": {**shifts, "draws": 1, "dirichlet": shifts["dirichlet"][:1],
                                                  "tweak_one": shifts["tweak_one"][-1:]}}
    return {**shipped, "seeds": [0], "sources": sources, "downloads_dir": str(cache)}


@pytest.fixture(scope="module")
def shipped_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("label_shift_shipped")
    run_snakemake(work, _reduced_shipped_config(work))
    return work


def test_the_shipped_label_shift_config_runs_end_to_end(shipped_run, capsys):
    from calbench.__main__ import main
    from calbench.config import load

    config = load(shipped_run / "config.yaml")
    strengths = {f"Dirichlet α={a:g}" for a in config["sources"]["cifar10_resnet-20"]["label_shift"]["dirichlet"]}
    for metric_id in config["sources"]["cifar10_resnet-20"]["label_shift"]["metrics"]:
        table = (shipped_run / f"results/tables/label_shift/{metric_id}.md").read_text()
        rows = [line for line in table.splitlines() if line.startswith("| ") and "method" not in line]
        assert strengths <= set(table.splitlines()[4].split(" | ")), metric_id
        assert len(rows) == len(config["methods"]), metric_id  # every method
        if not metric_id.startswith("collapse."):  # a 0/1 flag per set: its share of sets, without resamples
            assert all(" [" in cell for row in rows for cell in row.split(" | ")[1:]), metric_id  # every interval
    assert main(["recommend", str(shipped_run / "results"), "--under-label-shift"]) == 0
    out = capsys.readouterr().out
    assert "nll.em, lower is better" in out
    assert re.search(r"\ncifar10_resnet-20: \w+ [0-9.]+ \[[0-9.]+, [0-9.]+\]\n    tied with the best: ", out), out
    # per calibrator and strength: Δacc with its interval, the weights' MSE, collapse and the verdict
    assert re.search(r"\n +ts +Dirichlet α=0.1: Δacc \+[0-9.]+ \[[+-][0-9.]+, [+-][0-9.]+\], Δnll -[0-9.]+ "
                     r"\[.*\], weight MSE [0-9.]+, collapsed 0%: (adapt|no clear change|do not adapt)\n", out), out
