"""Out-of-distribution sets (docs/shift.md; Ovadia et al. 2019, §4.1 and Fig. 3): the detection metrics, the config
checks, and a run on imported logits to the table and figure."""

import json
import re

import numpy as np
import pytest
import yaml

from calbench.config import ConfigError, load
from calbench.metrics.ood import confidence_curve, fpr_at_tpr, ood_metrics
from conftest import run_snakemake, user_config
from workflow_helpers import planned_jobs


def test_ood_auroc_is_scikit_learns_with_the_test_rows_as_positives():
    """``calbench.metrics.selective.auroc`` (Mann-Whitney with midranks) on the confidence scores, ties included."""
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    top_in, top_out = rng.integers(2, 20, 300) / 20, rng.integers(2, 20, 200) / 20 - 0.05
    inside = np.c_[top_in, 1 - top_in]
    outside = np.c_[top_out, 1 - top_out]
    expected = sklearn_metrics.roc_auc_score(np.r_[np.ones(300), np.zeros(200)], np.r_[inside.max(1), outside.max(1)])
    assert ood_metrics(inside, outside)["auroc.maxprob"] == pytest.approx(expected)


def test_fpr_at_95_tpr_takes_the_threshold_that_keeps_95_percent_of_the_positives():
    positive = np.arange(1, 101) / 100.0  # the threshold keeping 95 of them: 0.06
    negative = np.array([0.0, 0.05, 0.06, 0.5, 0.99])
    assert fpr_at_tpr(positive, negative) == pytest.approx(3 / 5)


def test_ood_metrics_of_max_probability_and_entropy():
    """Confident test rows against flat OOD rows: both scores separate them perfectly."""
    inside = np.tile([0.9, 0.05, 0.05], (10, 1))
    outside = np.full((5, 3), 1 / 3)
    assert ood_metrics(inside, outside) == {"auroc.maxprob": 1.0, "fpr95.maxprob": 0.0, "auroc.entropy": 1.0,
                                            "fpr95.entropy": 0.0}


def test_confidence_curve_as_ovadia_fig3():
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])
    curve = confidence_curve(probs, np.array([0, 1, 1]), np.array([[0.7, 0.3]]), np.array([0.0, 0.65, 0.95]))
    np.testing.assert_allclose(curve["accuracy"], [2 / 3, 1.0, np.nan])
    np.testing.assert_allclose(curve["in_share"], [1.0, 2 / 3, 0.0])
    np.testing.assert_allclose(curve["out_share"], [1.0, 1.0, 0.0])


MODEL = {"type": "train", "dataset": "digits", "model": "timm:vit_tiny_patch16_224",
         "sizes": {"train": 100, "cal": 50, "test": 50}}


@pytest.mark.parametrize("source, message", [
    ({**MODEL, "ood": {"same": {"dataset": "digits"}}},
     r"sources.m.ood.same.dataset: digits is the source's own dataset; an out-of-distribution set is another one"),
    ({"type": "synthetic", "task": "lece3", "n_cal": 10, "n_test": 10, "ood": {"x": {"noise": "uniform"}}},
     r"sources.m.ood: out-of-distribution sets belong to train/pretrained sources"),
    ({**MODEL, "ood": {"n": {"noise": "gaussian"}}}, r"sources.m.ood.n"),
])
def test_bad_ood_sets_are_refused_naming_the_field(source, message):
    with pytest.raises(ConfigError, match=message):
        load({"sources": {"m": source}, "methods": ["ts"], "metrics": ["acc"]})


@pytest.mark.parametrize("logits, message", [
    (None, r"sources.my_model.ood.x.logits: .*gone.npy does not exist"),
    (np.random.default_rng(0).normal(size=(20, 7)),
     r"sources.my_model.ood.x.logits: 7 classes, but the source's other files have \[5\]"),
    (np.full((20, 5), np.nan), r"sources.my_model.ood.x.logits"),
])
def test_validate_checks_an_import_sources_ood_logits(logits, message, tmp_path, capsys):
    from calbench.__main__ import main

    config = user_config(tmp_path, rows=400)
    path = tmp_path / ("gone.npy" if logits is None else "ood.npy")
    if logits is not None:
        np.save(path, logits.astype(np.float32))
    config["sources"]["my_model"]["ood"] = {"x": {"logits": str(path)}}
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config))
    assert main(["validate", str(tmp_path / "my.yaml")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), lines


@pytest.mark.workflow
def test_a_model_sources_ood_sets_plan_their_dump_and_evaluations_but_no_calibration(tmp_path):
    config = {"seeds": [0], "sources": {"m": {**MODEL, "split": {"cal_size": 50},
                                              "ood": {"mnist": {"dataset": "mnist5k"}, "noise": {"noise": "uniform"}}}},
              "methods": ["ts"], "metrics": ["acc"]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    planned = planned_jobs(tmp_path)
    assert {("dump_ood_model", "m"), ("evaluate_ood", "m/ts/0"), ("ood_report", "")} <= planned


@pytest.mark.workflow
def test_an_import_sources_ood_logits_are_evaluated_tabulated_and_drawn(tmp_path):
    """Imported logits and flatter OOD logits: every method's AUROC is well above one half; adding the OOD set to a
    finished run plans no calibration."""
    config = user_config(tmp_path, rows=400) | {"figures": None}  # no reliability diagrams: the OOD figure is its own
    run_snakemake(tmp_path / "run", config)
    flat = np.random.default_rng(5).normal(scale=0.3, size=(150, 5)).astype(np.float32)
    np.save(tmp_path / "ood_logits.npy", flat)
    config["sources"]["my_model"]["ood"] = {"flat": {"logits": str(tmp_path / "ood_logits.npy")}}
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(config))
    rules = {rule for rule, _ in planned_jobs(tmp_path / "run")}
    assert rules == {"dump_ood_source", "evaluate_ood", "ood_report"}
    run_snakemake(tmp_path / "run", None)
    record = json.loads((tmp_path / "run/results/ood/my_model/ts/seed0.json").read_text())
    assert record["flat"]["auroc.maxprob"] > 0.8 and len(record["flat"]["curve"]["threshold"]) == 101
    table = (tmp_path / "run/results/tables/ood.md").read_text()
    assert "**my_model, OOD set flat** (1 seed)" in table and "| ts | " in table
    assert (tmp_path / "run/results/figures/ood/my_model.png").stat().st_size > 10_000
