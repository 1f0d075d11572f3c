"""The evaluate rule computes the new metric ids, with bootstrap intervals switched on in config."""

from __future__ import annotations

import json

import pytest

from conftest import run_snakemake


@pytest.mark.workflow
def test_workflow_writes_new_metrics_with_bootstrap_intervals(tmp_path):
    config = {
        "seeds": [0],
        "sources": {"tiny": {"type": "synthetic", "task": "lece3", "n_cal": 400, "n_test": 500}},
        "methods": ["uncal", "beta"],
        "metrics": ["acc", "ece.conf.cv.l1", "ece_gain.l2", "cmee.conf.platt.l1", "kde_ece.conf.l1"],
        "bootstrap": {"samples": 20, "level": 0.9},
        "figures": None,  # the metrics are the point: no reliability diagrams
    }
    run_snakemake(tmp_path, config)
    record = json.loads((tmp_path / "results/metrics/tiny/beta/seed0.json").read_text())
    for metric_id in config["metrics"]:  # basic (pivotal) intervals, the default
        assert record[f"{metric_id}.ci_low"] < record[f"{metric_id}.ci_high"], metric_id
    uncal = json.loads((tmp_path / "results/metrics/tiny/uncal/seed0.json").read_text())
    assert uncal["ece_gain.l2"] == pytest.approx(0.0, abs=1e-9)
    assert (tmp_path / "results/tables/ece_gain.l2.md").exists()
