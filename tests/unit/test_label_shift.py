"""Label-shift adaptation (docs/label_shift.md): EM (Saerens et al. 2002), BBSE (Lipton et al. 2018), the shifted
draws, the adaptation metrics, and the BCTS/NBVS calibrators of Alexandari et al. (2020 §3) against a reference fit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax

from calbench.config import ConfigError, load
from calbench.data.label_shift import class_counts, draw_rows, parse_name, set_names
from calbench.methods import make
from calbench.metrics import evaluate
from calbench.metrics.label_shift import LabelShiftInputs, bbse_priors, em_priors, estimate
from conftest import write_label_shift_run

MEANS = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])


def _gaussian_task(priors, n, seed):
    """Rows of three unit-variance Gaussian classes drawn with ``priors``; the exact posteriors under uniform
    source priors (a perfectly calibrated classifier for the balanced source)."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(3, size=n, p=priors)
    x = MEANS[labels] + rng.normal(size=(n, 2))
    log_lik = -0.5 * ((x[:, None, :] - MEANS[None]) ** 2).sum(-1)
    return softmax(log_lik, axis=1), labels


def test_em_recovers_known_priors_from_calibrated_posteriors():
    # Saerens et al. (2002) Eqs. 2.9-2.10: with calibrated source posteriors, EM's fixed point is the maximum-
    # likelihood target prior; 40,000 rows put it within 0.01 of the true one
    true = np.array([0.7, 0.2, 0.1])
    probs, labels = _gaussian_task(true, 40_000, 0)
    priors, iterations = em_priors(probs, np.full(3, 1 / 3))
    assert np.abs(priors - true).max() < 0.01
    assert priors.sum() == pytest.approx(1.0)
    assert 1 < iterations < 1000
    # no shift: EM stays at the source priors (their mean posterior)
    balanced, _ = _gaussian_task(np.full(3, 1 / 3), 40_000, 1)
    assert np.abs(em_priors(balanced, balanced.mean(0))[0] - balanced.mean(0)).max() < 1e-6


def test_em_warns_at_its_iteration_cap():
    probs, _ = _gaussian_task(np.array([0.7, 0.2, 0.1]), 2000, 2)
    with pytest.warns(RuntimeWarning, match="after 3 iterations"):
        em_priors(probs, np.full(3, 1 / 3), max_iter=3)


def test_bbse_inverts_a_known_confusion_matrix():
    # Lipton et al. (2018), BBSE: μ̂ = C w, so w = C⁻¹ μ̂ exactly when the test predictions follow C w
    confusion = np.array([[0.30, 0.05, 0.02], [0.03, 0.25, 0.03], [0.02, 0.05, 0.25]])  # [pred, label]
    source = confusion.sum(axis=0)
    target = np.array([0.6, 0.3, 0.1])
    predicted = confusion @ (target / source)  # the target's distribution of hard predictions
    counts = class_counts(predicted, 10_000)
    assert counts.sum() == 10_000
    probs = np.repeat(np.eye(3) * 0.8 + 0.2 / 3, counts, axis=0)  # rows predicting each class, as counted
    assert np.abs(bbse_priors(probs, confusion) - target).max() < 1e-4


def test_oracle_adaptation_is_bayes_rule_and_helps_accuracy():
    # the re-weighted posterior p ⊙ π_t/π_s renormalised is the target Bayes posterior: accuracy and NLL improve
    true = np.array([0.8, 0.15, 0.05])
    probs, labels = _gaussian_task(true, 20_000, 3)
    cal_probs, cal_labels = _gaussian_task(np.full(3, 1 / 3), 20_000, 4)
    inputs = LabelShiftInputs.from_calibration(cal_probs, cal_labels, np.bincount(labels, minlength=3) / labels.size)
    values = evaluate(probs, labels, ["acc", "nll", "acc.oracle", "nll.oracle", "nll.em", "acc.bbse",
                                      "prior_mse.em", "prior_mse.bbse"], label_shift=inputs)
    assert values["acc.oracle"] > values["acc"] + 0.05
    assert values["nll.oracle"] < values["nll"] - 0.1
    assert values["nll.em"] == pytest.approx(values["nll.oracle"], abs=0.01)
    assert values["prior_mse.em"] < 1e-4 and values["prior_mse.bbse"] < 1e-3
    priors, adapted = estimate(probs, inputs, "oracle")
    expected = probs * (priors / inputs.source_priors)
    np.testing.assert_allclose(adapted, expected / expected.sum(1, keepdims=True))


def test_adaptation_metrics_need_a_label_shifted_set():
    probs, labels = _gaussian_task(np.full(3, 1 / 3), 100, 5)
    with pytest.raises(ValueError, match="label-shifted test sets"):
        evaluate(probs, labels, ["nll.em"])


def test_draws_are_deterministic_per_seed_and_follow_the_priors():
    spec = {"dirichlet": [0.1, 1.0], "tweak_one": [0.9], "draws": 2}
    names = set_names(spec)
    assert names == ["prior/dirichlet0.1/0", "prior/dirichlet0.1/1", "prior/dirichlet1/0", "prior/dirichlet1/1",
                     "prior/tweak_one0.9/0", "prior/tweak_one0.9/1"]
    assert parse_name("prior/tweak_one0.9/1") == ("tweak_one", 0.9, 1)
    labels = np.random.default_rng(0).integers(10, size=3000)
    first, priors = draw_rows("prior/dirichlet0.1/0", labels, 10, seed=0)
    again, _ = draw_rows("prior/dirichlet0.1/0", labels, 10, seed=0)
    other_seed, _ = draw_rows("prior/dirichlet0.1/0", labels, 10, seed=1)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other_seed)
    np.testing.assert_allclose(np.bincount(labels[first], minlength=10) / first.size, priors)
    rows, tweaked = draw_rows("prior/tweak_one0.9/0", labels, 10, seed=0, size=1000)
    assert rows.size == 1000 and tweaked.max() == pytest.approx(0.9)
    assert np.allclose(np.sort(tweaked)[:-1], 0.1 / 9, atol=1e-3)


def test_tweak_class_fixes_the_tweaked_class_as_the_paper_does():
    # Alexandari et al. (2020) tweak class 3 of CIFAR-10 in every tweak-one set (labelshiftexperiments' tweak-one
    # draws); the drawn default puts ρ on a class chosen per set
    labels = np.random.default_rng(0).integers(10, size=3000)
    drawn = {int(np.argmax(draw_rows(f"prior/tweak_one0.9/{i}", labels, 10, seed=0)[1])) for i in range(8)}
    fixed = {int(np.argmax(draw_rows(f"prior/tweak_one0.9/{i}", labels, 10, seed=0, tweak_class=3)[1]))
             for i in range(8)}
    assert len(drawn) > 1 and fixed == {3}
    rows, priors = draw_rows("prior/tweak_one0.01/0", labels, 10, seed=0, size=1000, tweak_class=3)
    assert priors[3] == pytest.approx(0.01) and np.argmin(priors) == 3
    dirichlet = draw_rows("prior/dirichlet1/0", labels, 10, seed=0)
    np.testing.assert_array_equal(dirichlet[0], draw_rows("prior/dirichlet1/0", labels, 10, seed=0, tweak_class=3)[0])
    with pytest.raises(ValueError, match=r"label_shift.tweak_class: 10 is not a class of these 10-class outputs"):
        draw_rows("prior/tweak_one0.9/0", labels, 10, seed=0, tweak_class=10)


def _reference_fit(name, z, y):
    """scipy L-BFGS on the same mean log-loss: BCTS σ(β z + b), NBVS σ(w ⊙ z)."""
    k = z.shape[1]

    def loss(phi):
        logits = phi[0] * z + phi[1:] if name == "bcts" else phi * z
        return -log_softmax(logits, axis=1)[np.arange(y.size), y].mean()

    start = np.concatenate([[1.0], np.zeros(k)]) if name == "bcts" else np.ones(k)
    return minimize(loss, start, method="L-BFGS-B", options={"maxiter": 5000, "ftol": 1e-14, "gtol": 1e-9})


@pytest.mark.parametrize("name", ["bcts", "nbvs"])
def test_bcts_and_nbvs_agree_with_a_reference_fit(name):
    # Alexandari et al. (2020) §3: BCTS = TS with a bias per class, NBVS = VS without biases, fitted by NLL
    rng = np.random.default_rng(7)
    z = rng.normal(size=(3000, 5)) * 3.0 + np.array([0.5, 0.0, -0.5, 1.0, 0.0])
    y = (rng.random(3000)[:, None] > softmax(0.4 * z + np.array([0.3, 0.0, 0.0, -0.8, 0.2]), 1).cumsum(1)).sum(1)
    model = make(name).fit(z, y)
    reference = _reference_fit(name, z, y)
    assert model.fit_info_["converged"]
    assert model.fit_info_["loss"] <= reference.fun + 1e-10
    scales = np.diagonal(model.weights_)
    if name == "bcts":
        assert np.ptp(scales) == 0
        assert scales[0] == pytest.approx(reference.x[0], abs=1e-4)
        centred = model.intercept_ - model.intercept_.mean()
        np.testing.assert_allclose(centred, reference.x[1:] - reference.x[1:].mean(), atol=1e-4)
        assert model.fitted_summary()["temperature"] == pytest.approx(1 / scales[0])
    else:
        assert not model.intercept_.any()
        np.testing.assert_allclose(scales, reference.x, atol=1e-4)


def _config(label_shift):
    return {"sources": {"s": {"type": "synthetic", "task": "lece3", "n_cal": 10, "n_test": 10,
                              "label_shift": label_shift}}, "methods": ["ts"], "metrics": ["acc"]}


def test_a_label_shift_entry_gets_its_defaults():
    entry = load(_config({"tweak_one": [0.9]}))["sources"]["s"]["label_shift"]
    assert entry["draws"] == 5 and "nll.em" in entry["metrics"] and "weight_mse.bbse_soft" in entry["metrics"]
    assert {"delta.acc.em", "acc.rlls", "collapse.em", "floor_share.em"} <= set(entry["metrics"])


@pytest.mark.parametrize("label_shift, message", [
    ({"draws": 2}, r"sources.s.label_shift: give `dirichlet` .* and/or `tweak_one`"),
    ({"tweak_one": [1.0]}, r"sources.s.label_shift.tweak_one.0: 1.0 is greater than or equal to the maximum of 1"),
    ({"dirichlet": [0.1], "metrics": ["nll.foo"]}, r"sources.s.label_shift.metrics: unknown metric id 'nll.foo'"),
    ({"dirichlet": [0.1], "metrics": ["true_ce.conf.l1.em"]},
     r"sources.s.label_shift.metrics: metric 'true_ce.conf.l1.em': 'true_ce.conf.l1' cannot be computed after"),
    ({"dirichlet": [0.1], "metrics": ["true_ce.conf.l1"]}, r"sources.s.label_shift.metrics: .* needs a true calib"),
])
def test_bad_label_shift_entries_are_refused_naming_the_key(label_shift, message):
    with pytest.raises(ConfigError, match=message):
        load(_config(label_shift))


def _pool_counts(ids, pool: int, resamples: int) -> np.ndarray:
    """The main tables' counts [R, n] of the test rows ``ids`` of a pool of ``pool`` rows."""
    from calbench.stats.resampling import SeedRows, unit_counts

    return np.concatenate(unit_counts(SeedRows("all", np.asarray(ids), pool), resamples))


def test_resampled_adaptation_metrics_equal_recomputing_them_on_each_resample():
    # the bootstrap of the label-shift tables: the test rows resampled as the main tables resample them and the set
    # redrawn from them (its class counts, hence its true priors, kept), the weights re-estimated on each resample;
    # the row-weighted forms must equal the metric recomputed on the redrawn rows
    from dataclasses import replace

    from calbench.data.label_shift import redraw_weights
    from calbench.metrics.evaluation import resampled_values

    probs, labels = _gaussian_task(np.full(3, 1 / 3), 3000, 6)
    cal_probs, cal_labels = _gaussian_task(np.full(3, 1 / 3), 2000, 7)
    name = "prior/dirichlet0.5/0"
    rows, true_priors = draw_rows(name, labels, 3, seed=0, size=800)
    sizes = np.bincount(labels[rows], minlength=3)
    pool = _pool_counts(np.arange(1000, 4000), 5000, 30)
    weights = redraw_weights(name, labels, sizes, 0, pool)
    counts = np.rint(weights * 800 / 3000).astype(int)
    np.testing.assert_allclose(weights * 800 / 3000, counts, atol=1e-9)
    np.testing.assert_array_equal(counts @ np.eye(3)[labels], np.tile(sizes, (30, 1)))
    np.testing.assert_array_equal(weights, redraw_weights(name, labels, sizes, 0, pool))  # the same for every method
    assert not (counts[pool == 0] > 0).any()  # a set redraws only rows the resample of the test rows drew
    # the redrawn sets reach test rows the set itself never drew: the interval carries the draw's variation
    assert (counts[:, np.setdiff1d(np.arange(3000), rows)] > 0).any()
    inputs = replace(LabelShiftInputs.from_calibration(cal_probs, cal_labels, None), true_priors=true_priors)
    ids = ["acc", "nll", "nll.em", "acc.em", "brier.bbse", "nll.bbse_soft", "acc.rlls", "delta.acc.em",
           "delta.nll.rlls", "nll.oracle", "ece.conf.ew15.l1.em", "ece.conf.ew15.l1.oracle", "prior_mse.em",
           "weight_mse.bbse", "weight_mse.rlls", "floor_share.bbse"]
    resampled = resampled_values(probs, labels, ids, weights, label_shift=inputs)
    assert set(resampled) == set(ids)
    for r in (0, 17):
        picked = np.repeat(np.arange(labels.size), counts[r])
        again = evaluate(probs[picked], labels[picked], ids, label_shift=inputs)
        for metric_id in ids:
            assert resampled[metric_id][r] == pytest.approx(again[metric_id], rel=1e-7, abs=1e-12), metric_id
    assert np.std(resampled["nll.em"]) > 0


def _long_table_and_resamples(gap: float):
    """Methods `good` and `bad` (nll.em higher by ``gap``) and a close second `near`, three seeds, a clean row and
    two strengths of one draw each; resamples ``{(source, method, seed): {"rows_of": "all", "sets": {strength: {metric:
    [R]}}}}`` (the seeds re-split one pool) with a row noise
    of sd 0.01 shared by the methods (paired) and 0.002 of their own."""
    rng = np.random.default_rng(0)
    rows, resamples = [], {}
    for seed in range(3):
        shared = rng.normal(scale=0.01, size=200)
        for method, offset in (("good", 0.0), ("near", 0.001), ("bad", gap)):
            rows.append(("src", method, seed, "clean", "nll", 0.5))
            for test_set in ("prior/dirichlet0.1/0", "prior/tweak_one0.9/0"):
                rows.append(("src", method, seed, test_set, "nll.em", 0.3 + offset + 0.001 * seed))
            value = 0.3 + offset + 0.001 * seed
            resamples["src", method, seed] = {"rows_of": "all", "sets": {
                key: {"nll.em": list(value + shared + rng.normal(scale=0.002, size=200))}
                for key in ("dirichlet0.1", "tweak_one0.9")}}
    import pandas as pd

    return pd.DataFrame(rows, columns=["source", "method", "seed", "test_set", "metric", "value"]), resamples


def test_label_shift_tables_show_paired_bootstrap_intervals_and_ties():
    from calbench.report.label_shift import NO_INTERVAL, strength_markdown
    from calbench.report.shift import ranking_rows

    long, resamples = _long_table_and_resamples(gap=0.05)
    table = strength_markdown(long, "nll.em", resamples, ["good", "near", "bad"])
    assert "| method | Dirichlet α=0.1 | tweak-one ρ=0.9 |" in table and NO_INTERVAL not in table
    cells = {line.split(" | ")[0].removeprefix("| "): line.split(" | ")[1] for line in table.splitlines()
             if line.startswith("| ") and "method" not in line}
    # the shared noise cancels in the paired differences: near (0.001 worse) is tied, bad (0.05 worse) is not
    assert cells["good"].startswith("**0.301 [") and cells["near"].startswith("**0.302 [")
    assert cells["bad"].startswith("0.351 [")
    low, high = (float(x) for x in cells["bad"].split("[")[1].rstrip("]").split(", "))
    assert low < 0.351 < high and high - low < 0.05
    with pytest.raises(ValueError, match="no shifted test sets"):  # the corruption tables leave prior/ sets out
        ranking_rows(long, under_shift=True)
    # without resamples (metrics JSONs of an older run) the table says nothing it cannot back
    bare = strength_markdown(long, "nll.em", {}, ["good", "near", "bad"])
    assert "| bad | 0.351 | 0.351 |" in bare and NO_INTERVAL in bare


def test_a_redrawn_set_takes_rows_in_proportion_to_their_counts_and_a_class_the_resample_missed_uniformly():
    from calbench.data.label_shift import redraw_weights

    labels = np.array([0] * 50 + [1])
    counts = np.ones((3, 51), dtype=int)
    counts[:, 50] = 0  # no resample drew the one row of class 1
    counts[1, :50], counts[1, 0] = 0, 51  # resample 1 drew row 0 of class 0 only
    weights = redraw_weights("prior/tweak_one0.5/0", labels, np.array([10, 5]), 0, counts) * 15 / 51
    np.testing.assert_array_equal(weights[:, 50], [5, 5, 5])  # class 1's 5 slots: its row, as the set drew it
    assert weights[1, 0] == 10 and weights[1, 1:50].sum() == 0
    assert weights[[0, 2], :50].sum(axis=1).tolist() == [10, 10] and (weights[0, :50] > 0).sum() > 5


def test_label_shift_cells_resample_the_main_tables_unit_and_say_so():
    """One unit everywhere: the counts the evaluate job redraws a seed's label-shifted sets from are the columns of
    that seed's test rows in the main tables' draw (seeds that re-split one pool read one count per pool row,
    whatever job reads them), and the tables' titles, recommend's records and the adapt-or-not table name the unit."""
    from calbench.report.label_shift import strength_markdown
    from calbench.report.label_shift_adapt import adapt_markdown
    from calbench.stats.resampling import Resampler, SeedRows, seed_rows, unit_counts

    pool, tests = 900, {0: np.sort(np.random.default_rng(0).permutation(900)[:500]),
                        1: np.sort(np.random.default_rng(1).permutation(900)[:500])}
    outputs = {seed: {"index": ids, "rows_of": "all", "group_rows": pool} for seed, ids in tests.items()}
    engine = Resampler([seed_rows(outputs[s], s) for s in (0, 1)], 40)
    for j, seed in enumerate((0, 1)):  # the evaluate job sees one seed and reads the same counts
        np.testing.assert_array_equal(np.concatenate(unit_counts(seed_rows(outputs[seed], seed), 40)),
                                      np.concatenate(engine.counts(j)))
    both = np.intersect1d(tests[0], tests[1])
    first, second = (np.concatenate(unit_counts(SeedRows("all", tests[s], pool), 40)) for s in (0, 1))
    np.testing.assert_array_equal(first[:, np.searchsorted(tests[0], both)], second[:, np.searchsorted(tests[1], both)])
    long, resamples = _long_table_and_resamples(gap=0.05)
    title = strength_markdown(long, "nll.em", resamples).splitlines()[0]
    assert ("resampling unit: pool rows (one count per row of the pool the seeds re-split, shared by the seeds that "
            "test on it), each label-shifted set redrawn from them") in title and "(1000 resamples)" in title
    own = {key: {**found, "rows_of": f"seed{key[2]}/test"} for key, found in resamples.items()}
    assert "resampling unit: test rows, each label-shifted set redrawn from them" in strength_markdown(
        long, "nll.em", own).splitlines()[0]
    assert "resampling unit: pool rows" in adapt_markdown(long, resamples).splitlines()[0]


def test_recommend_under_label_shift_prints_intervals_and_ties(tmp_path, capsys):
    import json

    from calbench.__main__ import main

    long, resamples = _long_table_and_resamples(gap=0.05)
    write_label_shift_run(tmp_path, long, resamples)
    assert main(["recommend", str(tmp_path), "--under-label-shift"]) == 0
    out = capsys.readouterr().out
    assert "nll.em, lower is better" in out and "src: good 0.301 [" in out
    assert "tied with the best: near 0.302" in out and "worse than good: bad 0.351" in out
    assert main(["recommend", str(tmp_path), "--under-label-shift", "--json"]) == 0
    records = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    assert records["good"]["low"] < 0.301 < records["good"]["high"] and records["good"]["unit"] == "pool rows"
    assert records["near"]["tied_with_best"] and not records["bad"]["tied_with_best"]
