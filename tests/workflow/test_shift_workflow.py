"""Calibration under shift in the workflow (docs/shift.md): shifted sets are evaluated with the saved calibrators,
tables and figures are made, and adding a shift schedules no calibrate job."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import run_snakemake
from workflow_helpers import run_then_configure

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("shift")]

CLASSES = 4


def _logits(folder, name, rows, temperature, seed):
    """A planted-temperature classifier's logits (reported = temperature × calibrated) and labels drawn from
    the calibrated probabilities; a larger temperature is a more over-confident (shifted) set."""
    rng = np.random.default_rng(seed)
    calibrated = rng.normal(scale=1.5, size=(rows, CLASSES))
    probs = np.exp(calibrated) / np.exp(calibrated).sum(1, keepdims=True)
    labels = (rng.random(rows)[:, None] > probs.cumsum(1)).sum(1)
    np.save(folder / f"{name}_logits.npy", (temperature * calibrated).astype(np.float32))
    np.save(folder / f"{name}_labels.npy", labels)
    return {"logits": str(folder / f"{name}_logits.npy"), "labels": str(folder / f"{name}_labels.npy")}


def _config(folder, shifts: bool) -> dict:
    entry = {"type": "import", "format": "npy", "files": _logits(folder, "pool", 800, 2.0, 0),
             "split": {"cal_size": 400}}
    if shifts:
        entry["shifts"] = {"noise": [{"severity": s, "files": _logits(folder, f"noise{s}", 300, 2.0 + s, s)}
                                     for s in (1, 3)]}
    return {"seeds": [0, 1], "sources": {"mine": entry}, "methods": ["uncal", "ts"],
            "metrics": ["acc", "nll", "brier", "ece.conf.ew15.l1"]}


@pytest.fixture(scope="module")
def configured(tmp_path_factory):
    """A complete run without shifts, then the same config with a shifted family added (not yet run), and the
    jobs it plans."""
    work = tmp_path_factory.mktemp("shift")
    return run_then_configure(work, _config(work, shifts=False), _config(work, shifts=True))


@pytest.fixture
def done(configured):
    return configured[0]


def test_adding_a_shift_reruns_evaluations_and_no_calibrate_job(configured):
    _, planned = configured
    assert {rule for rule, _ in planned} == {"dump_shifts_source", "evaluate", "aggregate", "runtime_table",
                                             "shift_report"}
    assert {w for rule, w in planned if rule == "evaluate"} == {f"mine/{m}/{s}" for m in ("uncal", "ts")
                                                                 for s in (0, 1)}


def test_shifted_sets_are_evaluated_with_the_saved_calibrator_and_tabulated(done):
    run_snakemake(done, None)
    record = json.loads((done / "results/metrics/mine/ts/seed0.json").read_text())
    assert set(record["shifts"]) == {"noise/1", "noise/3"}
    # more over-confident logits: TS fitted on the clean split leaves a larger ECE as the shift grows
    ece = [record["shifts"][s]["ece.conf.ew15.l1"] for s in ("noise/1", "noise/3")]
    assert record["ece.conf.ew15.l1"] < ece[0] < ece[1]
    long = pd.read_csv(done / "results/tables/metrics_long.csv")
    assert set(long["test_set"]) == {"clean", "noise/1", "noise/3"}
    assert len(long) == 2 * 2 * 3 * 4  # methods × seeds × test sets × metrics
    table = (done / "results/tables/shift/ece.conf.ew15.l1.md").read_text()
    assert "| method | clean | severity 1 | severity 3 | under shift |" in table
    assert "| ts clean | ts shift |" not in table
    # every cell with the paired bootstrap's interval of its rows, the ones in intervals.csv
    cells = pd.read_csv(done / "results/tables/shift/intervals.csv")
    ts3 = cells[(cells["method"] == "ts") & (cells["metric"] == "nll") & (cells["column"] == "3")].iloc[0]
    assert ts3["low"] < ts3["estimate"] < ts3["high"] and ts3["reference"] == "uncal"
    shifted = long[(long["method"] == "ts") & (long["metric"] == "nll") & (long["test_set"] == "noise/3")]
    assert ts3["estimate"] == pytest.approx(shifted["value"].mean())
    clean_ece = long.query("method == 'ts' and metric == 'ece.conf.ew15.l1' and test_set == 'clean'")["value"]
    assert f"| ts | {clean_ece.mean() * 100:.2f} [" in table
    assert "ece.conf.ew15.l1 clean | ece.conf.ew15.l1 shift" in (done / "results/tables/shift/ranking.md").read_text()
    figure = pd.read_csv(done / "results/figures/shift/mine.csv")
    assert set(figure["metric"]) == {"ece.conf.ew15.l1", "nll", "brier", "acc"}
    assert (done / "results/figures/shift/mine.png").stat().st_size > 10_000
    # the clean tables are computed from the clean test set alone
    clean = long[(long["test_set"] == "clean") & (long["metric"] == "acc") & (long["method"] == "ts")]
    assert f"{clean['value'].mean():.3f}" in (done / "results/tables/acc.md").read_text()


def test_recommend_under_shift_gives_every_number_the_shift_tables_interval(done, capsys):
    """``recommend --under-shift`` ranks by the shift tables' ``under shift`` column with the same engine: each
    saved calibrator applied to each shifted set, the paired bootstrap's percentile intervals (Efron & Tibshirani
    §13.3; the tables' 1,000 resamples, so those of intervals.csv) and the tied-with-best rule of plain
    ``recommend`` (Holm-adjusted paired test against the best, §16.4)."""
    from calbench.__main__ import main

    run_snakemake(done, None)  # the shifted run (nothing left to do where the test above ran it)
    results = str(done / "results")
    assert main(["recommend", results, "--under-shift", "--metric", "nll", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    cells = pd.read_csv(done / "results/tables/shift/intervals.csv")
    under = cells[(cells["metric"] == "nll") & (cells["column"] == "under shift")].set_index("method")
    assert {r["method"] for r in records} == set(under.index) == {"uncal", "ts"}
    for record in records:
        row = under.loc[record["method"]]
        assert record["estimate"] == pytest.approx(row["estimate"], rel=1e-9)
        assert (record["low"], record["high"]) == pytest.approx((row["low"], row["high"]), rel=1e-9)
        assert record["low"] <= record["estimate"] <= record["high"]
    best, other = records
    assert best["tied_with_best"] and other["tied_with_best"] == (other["p_value"] >= 0.05)
    assert main(["recommend", results, "--under-shift", "--metric", "nll"]) == 0
    text = capsys.readouterr().out
    line = next(line for line in text.splitlines() if line.startswith("mine: "))
    assert line == (f"mine: {best['method']} {best['estimate']:.3f} [{best['low']:.3f}, {best['high']:.3f}]"), line
    assert f"{other['method']} {other['estimate']:.3f} [{other['low']:.3f}, {other['high']:.3f}] (p " in text
    assert "no interval" not in text
