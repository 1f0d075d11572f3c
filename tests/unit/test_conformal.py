"""Conformal prediction sets (calbench.metrics.conformal, conformal_eval): each construction against its paper's
definition on hand-checked cases, the finite-sample coverage guarantee, the bootstrap form, and that the
conformal-calibration rows are test rows, never the calibrator's calibration rows."""

import json

import numpy as np
import pytest

from calbench.metrics import conformal as cp
from calbench.metrics import conformal_eval as ce
from calbench.metrics import evaluate
from calbench.metrics.evaluation import evaluate_resampled

ROW = np.array([[0.5, 0.3, 0.2]])


def test_quantile_is_the_finite_sample_order_statistic():
    # ⌈(n + 1)(1 − α)⌉-th smallest (Angelopoulos & Bates 2023, Eq. 1): n = 10, α = 0.2 → 9th; α = 0.1 → 10th
    scores = np.arange(1, 11) / 10
    assert cp.conformal_quantile(scores[::-1], 0.2) == pytest.approx(0.9)
    assert cp.conformal_quantile(scores, 0.1) == pytest.approx(1.0)
    assert cp.conformal_quantile(scores[:5], 0.1) == np.inf  # ⌈6 · 0.9⌉ = 6 > 5: every label enters


def test_lac_keeps_the_labels_whose_probability_reaches_one_minus_q():
    # Sadinle et al. 2019 Eq. 2: C(x) = {y : p̂_y ≥ 1 − q̂}; calibration scores 1 − p̂_y of [0.5, 0.3, 0.3, 0.2]
    cal = np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    sets, info = cp.prediction_sets(cal, np.array([0, 1, 1, 0]), ROW, "lac", 0.5)
    # n = 4, α = 0.5: ⌈5 · 0.5⌉ = 3rd smallest of {0.5, 0.7, 0.8, 0.9} = 0.8
    assert info["q"] == pytest.approx(0.8)
    assert sets.tolist() == [[True, True, True]]


def test_aps_scores_are_the_mass_above_plus_u_times_the_label():
    # Romano et al. 2020 Eq. 7: E = ρ + u·p̂_y; row [0.5, 0.3, 0.2] with u = 0.5 → [0.25, 0.65, 0.9]
    rows = cp.sort_rows(ROW)
    assert cp.adaptive_scores(rows, np.array([0.5]))[0] == pytest.approx([0.25, 0.65, 0.9])
    assert cp.true_label_scores(rows, np.array([1]), np.array([0.5])) == pytest.approx([0.65])
    sets, _ = cp.prediction_sets(ROW, np.array([1]), ROW, "aps", 0.4, u_cal=np.array([0.5]),
                                 u_test=np.array([0.5]))
    # one calibration row at α = 0.4: ⌈2 · 0.6⌉ = 2 > 1 → q = ∞ → the full set
    assert sets.tolist() == [[True, True, True]]


def test_non_randomised_aps_includes_the_label_that_crosses_the_threshold():
    # calibration score ρ + p̂ (u = 1); the set runs up to the label whose cumulative mass crosses q̂ (Eq. 5's L)
    cal = np.array([[0.5, 0.3, 0.2]] * 3)
    sets, info = cp.prediction_sets(cal, np.array([0, 0, 1]), ROW, "aps_nr", 0.5)
    # scores 0.5, 0.5, 0.8; ⌈4 · 0.5⌉ = 2nd smallest = 0.5; inclusion scores ρ = [0, 0.5, 0.8] ≤ 0.5 → {0, 1}
    assert info["q"] == pytest.approx(0.5)
    assert sets.tolist() == [[True, True, False]]


def test_raps_adds_its_rank_penalty_to_both_scores():
    # Angelopoulos et al. 2021 Eq. 4: λ·(k − k_reg)⁺ at 1-based rank k
    assert cp.penalty(4, 0.1, 2) == pytest.approx([0, 0, 0.1, 0.2])
    rows = cp.sort_rows(ROW)
    pen = cp.penalty(3, 0.1, 1)
    assert cp.adaptive_scores(rows, np.array([1.0]), pen)[0] == pytest.approx([0.5, 0.9, 1.2])
    assert cp.true_label_scores(rows, np.array([2]), 0.0, pen) == pytest.approx([1.0])


def test_raps_chooses_k_reg_from_the_true_ranks_and_lambda_by_size():
    # k_reg: the 1 − α "higher" quantile of 0-based true-label ranks plus one (their code's pick_kreg)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 10)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = (probs.cumsum(1) > rng.random(400)[:, None]).argmax(1)
    rows = cp.sort_rows(probs)
    k_reg, lam = cp.raps_parameters(rows, labels, 0.1, None)
    ranks = rows.rank[np.arange(400), labels]
    assert k_reg == int(np.quantile(ranks, 0.9, method="higher")) + 1
    sizes = {}
    for value in cp.RAPS_LAMBDAS:
        pen = cp.penalty(10, value, k_reg)
        q = cp.conformal_quantile(cp.true_label_scores(rows, labels, 1.0, pen), 0.1)
        sizes[value] = np.mean(np.sum(cp.adaptive_scores(rows, 0.0, pen) <= q, axis=1))
    assert lam == min(sizes, key=lambda v: (sizes[v], cp.RAPS_LAMBDAS.index(v)))


def test_mondrian_lac_calibrates_each_class_on_its_own_rows():
    scores = np.array([0.1, 0.2, 0.3, 0.9, 0.4, 0.5])
    labels = np.array([0, 0, 0, 0, 1, 1])
    # class 0: n = 4, α = 0.25 → ⌈5 · 0.75⌉ = 4th smallest = 0.9; class 1: n = 2 → ⌈3 · 0.75⌉ = 3 > 2 → ∞;
    # class 2: no rows → ∞
    assert cp.class_quantiles(scores, labels, 3, 0.25).tolist() == [0.9, np.inf, np.inf]
    for c in range(2):
        assert cp.class_quantiles(scores, labels, 3, 0.25)[c] == cp.conformal_quantile(scores[labels == c], 0.25)


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="construction 'thr'"):
        cp.prediction_sets(ROW, np.array([0]), ROW, "thr", 0.1)
    with pytest.raises(ValueError, match="alpha=1.5"):
        cp.prediction_sets(ROW, np.array([0]), ROW, "lac", 1.5)
    with pytest.raises(ValueError, match="at least 2 test rows"):
        ce.divisions(1)


def _synthetic(n, classes, seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, classes)) * 2.5
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = (probs.cumsum(1) > rng.random(n)[:, None]).argmax(1)
    return probs, np.minimum(labels, classes - 1)


@pytest.mark.parametrize("construction", cp.CONSTRUCTIONS)
def test_coverage_meets_the_guarantee_on_exchangeable_data(construction):
    # Vovk et al. 2005; Romano et al. 2020 Thm. 1; Angelopoulos et al. 2021 Prop. 1: averaged over random
    # divisions of exchangeable rows, coverage ≥ 1 − α (and ≤ 1 − α + 1/(n_cal + 1) for the randomised scores,
    # whose ties have probability 0). The slack is three standard errors of the mean over 400 divisions.
    probs, labels = _synthetic(1200, 6, seed=3)
    sets = ce.division_sets(probs, labels, construction, 0.1, seed=7, count=400)
    coverage = np.array([s.covered.mean() for s in sets])
    slack = 3 * coverage.std() / np.sqrt(coverage.size)
    assert coverage.mean() >= 0.9 - slack
    if construction in ("aps", "raps", "lac"):
        n_cal = min(s.cal_scores.size for s in sets)
        assert coverage.mean() <= 0.9 + 1 / (n_cal + 1) + slack


def test_resamples_of_all_ones_give_the_estimate_and_counts_weight_rows():
    probs, labels = _synthetic(600, 5, seed=1)
    ids = [f"{kind}.{c}.a10.div4" for c in cp.CONSTRUCTIONS for kind in ce.KINDS]
    estimates, draws = evaluate_resampled(probs, labels, ids, np.ones((2, 600), dtype=np.int64), seed=2)
    for metric_id, values in draws.items():
        assert values == pytest.approx([estimates[metric_id]] * 2, abs=1e-12), metric_id
    # a resample is the division's rows repeated by their counts: LAC by hand on the expanded rows
    counts = np.random.default_rng(5).integers(0, 3, size=(1, 600))
    _, draws = evaluate_resampled(probs, labels, ["coverage.lac.a10.div1", "set_size.lac.a10.div1"], counts, seed=2)
    (division,) = ce.division_sets(probs, labels, "lac", 0.1, seed=2, count=1)
    cal = np.repeat(division.cal_rows, counts[0, division.cal_rows])
    ev = np.repeat(division.rows, counts[0, division.rows])
    q = cp.conformal_quantile(1 - probs[cal, labels[cal]], 0.1)
    assert draws["coverage.lac.a10.div1"][0] == pytest.approx(np.mean(1 - probs[ev, labels[ev]] <= q))
    assert draws["set_size.lac.a10.div1"][0] == pytest.approx(np.mean(np.sum(1 - probs[ev] <= q, axis=1)))
    # and Mondrian LAC: one threshold per class from that class's repeated calibration rows
    _, draws = evaluate_resampled(probs, labels, ["set_size.lac_cc.a10.div1", "coverage.lac_cc.a10.div1"], counts,
                                  seed=2)
    q = cp.class_quantiles(1 - probs[cal, labels[cal]], labels[cal], 5, 0.1)
    assert draws["set_size.lac_cc.a10.div1"][0] == pytest.approx(np.mean(np.sum(1 - probs[ev] <= q, axis=1)))
    assert draws["coverage.lac_cc.a10.div1"][0] == pytest.approx(np.mean(1 - probs[ev, labels[ev]] <= q[labels[ev]]))


def test_metric_values_are_the_mean_over_divisions():
    probs, labels = _synthetic(500, 4, seed=2)
    values = evaluate(probs, labels, ["set_size.aps.a05.cal30.div3", "cc_gap_top.aps.a05.cal30.div3"], seed=4)
    sets = ce.division_sets(probs, labels, "aps", 0.05, seed=4, count=3, cal_fraction=0.3)
    assert all(s.cal_rows.size == 150 and s.rows.size == 350 for s in sets)
    assert values["set_size.aps.a05.cal30.div3"] == pytest.approx(np.mean([s.sizes.mean() for s in sets]))
    # K = 4: the top 5 % of class gaps is the worst class (Dabah & Tirer's TopCovGap, at least one class)
    worst = [max(abs(s.covered[labels[s.rows] == c].mean() - 0.95) for c in range(4)) for s in sets]
    assert values["cc_gap_top.aps.a05.cal30.div3"] == pytest.approx(np.mean(worst))


def test_sscv_is_the_worst_stratum_violation():
    # Angelopoulos et al. 2021 Eq. 6 with strata {0–1, 2–3, 4–6, ...}
    sets = ce.DivisionSets(np.arange(6), np.array([1, 1, 0, 1, 0, 0], bool), np.array([1, 1, 2, 3, 5, 5]),
                           np.arange(0), np.zeros(0), np.zeros((6, 1)), np.zeros(6))
    values = ce.summaries(sets, np.zeros(6, dtype=int), 0.1, 1)
    assert values["sscv"] == pytest.approx(0.9)  # stratum 4–6: coverage 0
    assert values["set_size_median"] == 2.5


def test_divisions_partition_the_test_rows_alike_for_every_method():
    cal, ev = ce.divisions(101, count=5, cal_fraction=0.4, seed=9)
    assert cal.shape == (5, 40) and ev.shape == (5, 61)
    for c, e in zip(cal, ev):
        assert sorted(np.concatenate([c, e])) == list(range(101))
    assert np.array_equal(ce.divisions(101, count=5, cal_fraction=0.4, seed=9)[0], cal)


def test_conformal_rows_are_test_rows_never_the_calibrators_rows(tmp_path):
    # the evaluate job passes only the calibrated test outputs: the conformal metrics of its JSON are those of the
    # test rows alone, whose pool indices never meet the calibrator's calibration rows
    from calbench.data import store
    from calbench.jobs.calibrate import CalibrateSpec, calibrate_job
    from calbench.jobs.evaluate import EvaluateSpec, evaluate_job

    dump = tmp_path / "dump.h5"  # one pool that the seed splits into calibration and test rows
    logits = np.random.default_rng(0).normal(size=(700, 5)) * 3
    labels = (logits + np.random.default_rng(1).gumbel(size=logits.shape)).argmax(1)
    store.write_dump(dump, {"all": {"logits": logits.astype(np.float32), "labels": labels}}, {"num_classes": 5})
    calibrated, metrics = tmp_path / "ts.h5", tmp_path / "ts.json"
    calibrate_job(spec=CalibrateSpec(source="toy", method="ts", seed=0, method_settings={"ts": {}},
                                     split={"cal_size": 300}, input_kind="logits", dump=dump, calibrated=calibrated))
    ids = ["coverage.aps.a10", "set_size.raps.a10"]
    evaluate_job(spec=EvaluateSpec(source="toy", method="ts", seed=0, metrics=ids, split={"cal_size": 300},
                                   calibrated=calibrated, dump=dump, output=metrics))
    test = store.read_calibrated(calibrated, "test")
    cal_index = store.read_group(calibrated, "cal")["index"]
    assert cal_index.size == 300 and test["index"].size == 400
    assert not set(cal_index.tolist()) & set(test["index"].tolist())
    recorded = json.loads(metrics.read_text())
    assert {m: recorded[m] for m in ids} == pytest.approx(evaluate(test["probs"], test["labels"], ids, seed=0))


def test_recommend_ranks_by_a_conformal_metric(tmp_path, capsys):
    """`calbench recommend --metric set_size.aps.a10` ranks the methods by their mean set size (smaller first)."""
    import pandas as pd

    from calbench.cli import main

    rows = [("s", method, seed, "set_size.aps.a10", value + 0.01 * seed) for seed in range(3)
            for method, value in (("ts", 5.5), ("conf_ts", 4.1), ("uncal", 4.4))]
    (tmp_path / "tables").mkdir()
    pd.DataFrame(rows, columns=["source", "method", "seed", "metric", "value"]).to_csv(
        tmp_path / "tables/metrics_long.csv", index=False)
    assert main(["recommend", str(tmp_path), "--metric", "set_size.aps.a10"]) == 0
    out = capsys.readouterr().out
    assert "set_size.aps.a10, lower is better" in out
    assert "s: conf_ts 4.11" in out and "untested: uncal 4.41, ts 5.51" in out


def test_label_shifted_sets_get_conformal_metrics_before_and_after_adaptation():
    # a conformal id on a label-shifted set (docs/conformal.md "Under shift"): the set divided into halves as the
    # clean test split is; `<id>.em` / `.oracle` are the sets of the probabilities re-weighted to the estimated or
    # true priors (Saerens et al. 2002, Eq. 2.4). With one class at 85 %, adapting puts its mass where the labels
    # are: the sets shrink while the split-conformal guarantee (Romano et al. 2020, Thm. 1) keeps coverage.
    from scipy.special import softmax

    from calbench.metrics.label_shift import LabelShiftInputs

    def gaussian_classes(priors, n, seed):  # exact posteriors of unit-variance classes at the unit vectors, softened
        rng = np.random.default_rng(seed)
        labels = rng.choice(4, size=n, p=priors)
        x = np.eye(4)[labels] + rng.normal(size=(n, 4))
        return softmax(-0.25 * ((x[:, None, :] - np.eye(4)[None]) ** 2).sum(-1), axis=1), labels

    cal, cal_labels = gaussian_classes(np.full(4, 0.25), 3000, 5)
    probs, labels = gaussian_classes(np.array([0.85, 0.05, 0.05, 0.05]), 3000, 6)
    inputs = LabelShiftInputs.from_calibration(cal, cal_labels, np.bincount(labels, minlength=4) / labels.size)
    ids = ["set_size.aps.a10", "coverage.aps.a10", "set_size.aps.a10.em", "coverage.aps.a10.em",
           "set_size.aps.a10.oracle", "coverage.lac.a10.oracle"]
    values = evaluate(probs, labels, ids, label_shift=inputs, bootstrap=20)
    assert values["set_size.aps.a10.em"] < 0.6 * values["set_size.aps.a10"]
    assert values["set_size.aps.a10.oracle"] < 0.6 * values["set_size.aps.a10"]
    for metric in ("coverage.aps.a10", "coverage.aps.a10.em", "coverage.lac.a10.oracle"):
        assert values[metric] == pytest.approx(0.9, abs=0.01)
    low, high = values["set_size.aps.a10.em.ci_low"], values["set_size.aps.a10.em.ci_high"]
    assert low < values["set_size.aps.a10.em"] < high
