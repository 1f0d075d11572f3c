"""A run on rounded probabilities cannot be read without its warning: the dump job's warning travels with the
calibrated files and metrics JSONs into results/tables/warnings.csv, under the tables of summary.md, and into
``calbench recommend`` for the winner and its ties; recommend says so where uncal ties the best, and keeps the
tables' noise-floor caveat and scale."""

import json

import numpy as np
import pytest
import yaml

from calbench.cli import main
from calbench.config import load
from calbench.jobs import calibrate, evaluate, paths, sources, tables
from calbench.report.warnings import COLUMNS, read_warnings

METHODS, METRICS = ["uncal", "ts"], ["acc", "nll", "ece.conf.em15.l1"]


@pytest.fixture(scope="module")
def rounded_run(tmp_path_factory):
    """The workflow's jobs, in order, on an imported pool of probabilities rounded to 2 decimals (2 seeds)."""
    work = tmp_path_factory.mktemp("rounded")
    rng = np.random.default_rng(0)
    z = rng.normal(size=(1200, 4)) * 2.5
    labels = (np.cumsum(np.exp(z / 2) / np.exp(z / 2).sum(1, keepdims=True), 1) > rng.random((1200, 1))).argmax(1)
    probs = np.round(np.exp(z) / np.exp(z).sum(1, keepdims=True), 2)
    np.save(work / "probs.npy", probs / probs.sum(1, keepdims=True))
    np.save(work / "labels.npy", labels)
    (work / "config.yaml").write_text(yaml.safe_dump({
        "seeds": [0, 1], "methods": METHODS, "metrics": METRICS,
        "sources": {"rounded": {"type": "import", "format": "npy", "scores": "probs", "split": {"cal_size": 600},
                                "files": {"probs": str(work / "probs.npy"), "labels": str(work / "labels.npy")}}}}))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)
        config = load("config.yaml")
        sources.dump_source_job(spec=sources.spec(config, source="rounded"))
        for seed in (0, 1):
            sources.draw_split_job(spec=sources.split_spec(config, source="rounded", seed=seed))
            for method in METHODS:
                calibrate.calibrate_job(spec=calibrate.spec(config, source="rounded", method=method, seed=seed))
                evaluate.evaluate_job(spec=evaluate.spec(config, source="rounded", method=method, seed=seed))
        tables.aggregate_job(spec=tables.spec(config))
    return work


def test_the_workflow_writes_warnings_csv_where_read_warnings_reads_it():
    from calbench.report.warnings import FILE

    assert paths.WARNINGS == f"results/{FILE}"


def test_the_dump_warning_reaches_every_job_and_warnings_csv(rounded_run):
    record = json.loads((rounded_run / paths.METRICS.format(source="rounded", method="ts", seed=1)).read_text())
    assert any(w["stage"] == "dump" and w["category"] == "CoarseProbabilitiesWarning" for w in record["warnings"])
    rows = read_warnings(rounded_run / "results")
    assert (rounded_run / paths.WARNINGS).read_text().splitlines()[0] == ",".join(COLUMNS)
    assert {(r["method"], r["seed"]) for r in rows if r["category"] == "CoarseProbabilitiesWarning"} == {
        (m, s) for m in METHODS for s in (0, 1)}


def test_summary_lists_the_warning_under_its_tables(rounded_run):
    summary = (rounded_run / paths.SUMMARY).read_text()
    assert summary.count("CoarseProbabilitiesWarning") == len(METRICS)  # under each metric's table
    assert "- rounded (every method; seeds 0, 1), dump job: CoarseProbabilitiesWarning: " in summary
    assert "resampling unit: pool rows (one count per row of the pool the seeds re-split" in summary
    assert "Too few sources to rank methods across sources: read the per-source best groups" in summary


def test_recommend_repeats_the_warning_says_when_uncal_ties_and_keeps_the_scale(rounded_run, capsys):
    assert main(["recommend", str(rounded_run / "results"), "--all-metrics"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "dump job: CoarseProbabilitiesWarning" in out.split("\nacc, higher is better")[0]  # the nll winner's
    acc = out.split("\nacc, higher is better")[1]
    assert "no method beats the uncalibrated model on acc here: uncal is in the best group" in acc
    assert "saved calibrator" not in acc  # ts keeps the argmax: no calibrator is offered as the acc winner
    assert out.index("\nnll,") < out.index("\nece.conf.em15.l1 (×100)") < out.index("\nacc,")  # proper scores first
    assert captured.err.count("recommend: ") == len(METRICS)  # one progress line per metric on stderr
    assert "e-" not in out and "p = 0 " not in out and "p = 0)" not in out
    assert main(["recommend", str(rounded_run / "results"), "--metric", "ece.conf.em15.l1", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert {r["scale"] for r in records} == {100.0} and {r["resamples"] for r in records} == {1000}
    assert "noise_floor" in records[0] and records[0]["unit"] == "pool rows"


def test_recommend_and_intervals_csv_give_one_interval(rounded_run, capsys):
    import pandas as pd

    assert main(["recommend", str(rounded_run / "results"), "--metric", "nll", "--json"]) == 0
    records = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    table = pd.read_csv(rounded_run / paths.INTERVALS)
    for row in table[table["metric"] == "nll"].itertuples():
        assert (row.low, row.high) == pytest.approx((records[row.method]["low"], records[row.method]["high"]),
                                                    rel=1e-9)


def test_an_ece_winner_within_the_noise_floor_is_marked():
    """The winner reads no more than a perfectly calibrated model at this test size: recommend says it cannot be
    told from one (stats.noise_floor: labels drawn from the model's own probabilities)."""
    from calbench.jobs.recommendation import _source_lines
    from calbench.metrics import lookup

    record = {"source": "s", "metric": "ece.conf.em15.l1", "method": "ts", "estimate": 0.0067, "low": 0.004,
              "high": 0.009, "tied_with_best": True, "p_value": None, "note": "", "calibrator": "x.safetensors",
              "within_noise_floor": True, "noise_floor": 0.0073, "noise_floor_high": 0.0101, "warnings": []}
    lines = _source_lines([record], lookup("ece.conf.em15.l1")[0], 1000)
    assert any("indistinguishable from a perfectly calibrated model at this test size" in line for line in lines)
    assert any("(a perfectly calibrated model reads 0.73, up to 1.01)" in line for line in lines)


def test_the_rounded_source_warning_is_on_the_console_and_the_report_first_page(rounded_run, monkeypatch):
    """The console's closing lines and report.html (its warnings box, before the tables) carry the dump job's
    warning of the rounded probabilities, as summary.md and recommend do."""
    from pathlib import Path

    from calbench.cli.report import build
    from snakemake_logger_plugin_calbench import closing_lines

    monkeypatch.chdir(rounded_run)
    closing = closing_lines(["snakemake", "--configfile", "config.yaml"])
    assert any(line.startswith("warnings (") for line in closing)
    assert any("sources.rounded" in line and "exact zeros" in line and "rounded/uncal" in line for line in closing)
    html = build(Path("config.yaml"), Path("results/report.html"), "nll",
                 lambda: {paths.SUMMARY: ("aggregate", "no update")})  # as `snakemake --summary` plans a finished run
    assert "CoarseProbabilitiesWarning" in html
    assert "CoarseProbabilitiesWarning" in html.split("<h2 id='tables'>")[0]  # in the box above the tables too
