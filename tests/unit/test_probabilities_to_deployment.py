"""From a probability file to a deployed calibrator: a right answer or a clear error at every step.

One test (or a few) per point of the user report that a new user wrote after following README with the
softmax outputs of a CIFAR-10 network: (1) a loaded calibrator applies itself as ``calbench apply`` does;
(2) the tables report what the saved calibrator computes; (3) coarse probabilities and percentages are
flagged; (4) ``recommend`` gives intervals and paired tests; (5) figures name their binning; (6) ``probs``
as a file key; (9) the dry run checks label shapes; (10) resolved paths, the split file's name, CSV headers,
swapped ``apply`` arguments; (11) the small items.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

import calbench
from calbench.__main__ import main
from calbench.data import splits, store
from calbench.jobs.calibrate import CalibrateSpec, calibrate_job
from calbench.jobs.evaluate import EvaluateSpec, evaluate_job
from calbench.methods import available, make, method_class
from calbench.metrics import evaluate
from calbench.scores import CoarseProbabilitiesWarning, Scores
from conftest import write_finished_run

RNG = np.random.default_rng(3)
K = 4
#: Metrics of the tables compared with the saved calibrator's own predictions (accuracy exactly).
IDS = ["acc", "nll", "brier", "ece.conf.em15.l1", "ece.conf.ew15.l1", "ece.cw.em15.l1"]
#: Small but real settings of the tuned methods (speed only), as the workflow's config slices.
FAST = {"lece": {"grid": {"q": [0.1, 0.3], "t": [0.0, 0.05]}, "cv": {"folds": 3}},
        "lecd": {"grid": {"q": [0.1, 0.3], "t": [0.0]}, "cv": {"folds": 3}},
        "ms_odir": {"grid": {"reg_lambda": [1e-3, 1e-1], "reg_mu": [1e-3]}, "cv": {"folds": 3}},
        "dir_odir": {"grid": {"reg_lambda": [1e-3, 1e-1], "reg_mu": [1e-3]}, "cv": {"folds": 3}},
        "dir_l2": {"grid": {"reg_lambda": [1e-3, 1e-1]}, "cv": {"folds": 3}},
        "kcal": {"steps_per_epoch": 5, "max_epochs": 2, "n_folds": 3, "device": "cpu", "dim": 4},
        "kcal_logits": {"steps_per_epoch": 5, "max_epochs": 2, "n_folds": 3, "device": "cpu", "dim": 4},
        "pl_ovr": {"n_folds": 3, "max_pieces": 3}, "pl3_ovr": {"n_folds": 3, "max_pieces": 3},
        "pl_conf": {"n_folds": 3, "max_pieces": 3}, "pl3_conf": {"n_folds": 3, "max_pieces": 3}}


def _part(n, seed, h=6):
    """Logits (float32, as a network's), labels and embeddings of ``n`` rows; every class present."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, n)
    y[:K] = np.arange(K)
    centres = np.random.default_rng(7).normal(size=(K, h))
    emb = (centres[y] + rng.normal(size=(n, h))).astype(np.float32)
    return {"logits": (3.0 * emb @ centres.T.astype(np.float32)), "labels": y, "embeddings": emb}


def _softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    path = tmp_path_factory.mktemp("dump") / "s.h5"
    store.write_dump(path, {"train": _part(200, 2), "cal": _part(240, 0), "test": _part(300, 1)}, {})
    return path


# -- 1. a loaded calibrator applies itself as `calbench apply` does ---------------------------------------------
@pytest.fixture
def prob_files(tmp_path):
    cal, test = _part(400, 0), _part(200, 1)
    p_cal, p_test = (_softmax(part["logits"].astype(np.float64)).astype(np.float32) for part in (cal, test))
    for name, array in (("pcal", p_cal), ("ptest", p_test), ("y", cal["labels"]), ("ztest", test["logits"])):
        np.save(tmp_path / f"{name}.npy", array)
    return tmp_path


@pytest.mark.parametrize("method", ["ts", "dir_odir"])
def test_a_loaded_calibrator_fitted_on_probabilities_equals_apply_and_refuses_logits(prob_files, method):
    out = prob_files / "c.safetensors"
    assert main(["fit", method, "--probs", "--scores", str(prob_files / "pcal.npy"), "--labels",
                 str(prob_files / "y.npy"), "-o", str(out)]) == 0
    assert main(["apply", str(out), str(prob_files / "ptest.npy"), "-o", str(prob_files / "p.npy")]) == 0
    loaded = calbench.load(out)
    applied = np.load(prob_files / "p.npy")
    np.testing.assert_array_equal(loaded.predict_proba(np.load(prob_files / "ptest.npy")), applied)
    with pytest.raises(ValueError, match=r"was fitted on probs: pass the classifier's probabilities \(the softmax"):
        loaded.predict_proba(np.load(prob_files / "ztest.npy"))


def test_a_loaded_calibrator_fitted_on_logits_refuses_probabilities(prob_files):
    path = calbench.save(make("ts").fit(_part(400, 0)["logits"], np.load(prob_files / "y.npy")),
                         prob_files / "ts.safetensors")
    loaded = calbench.load(path)
    with pytest.raises(ValueError, match="every row is a probability vector; this calibrator was fitted on logits: "
                                         "pass the classifier's logits, or refit it on probabilities"):
        loaded.predict_proba(np.load(prob_files / "ptest.npy"))
    z = np.load(prob_files / "ztest.npy")
    assert loaded.score(z, _part(200, 1)["labels"]) < 0  # the other entry points read the input the same way


# -- 2. the tables report what the saved calibrator computes -------------------------------------------------
# `perturb` fits on a model source's perturbed calibration images, which this dump has not: its job is checked
# end to end in tests/unit/test_perturb_cal.py.
@pytest.mark.parametrize("name", [n for n in available() if "perturbed_cal" not in method_class(n).needs])
def test_every_methods_table_metrics_are_those_of_its_saved_calibrator(name, dump, tmp_path):
    """Stored outputs are the float64 predict_proba: accuracy exactly, every metric to 1e-9, for every method."""
    calibrated, saved, metrics = tmp_path / "c.h5", tmp_path / "c.safetensors", tmp_path / "m.json"
    calibrate_job(spec=CalibrateSpec(source="s", method=name, seed=0, method_settings={name: FAST.get(name, {})},
                                     input_kind="logits", dump=dump, calibrated=calibrated, calibrator=saved))
    evaluate_job(spec=EvaluateSpec(source="s", method=name, seed=0, metrics=IDS, calibrated=calibrated, dump=dump,
                                   output=metrics))
    table = json.loads(metrics.read_text())
    test = splits.load_split(dump, 0)["test"]
    probs = calbench.load(saved).predict_proba(Scores(test["logits"], test["embeddings"]))
    np.testing.assert_array_equal(store.read_calibrated(calibrated)["probs"], probs)
    own = evaluate(probs, test["labels"], IDS)
    assert table["acc"] == own["acc"]
    for metric in IDS:
        assert abs(table[metric] - own[metric]) <= 1e-9, metric


def test_a_probability_source_is_benchmarked_on_what_apply_reads(prob_files, tmp_path):
    """The dump of a ``scores: probs`` source keeps the float64 log-probabilities (a float32 copy would round
    them), so `calbench apply` on the user's file reproduces the benchmark's outputs bit for bit."""
    p = np.concatenate([np.load(prob_files / "pcal.npy"), np.load(prob_files / "ptest.npy")])
    y = np.concatenate([np.load(prob_files / "y.npy"), _part(200, 1)["labels"]])
    np.save(tmp_path / "probs.npy", p)
    np.save(tmp_path / "labels.npy", y)
    entry = {"type": "import", "format": "npy", "scores": "probs", "split": {"cal_size": 400},
             "files": {"probs": str(tmp_path / "probs.npy"), "labels": str(tmp_path / "labels.npy")}}
    from calbench.config import complete_source
    from calbench.data.sources import make_dump
    from conftest import DOWNLOADS

    make_dump("p", complete_source(entry), [0], tmp_path / "p.h5", DOWNLOADS)
    assert store.read_group(tmp_path / "p.h5", "all")["logits"].dtype == np.float64
    calibrate_job(spec=CalibrateSpec(source="p", method="irm", seed=0, method_settings={"irm": {}},
                                     split=entry["split"], input_kind="probs", dump=tmp_path / "p.h5",
                                     calibrated=tmp_path / "c.h5", calibrator=tmp_path / "irm.safetensors"))
    out = store.read_calibrated(tmp_path / "c.h5")
    np.save(tmp_path / "test_rows.npy", p[out["index"]])
    assert main(["apply", str(tmp_path / "irm.safetensors"), str(tmp_path / "test_rows.npy"), "-o",
                 str(tmp_path / "applied.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "applied.npy"), out["probs"])


# -- 3. coarse probabilities and percentages are flagged ---------------------------------------------------------
def _config(tmp_path, scores, probs, labels, key="logits"):
    np.save(tmp_path / "p.npy", probs)
    np.save(tmp_path / "y.npy", labels)
    config = {"seeds": [0], "methods": ["uncal", "ts"], "metrics": ["acc", "nll"],
              "sources": {"mine": {"type": "import", "format": "npy", "scores": scores, "split": {"cal_size": 200},
                                   "files": {key: str(tmp_path / "p.npy"), "labels": str(tmp_path / "y.npy")}}}}
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_rounded_probabilities_warn_in_validate_and_fit_saying_what_to_do(tmp_path, capsys):
    part = _part(400, 0)
    rounded = np.round(_softmax(part["logits"].astype(np.float64)), 2)
    rounded /= rounded.sum(1, keepdims=True)
    rounded = np.round(rounded, 4)  # rows still sum to 1 within 1e-3: valid probabilities, 4 decimals
    assert main(["validate", str(_config(tmp_path, "probs", rounded, part["labels"]))]) == 0
    out = "".join(capsys.readouterr())  # the warnings on stderr, the verdict on stdout
    assert re.search(r"warning: .*p.npy:all/logits: every value is rounded to 4 decimals: ", out), out
    assert "export the logits or unrounded probabilities" in out and "valid (1 sources" in out
    warned = [line for line in out.splitlines() if "warning: " in line and "all/logits: " in line]
    assert "rows repeat another row" in out  # 2 decimals make copies of rows too (calbench.data.copies)
    assert len(warned) == 2 and "floor=5e-05" in warned[1]  # one idea a line: the problem, then the floor
    messages = [line.split("all/logits: ", 1)[1] for line in warned]  # after the file's name
    assert all(len(m) <= 160 and m.count("(") == m.count(")") for m in messages), messages
    assert main(["fit", "ts", "--probs", "--scores", str(tmp_path / "p.npy"), "--labels", str(tmp_path / "y.npy"),
                 "-o", str(tmp_path / "ts.safetensors")]) == 0
    assert "calbench fit: warning: " in capsys.readouterr().err
    with pytest.warns(CoarseProbabilitiesWarning, match="fit the rounding, not the classifier"):
        calbench.scores.convert_scores(rounded, "probs", "p.npy")


def test_full_precision_probabilities_do_not_warn(tmp_path, capsys):
    part = _part(400, 0)
    probs = _softmax(part["logits"].astype(np.float64)).astype(np.float32)
    assert main(["validate", str(_config(tmp_path, "probs", probs, part["labels"]))]) == 0
    assert "warning" not in "".join(capsys.readouterr())


@pytest.mark.parametrize("scores, advice", [("probs", "divide them by 100$"),
                                            ("logits", r"divide them by 100, then declare `scores: probs`$")])
def test_percentages_are_told_to_divide_by_100(tmp_path, capsys, scores, advice):
    part = _part(400, 0)
    percent = 100 * _softmax(part["logits"].astype(np.float64))
    assert main(["validate", str(_config(tmp_path, scores, percent, part["labels"]))]) == 1
    line = capsys.readouterr().err.strip()
    assert "look like percentages" in line and re.search(advice, line), line
    assert main(["fit", "ts", "--scores", str(tmp_path / "p.npy"), "--labels", str(tmp_path / "y.npy"),
                 "-o", str(tmp_path / "ts.safetensors")] + (["--probs"] if scores == "probs" else [])) == 1
    assert "divide them by 100" in capsys.readouterr().err


# -- 4. recommend: intervals and paired tests ------------------------------------------------------------------
@pytest.fixture
def one_seed_run(tmp_path):
    """A finished one-seed run on 2,000 test rows: ts well calibrated, a slightly worse copy and uncal."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, K)) * 3
    p_true = _softmax(z / 2)
    y = (p_true.cumsum(1) > rng.random((2000, 1))).argmax(1)
    outputs = {"ts": p_true, "ts_shaky": _softmax(z / 2.05), "uncal": _softmax(z)}
    write_finished_run(tmp_path, outputs, y, ["nll", "ece.conf.em15.l1"])
    return tmp_path, outputs, y


def test_recommend_on_one_seed_bootstraps_the_test_rows_with_paired_resamples(one_seed_run, capsys):
    """The winner's percentile interval and the Holm-adjusted paired p-values are the engine's, on the same
    resamples of the test rows for every method (calbench.stats)."""
    from calbench.stats.draws import source_draws
    from calbench.stats.paired import compare

    results, outputs, y = one_seed_run
    assert main(["recommend", str(results), "--metric", "ece.conf.em15.l1", "--resamples", "400"]) == 0
    out = capsys.readouterr().out
    assert "ece.conf.em15.l1 (×100), lower is better, values as in the tables" in out
    draws = source_draws("src", [0], list(outputs), ["ece.conf.em15.l1"],
                         lambda m, seed: {"probs": outputs[m], "labels": y, "index": np.arange(y.size)}, 400)
    best, *others = compare(draws, "ece.conf.em15.l1")
    lines = out.splitlines()
    line = next(line for line in lines if line.startswith("src:"))
    assert line == f"src: {best.method} {100 * best.estimate:.2f} [{100 * best.low:.2f}, {100 * best.high:.2f}]"
    assert 0 <= best.low <= best.estimate <= best.high
    tied, worse = lines[lines.index(line) + 1], lines[lines.index(line) + 2]
    for other in others:
        text = (f"{other.method} {100 * other.estimate:.2f} [{100 * other.low:.2f}, {100 * other.high:.2f}] "
                f"(p = {other.p_value:.2g})")  # every number printed with its interval
        assert text in (tied if other.tied_with_best else worse), (text, tied, worse)


def test_recommend_all_metrics_names_the_winner_and_the_methods_tied_with_it(one_seed_run, capsys):
    results, _, _ = one_seed_run
    assert main(["recommend", str(results), "--all-metrics", "--resamples", "300"]) == 0
    out = capsys.readouterr().out
    assert "\nece.conf.em15.l1 (×100)" in out and "\nnll, lower is better" in out
    nll = out.split("\nnll,")[1].splitlines()
    assert nll[1].startswith("src: ts ")
    assert nll[2].startswith("    tied with the best: ") and "uncal" not in nll[2]
    assert nll[3].startswith("    worse than ts: ") and "uncal" in nll[3]
    assert nll[4].startswith("    saved calibrator: ")  # kept with --all-metrics


def test_recommend_all_metrics_gives_each_metric_the_records_it_gets_alone(tmp_path):
    """``--all-metrics`` resamples a source's metrics in one engine call (their row counts and per-row work shared):
    every record equals that of the metric asked alone (same resamples, Efron & Tibshirani 1993 §16.4 pairing), its
    numbers to 1e-12 (one pass of block sums serves several binnings, so bin sums may add in another order)."""
    from calbench.jobs.recommendation import Request, recommend

    rng = np.random.default_rng(3)
    z = rng.normal(size=(1200, K)) * 3
    y = (_softmax(z / 2).cumsum(1) > rng.random((1200, 1))).argmax(1)
    metrics = ["nll", "acc", "ece.conf.em15.l1", "ece.cw.ew15.l1", "ace.cw.em15", "ks.conf", "set_size.aps.a10.div5"]
    write_finished_run(tmp_path, {"ts": _softmax(z / 2), "ts_shaky": _softmax(z / 2.1), "uncal": _softmax(z)}, y,
                       metrics)
    together = recommend(tmp_path, Request(metrics=None, resamples=200)).records
    alone = [r for m in metrics for r in recommend(tmp_path, Request(metrics=(m,), resamples=200)).records]
    by_key = lambda records: {(r["metric"], r["method"]): r for r in records}  # noqa: E731
    together, alone = by_key(together), by_key(alone)
    assert set(together) == set(alone) and len(together) == 3 * len(metrics)
    for key, record in together.items():
        assert record.keys() == alone[key].keys()
        for field, value in record.items():
            expected = alone[key][field]
            assert value == (pytest.approx(expected, rel=1e-12) if isinstance(value, float) else expected), field


def test_recommend_json_records_every_method_and_flags_a_winner_that_changes_accuracy(tmp_path, capsys):
    """A 'method' that re-learns the decision (much higher accuracy than uncal) wins NLL: its record says how
    far accuracy moved and ``acc_flag`` that it left uncal's accuracy interval; the text says so too."""
    rng = np.random.default_rng(1)
    y = rng.integers(K, size=1500)
    honest = _softmax(rng.normal(size=(1500, K)))  # a classifier near chance
    relearned = np.full((1500, K), 0.1 / (K - 1))
    relearned[np.arange(1500), y] = 0.9
    write_finished_run(tmp_path, {"uncal": honest, "ts": honest, "relearn": relearned}, y, ["nll", "acc"])
    assert main(["recommend", str(tmp_path), "--json", "--resamples", "200"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert records[0]["method"] == "relearn" and {r["method"] for r in records[1:]} == {"ts", "uncal"}
    keys = {"source", "metric", "method", "estimate", "low", "high", "best", "tied_with_best", "p_value",
            "acc_change", "calibrator"}
    assert all(keys <= set(r) for r in records) and records[0]["p_value"] is None
    assert records[0]["acc_flag"] == "raises" and records[0]["acc_change"] > 0.5
    assert records[1]["acc_change"] == 0 and not records[1]["tied_with_best"] and records[1]["p_value"] < 0.05
    assert main(["recommend", str(tmp_path), "--resamples", "200"]) == 0
    assert "relearn raises accuracy by" in capsys.readouterr().out


def test_reliability_figures_default_to_the_tables_equal_mass_bins_and_say_so(one_seed_run, tmp_path, monkeypatch):
    from calbench.jobs.reliability import ReliabilitySpec, reliability_job
    from calbench.report import reliability

    results, outputs, y = one_seed_run
    titles = []
    monkeypatch.setattr(reliability, "save_figure", lambda fig, path: titles.append(fig._suptitle.get_text()))
    calibrated = {m: [results / "calibrated" / "src" / m / "seed0.h5"] for m in outputs}
    reliability_job(spec=ReliabilitySpec(source="src", target="conf", seeds=[0], n_bins=15, scheme="em",
                                         max_classes=10, calibrated=calibrated, figure=tmp_path / "f.png",
                                         table=tmp_path / "f.csv"))
    assert len(titles) == 1 and "15 equal-mass bins, as the tables' ece.conf.em15.l1" in " ".join(titles[0].split())
    table = pd.read_csv(tmp_path / "f.csv")
    for method, probs in outputs.items():
        gaps = table[(table["method"] == method) & (table["kind"] == "bin")]
        ece = float(np.nansum(gaps["weight"] * gaps["gap"].abs()))
        assert ece == pytest.approx(evaluate(probs, y, ["ece.conf.em15.l1"])["ece.conf.em15.l1"], abs=1e-9)


# -- 6. `probs` as the score file's key --------------------------------------------------------------------------
def test_probs_is_accepted_as_the_file_key_of_a_probability_source(tmp_path, capsys):
    from calbench.config import load
    from calbench.data.check import config_problems

    part = _part(400, 0)
    probs = _softmax(part["logits"].astype(np.float64))
    path = _config(tmp_path, "probs", probs, part["labels"], key="probs")
    assert config_problems(load(path), deep=False) == [] and main(["validate", str(path)]) == 0
    path = _config(tmp_path, "logits", probs, part["labels"], key="probs")
    for deep in (False, True):
        (problem,) = config_problems(load(path), deep=deep)
        assert problem.startswith("sources.mine.files.probs: a score file named `probs` needs `scores: probs`"), problem


# -- 9. the dry run checks the label shapes that the docs say it checks ---------------------------------------------
@pytest.mark.parametrize("labels, message", [
    (lambda y: y[:, None], r"expected a 1-D vector .* shape \(400, 1\); save the labels as a vector"),
    (lambda y: np.eye(K)[y], r"shape \(400, 4\), which looks one-hot; save the class indices"),
    (lambda y: y[:-1], r"has 399 entries but the scores have 400 rows"),
])
def test_the_dry_run_refuses_labels_that_would_fail_later(tmp_path, labels, message):
    from calbench.config import load
    from calbench.data.check import config_problems

    part = _part(400, 0)
    path = _config(tmp_path, "logits", part["logits"], labels(part["labels"]))
    for deep in (False, True):
        problems = config_problems(load(path), deep=deep)
        where = "sources.mine.files.labels: " if not deep else "y.npy:all/labels: "  # the key, or the file read
        assert len(problems) == 1 and re.search(re.escape(where) + ".*" + message, problems[0]), problems


# -- 10. paths, the split file, CSV headers, swapped arguments -----------------------------------------------------
def test_errors_name_the_resolved_path_of_a_relative_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["fit", "ts", "--scores", "data/cal.npy", "--labels", "y.npy", "-o", "ts.safetensors"]) == 1
    assert f"data/cal.npy (resolved to {tmp_path / 'data' / 'cal.npy'}): no such file" in capsys.readouterr().err


def test_the_split_file_says_it_holds_the_test_rows():
    from calbench.jobs import paths

    assert paths.SPLIT.format(source="s", seed=0) == "results/splits/s/seed0.test_rows.npy"


def test_csv_files_with_a_header_row_fit_and_apply(tmp_path):
    part, test = _part(300, 0), _part(50, 1)
    header = ",".join(f"c{j}" for j in range(K))
    np.savetxt(tmp_path / "cal.csv", part["logits"], delimiter=",", header=header, comments="")
    np.savetxt(tmp_path / "y.csv", part["labels"], delimiter=",", header="label", comments="", fmt="%d")
    np.savetxt(tmp_path / "test.csv", test["logits"], delimiter=",", header=header, comments="", fmt="%.17g")
    assert main(["fit", "ts", "--scores", str(tmp_path / "cal.csv"), "--labels", str(tmp_path / "y.csv"),
                 "-o", str(tmp_path / "ts.safetensors")]) == 0
    assert main(["apply", str(tmp_path / "ts.safetensors"), str(tmp_path / "test.csv"), "-o",
                 str(tmp_path / "p.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"),
                                  calbench.load(tmp_path / "ts.safetensors").predict_proba(test["logits"]))


def test_swapped_apply_arguments_are_recognised(tmp_path, capsys):
    part = _part(300, 0)
    calbench.save(make("ts").fit(part["logits"], part["labels"]), tmp_path / "ts.safetensors")
    np.save(tmp_path / "z.npy", part["logits"])
    swapped = [str(tmp_path / "z.npy"), str(tmp_path / "ts.safetensors")]
    assert main(["apply", *swapped, "-o", str(tmp_path / "p.npy")]) == 1
    err = capsys.readouterr().err
    assert "is a score file and" in err and "the calibrator comes first: calbench apply" in err
    assert not (tmp_path / "p.npy").exists()


# -- 11. the small items ---------------------------------------------------------------------------------------
def test_recommend_names_the_metric_ids_of_the_run_not_patterns(one_seed_run, capsys):
    results, _, _ = one_seed_run
    assert main(["recommend", str(results), "--metric", "ece"]) == 1
    err = capsys.readouterr().err
    assert "metric 'ece' is not in" in err and "it holds ece.conf.em15.l1, nll" in err and "(?P<" not in err


def test_method_summaries_are_whole_sentences_without_internal_names():
    import inspect

    import calbench.methods as methods_package
    from calbench.cli.methods import summary
    from calbench.methods import method_class

    internal = {name for module in vars(methods_package).values() if inspect.ismodule(module)
                for name, obj in vars(module).items() if inspect.isclass(obj) and obj.__module__.startswith("calbench")
                and re.search("[a-z][A-Z]", name)}  # compound names (ODIRTuned), not words that name a class (Beta)
    for name in available():
        text = summary(method_class(name))
        assert text.endswith("."), (name, text)
        words = set(re.findall(r"[A-Za-z][A-Za-z0-9_]*", text))  # fitted attributes end in _ (weights_)
        assert not words & internal and not [w for w in words if w.endswith("_")], (name, text)


def test_methods_verbose_says_which_methods_export_to_torch():
    pytest.importorskip("torch")
    from calbench.cli.methods import exports_to_torch

    assert exports_to_torch("ts") and exports_to_torch("dir_odir")
    assert exports_to_torch("irm") is False and exports_to_torch("kcal") is False


def test_a_loaded_grid_search_shows_the_chosen_point_and_errors_name_the_method(tmp_path):
    part = _part(300, 0)
    cal = make("dir_odir", **FAST["dir_odir"]).fit(part["logits"], part["labels"])
    loaded = calbench.load(calbench.save(cal, tmp_path / "d.safetensors"))
    assert repr(loaded).endswith(f" [fitted: best_params_={loaded.best_params_!r}]")
    with pytest.raises(ValueError, match="^dir_odir was fitted on 4 classes, got scores with 3"):
        loaded.predict_proba(part["logits"][:, :3])


@pytest.mark.parametrize("decimals", [1, 2, 3, 4, 5, 6])
def test_probabilities_rounded_to_any_decimals_are_diagnosed_as_rounded_in_library_cli_and_validate(
        tmp_path, capsys, decimals):
    """Rows that sum to 1 only within their rounding (10 classes at 2 decimals: 1 ± 0.05) are rounded probabilities,
    not logits: declared as probabilities they pass with the rounding warning and its fix; declared as logits
    (or given to Scores) they are refused or warned about as rounded probabilities; from_probs warns."""
    from calbench.scores import ProbabilitiesAsLogitsWarning

    rng = np.random.default_rng(decimals)
    probs = _softmax(rng.normal(size=(400, 10)) * 3)
    labels = (_softmax(np.log(probs) / 2).cumsum(axis=1) > rng.random((400, 1))).argmax(axis=1)  # overconfident
    rounded = np.round(probs, decimals)
    assert main(["validate", str(_config(tmp_path, "probs", rounded, labels))]) == 0
    out = "".join(capsys.readouterr())  # the warnings on stderr, the verdict on stdout
    assert f"every value is rounded to {decimals} decimals" in out and "valid (1 sources" in out, out
    assert "declare `scores: logits`" not in out
    assert main(["validate", str(_config(tmp_path, "logits", rounded, labels))]) == 1
    out = capsys.readouterr().err
    assert f"probability vector rounded to {decimals} decimals" in out and "declare `scores: probs`" in out, out
    args = ["--scores", str(tmp_path / "p.npy"), "--labels", str(tmp_path / "y.npy"), "-o", str(tmp_path / "t.st")]
    assert main(["fit", "ts", "--probs", *args]) == 0
    err = capsys.readouterr().err
    assert f"rounded to {decimals} decimals" in err and "drop --probs" not in err, err
    assert main(["fit", "ts", *args]) == 1
    assert f"rounded to {decimals} decimals" in capsys.readouterr().err
    with pytest.warns(CoarseProbabilitiesWarning, match=f"rounded to {decimals} decimals"):
        scores = Scores.from_probs(rounded)
    with pytest.warns(ProbabilitiesAsLogitsWarning):
        Scores(rounded)
    if decimals >= 2:  # the fix the warning names: floor the zeros at half the rounding step
        floor = 0.5 * 10.0 ** -decimals
        fixed = make("ts").fit(Scores.from_probs(rounded, floor=floor), labels).fitted_summary()["temperature"]
        assert fixed < make("ts").fit(scores, labels).fitted_summary()["temperature"]
