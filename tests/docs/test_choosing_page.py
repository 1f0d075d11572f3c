"""docs/choosing.md is what scripts/choosing.py writes from its recorded summary (the measured runs are not
repeated here), and its advice is chosen on the choice sources alone."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import yaml

from conftest import REPO, SNAKEMAKE, load_script, shared_data

choosing = load_script("choosing")


@pytest.fixture(scope="module")
def summary():
    return json.loads(choosing.SUMMARY.read_text())


def test_committed_page_is_the_generated_one(summary):
    assert choosing.PAGE.read_text() == choosing.page(summary), \
        "docs/choosing.md is out of date: run python scripts/choosing.py render"


def test_summary_covers_the_config(summary):
    """Every source × method × shown metric of scripts/choosing.yaml has a record with an interval, and the two
    parts split the sources."""
    config = yaml.safe_load(choosing.CONFIG.read_text())
    assert set(choosing.CHOOSE) | set(choosing.HELD_OUT) == set(config["sources"]) == set(summary["sources"])
    assert not set(choosing.CHOOSE) & set(choosing.HELD_OUT)
    assert any(d.startswith("tabular") for s, d in choosing.DESCRIBED.items() if s in choosing.CHOOSE)
    assert summary["seeds"] == config["seeds"]
    seen = {(r["source"], r["method"], r["metric"]) for r in summary["records"] if r["low"] is not None}
    for source in config["sources"]:
        for method in config["methods"]:
            for metric in choosing.SHOWN:
                assert (source, method, metric) in seen


def test_choice_reads_only_the_choice_part(summary):
    """Reversing every held-out ranking leaves the advice unchanged."""
    records = copy.deepcopy(summary["records"])
    for r in records:
        if r["source"] in choosing.HELD_OUT:
            r["estimate"], r["tied_with_best"] = -r["estimate"], not r["tied_with_best"]
    held_out_last = sorted(records, key=lambda r: r["source"] in choosing.HELD_OUT and -r["estimate"])
    assert choosing.choose(held_out_last) == choosing.choose(summary["records"])


def _records(rankings: dict[str, list[tuple[str, bool]]]) -> list[dict]:
    return [{"source": s, "metric": choosing.PRIMARY, "method": m, "estimate": float(i), "low": 0.0, "high": 1.0,
             "best": ranked[0][0], "tied_with_best": t, "p_value": None, "acc_change": 0.0}
            for s, ranked in rankings.items() for i, (m, t) in enumerate(ranked)]


def test_choice_is_most_ties_then_mean_rank():
    a, b, c = choosing.CHOOSE
    rankings = {a: [("ts", True), ("vs", True), ("irm", False)],
                b: [("irm", True), ("vs", True), ("ts", False)],
                c: [("ts", True), ("irm", False), ("vs", False)]}
    assert choosing.choose(_records(rankings)) == {"pick": "ts", "ties": 2, "mean_rank": pytest.approx(5 / 3)}
    rankings[c] = [("irm", True), ("vs", True), ("ts", False)]  # vs tied on 3 beats irm's lower rank on 2
    assert choosing.choose(_records(rankings))["pick"] == "vs"


def test_accuracy_rule_is_recommends(summary):
    """The page's accuracy note agrees with ``calbench recommend``'s flag on every source's NLL winner."""
    for source in summary["sources"]:
        best = choosing.by_source(summary["records"], choosing.PRIMARY, [source])[source][0]
        assert choosing.accuracy_moves(summary["records"], source, best["method"]) == best["acc_flag"]


def test_tabular_logits_are_out_of_fold_and_deterministic():
    for name in choosing.TABULAR:
        logits, labels = choosing.tabular_logits(name)
        assert logits.shape == (569, 2) and labels.shape == (569,) and np.isfinite(logits).all()
        assert 0.9 < (logits.argmax(1) == labels).mean() < 0.99  # out-of-fold: not the training fit's ~1.0
        np.testing.assert_array_equal(logits, choosing.tabular_logits(name)[0])


@pytest.mark.workflow
def test_config_passes_a_dry_run_with_its_inputs(tmp_path):
    """scripts/choosing.yaml names the inputs ``prepare`` puts in place (the configs of config/ are checked alike
    by tests/workflow/test_job_specs.py; this one reads files that only ``prepare`` makes)."""
    import subprocess

    shared_data("logits")
    choosing.prepare(tmp_path)
    result = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                             str(choosing.CONFIG), "--cores", "1", "-n"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "calibrate" in result.stdout
