"""docs/conformal.md is what scripts/conformal.py writes from its recorded summary (the run is not repeated here),
and that summary covers every network, calibrator, metric and seed the script names."""

from __future__ import annotations

import json

import pytest

from conftest import load_script

conformal_page = load_script("conformal")


@pytest.fixture(scope="module")
def summary():
    return json.loads(conformal_page.SUMMARY.read_text())


def test_committed_page_is_the_generated_one(summary):
    assert conformal_page.PAGE.read_text() == conformal_page.page(summary), \
        "docs/conformal.md is out of date: run python scripts/conformal.py render"
    assert conformal_page.FIGURE.is_file()


def test_summary_covers_the_run(summary):
    seen = {(r["network"], r["method"], r["metric"], r["seed"]) for r in summary["records"]}
    assert seen == {(n, m, metric, s) for n in conformal_page.NETWORKS for m in conformal_page.METHODS
                    for metric in conformal_page.METRICS for s in conformal_page.SEEDS}
    for network in conformal_page.NETWORKS:
        sweep = summary["sweep"][network]
        assert [p["temperature"] for p in sweep["points"]] == list(conformal_page.SWEEP)
        assert sweep["ts_temperature"] > 0


def test_coverage_holds_for_every_calibrator(summary):
    # split-conformal APS covers 1 − α = 0.9 whatever the probabilities (Romano et al. 2020, Thm. 1): each recorded
    # mean over 20 divisions of 2,500 evaluation rows lies within 0.9 ± 0.02
    coverages = [r["value"] for r in summary["records"] if r["metric"] == "coverage.aps.a10"]
    assert coverages and all(abs(c - 0.9) < 0.02 for c in coverages)
