"""Evaluation metrics: binned/debiased/CV ECE, KDE-ECE, SKCE, p-ECE, KCal ECE, ECE gain,
fit-on-test estimators, CMEE and bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, softmax
from scipy.stats import norm

from calbench.data.synthetic import lece3, sample_categorical
from calbench.maps1d.piecewise import prefer_fewer
from calbench.metrics import evaluate
from calbench.metrics.binned import binned_ece, classwise_columns, cv_bin_counts, folded_normal_mean
from calbench.metrics.consistency import p_value
from calbench.metrics.kcal import adaptive_bins, kcal_threshold
from calbench.metrics.kde_ece import kde_ece
from calbench.metrics.kernel_ce import skce_ul, skce_uq
from conftest import shared_data


def calibrated(n, classes=5, seed=0, concentration=0.5):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(classes, concentration), size=n)
    return probs, sample_categorical(probs, rng)


def sharpen(probs, power=2.0):
    q = probs**power
    return q / q.sum(axis=1, keepdims=True)


# -- binned ECE -----------------------------------------------------------------------------------

@pytest.mark.parametrize("binning", ["em1", "ew1"])
def test_one_bin_ece_is_gap_between_mean_confidence_and_accuracy(binning):
    probs, labels = calibrated(500, seed=1)
    probs = sharpen(probs)
    gap = abs(probs.max(axis=1).mean() - np.mean(probs.argmax(axis=1) == labels))
    assert evaluate(probs, labels, [f"ece.conf.{binning}.l1"])[f"ece.conf.{binning}.l1"] == pytest.approx(gap)
    assert evaluate(probs, labels, [f"ece.conf.{binning}.l2"])[f"ece.conf.{binning}.l2"] == pytest.approx(gap)


def test_debiased_one_bin_by_hand():
    scores = np.array([[0.9], [0.8], [0.7], [0.6]])
    hits = np.array([[1.0], [0.0], [1.0], [1.0]])
    p_bar, y_bar, n = 0.75, 0.75, 4
    assert binned_ece(scores, hits, 1, "em", "l2", debiased=True)[0] == 0.0  # gap 0, correction clipped at 0
    hits = np.array([[1.0], [1.0], [1.0], [0.0]])
    scores = scores - 0.4  # p̄ = 0.35
    p_bar = 0.35
    sq = (y_bar - p_bar) ** 2 - y_bar * (1 - y_bar) / (n - 1)
    assert binned_ece(scores, hits, 1, "em", "l2", debiased=True)[0] == pytest.approx(np.sqrt(sq))
    sigma = np.sqrt(y_bar * (1 - y_bar) / n)
    # the paper's numerical integration over ȳ ± 5σ (App. C.5)
    grid = np.linspace(y_bar - 5 * sigma, y_bar + 5 * sigma, 10_001)
    integrand = norm.pdf(grid, y_bar, sigma) * np.abs(p_bar - grid)
    bias = np.sum((integrand[1:] + integrand[:-1]) / 2 * np.diff(grid))
    assert binned_ece(scores, hits, 1, "em", "l1", debiased=True)[0] == pytest.approx(2 * 0.4 - bias, abs=1e-6)


def test_folded_normal_mean_matches_monte_carlo():
    rng = np.random.default_rng(0)
    draws = rng.normal(0.1, 0.2, size=400_000)
    assert folded_normal_mean(np.array(0.1), np.array(0.2)) == pytest.approx(np.mean(np.abs(draws)), abs=2e-3)
    assert folded_normal_mean(np.array(-0.3), np.array(0.0)) == pytest.approx(0.3)


def test_debiasing_removes_most_of_the_bias_on_calibrated_data():
    probs, labels = calibrated(2000, seed=3)
    ids = ["ece.conf.em15.l1", "ece.conf.em15.l1.debiased", "ece.conf.em15.l2", "ece.conf.em15.l2.debiased"]
    values = evaluate(probs, labels, ids)
    assert values["ece.conf.em15.l1.debiased"] < 0.8 * values["ece.conf.em15.l1"]
    assert values["ece.conf.em15.l2.debiased"] < 0.5 * values["ece.conf.em15.l2"]


def test_prefer_fewer_rule():
    assert prefer_fewer([1.0, 0.9995, 0.999, 1.2]) == 1  # within 0.1 % of the best (index 2)
    assert prefer_fewer([0.9995, 1.5, 0.999]) == 0  # smallest qualifying even past a non-qualifying one
    assert prefer_fewer([2.0, 1.0, 1.5]) == 1


def test_cv_bins_pick_fewer_bins_on_calibrated_data():
    rng = np.random.default_rng(5)
    p = rng.uniform(size=(5000, 1))
    hits_calibrated = (rng.uniform(size=p.shape) < p).astype(float)
    hits_curved = (rng.uniform(size=p.shape) < 0.5 + 0.45 * np.sin(2 * np.pi * p)).astype(float)
    for scheme in ("em", "ew"):
        calibrated_bins = cv_bin_counts(p, hits_calibrated, scheme)[0]
        curved_bins = cv_bin_counts(p, hits_curved, scheme)[0]
        assert calibrated_bins <= 2 < curved_bins


def test_cv_ece_ids_and_classwise_bins_are_per_class():
    probs, labels = calibrated(3000, seed=2)
    probs = sharpen(probs, 1.5)
    values = evaluate(probs, labels, ["ece.conf.cv.l1", "ece.conf.emcv.l1", "ece.cw.ewcv.l1", "ece.cw.cv.l2.debiased"])
    assert values["ece.conf.cv.l1"] == values["ece.conf.emcv.l1"]
    scores, hits = classwise_columns(probs, labels)
    chosen = cv_bin_counts(scores, hits, "ew")
    per_class = [binned_ece(scores[:, [j]], hits[:, [j]], int(b), "ew")[0] for j, b in enumerate(chosen)]
    assert values["ece.cw.ewcv.l1"] == pytest.approx(np.mean(per_class))


def test_lece_table3_uncalibrated_confidence_ece_from_toplabel_outputs():
    """LECE paper Table 3, "uncal" column (×100, 15 equal-size bins) via the shared top-label files."""
    expected = {"densenet40_c10": 5.49, "resnet110_c10": 4.75, "densenet40_c100": 21.16, "resnet110_c100": 18.48}
    for name, value in expected.items():
        frame = pd.read_csv(shared_data("toplabel", f"probs_{name}_logits.csv"))
        scores = frame["confidence"].to_numpy()[:, None]
        hits = (frame["true_label"] == frame["pred_label"]).to_numpy(float)[:, None]
        assert round(100 * binned_ece(scores, hits, 15, "em")[0], 2) == value
        # the CV-bins and debiased variants are smaller estimates of the same quantity here
        assert 100 * binned_ece(scores, hits, "cv", "em", debiased=True)[0] == pytest.approx(value, abs=1.0)


# -- KCal convention ----------------------------------------------------------------------------

def test_kcal_adaptive_bins_put_the_remainder_last_and_drop_small_probabilities():
    scores = np.linspace(0.2, 0.9, 23)[:, None]
    bins = adaptive_bins(scores, np.ones_like(scores, bool), 5)[:, 0]
    assert np.bincount(bins).tolist() == [4, 4, 5, 5, 5]
    assert kcal_threshold(10) == 0.01 and kcal_threshold(200) == 0.005
    probs = np.array([[0.995, 0.005], [0.3, 0.7], [0.6, 0.4], [0.2, 0.8]])
    labels = np.array([0, 1, 1, 1])
    # τ = 0.01 drops the 0.005 entry of class 1; one bin per class
    class0 = abs((0.995 + 0.3 + 0.6 + 0.2) - 1) / 4
    class1 = abs((0.7 + 0.4 + 0.8) - 3) / 3
    got = evaluate(probs, labels, ["ece.cw.em1.l1.kcal"])["ece.cw.em1.l1.kcal"]
    assert got == pytest.approx((class0 + class1) / 2)


# -- KDE-ECE ------------------------------------------------------------------------------------

def _mnm_task(n, beta0, beta1, rng):
    """Mix-n-Match §5.1: x | y ~ N(∓1, 1), z1 = σ(β0 + β1 x); true π1(z) from Eq. 14."""
    y = rng.integers(2, size=n)
    x = rng.normal(np.where(y == 1, -1.0, 1.0), 1.0)
    return expit(beta0 + beta1 * x), y.astype(float)


@pytest.mark.parametrize("beta", [(0.5, -1.5), (0.2, -1.9)])
def test_kde_ece_converges_to_true_ce_on_mix_n_match_synthetic_task(beta):
    rng = np.random.default_rng(0)
    z, _ = _mnm_task(1_000_000, *beta, np.random.default_rng(1))
    true_ce = np.mean(np.abs(z - expit(2 * (beta[0] + np.log(1 / z - 1)) / beta[1])))
    errors = {n: np.mean([abs(kde_ece(*_mnm_task(n, *beta, rng)) - true_ce) for _ in range(20)])
              for n in (128, 1024, 8192)}
    assert errors[8192] < errors[1024] < errors[128]
    assert errors[8192] < 0.005


def test_kde_ece_conventions_differ_only_in_bandwidth():
    """Its cost on 10,000 rows is measured by `make bench` (calbench.perf.metrics.kde_ece_10k), not here."""
    rng = np.random.default_rng(2)
    z, y = _mnm_task(10_000, 0.5, -1.5, rng)
    paper = kde_ece(z, y)
    code = kde_ece(z, y, convention="mnm_code")
    assert paper == pytest.approx(code, abs=0.01)
    assert kde_ece(z, y, "l2") >= paper  # the root mean square dominates the mean absolute error


# -- SKCE -------------------------------------------------------------------------------------

def test_skce_unbiased_estimates_average_zero_on_calibrated_data():
    values = [skce_ul(*calibrated(2000, seed=s)) for s in range(40)]
    assert abs(np.mean(values)) < 3 * np.std(values) / np.sqrt(len(values))
    quadratic = [skce_uq(*calibrated(300, seed=s)) for s in range(20)]
    assert abs(np.mean(quadratic)) < 3 * np.std(quadratic) / np.sqrt(len(quadratic))
    probs, labels = calibrated(2000, seed=99)
    assert skce_uq(sharpen(probs, 3), labels) > 5 * np.std(quadratic)


def test_skce_quadratic_matches_brute_force():
    probs, labels = calibrated(60, seed=4)
    residual = np.eye(5)[labels] - probs
    kernel = np.exp(-np.linalg.norm(probs[:, None] - probs[None], axis=2))
    h = kernel * (residual @ residual.T)
    assert skce_uq(probs, labels, block=7) == pytest.approx((h.sum() - np.trace(h)) / (60 * 59))
    pairs = [kernel[i, i + 1] * residual[i] @ residual[i + 1] for i in range(0, 60, 2)]
    assert skce_ul(probs, labels) == pytest.approx(np.mean(pairs))


# -- p-ECE ------------------------------------------------------------------------------------

def test_p_value_counts_ties_half_like_percentileofscore():
    samples = np.array([1.0, 2.0, 3.0, 4.0])
    assert p_value(2.5, samples) == 0.5
    assert p_value(2.0, samples) == 0.5
    assert p_value(5.0, samples) == 0.0


def test_p_ece_accepts_calibrated_and_rejects_overconfident_models():
    probs, labels = calibrated(3000, seed=7)
    values = evaluate(probs, labels, ["p_ece.conf", "p_ece.cw", "p_ece.conf.em10"], seed=1)
    assert min(values.values()) > 0.01
    bad = evaluate(sharpen(probs, 2), labels, ["p_ece.conf", "p_ece.cw"], seed=1)
    assert max(bad.values()) == 0.0
    assert evaluate(probs, labels, ["p_ece.cw"], seed=1) == evaluate(probs, labels, ["p_ece.cw"], seed=1)


# -- ECE gain, fit-on-test estimators, CMEE --------------------------------------------------

def test_ece_gain_is_the_brier_improvement_and_needs_uncalibrated_probabilities():
    probs, labels = calibrated(1000, seed=8)
    sharp = sharpen(probs)
    onehot = np.eye(5)[labels]
    expected = np.mean(np.sum((sharp - onehot) ** 2, 1) - np.sum((probs - onehot) ** 2, 1))
    assert evaluate(probs, labels, ["ece_gain.l2"], uncal_probs=sharp)["ece_gain.l2"] == pytest.approx(expected)
    assert expected > 0
    with pytest.raises(ValueError, match="uncalibrated"):
        evaluate(probs, labels, ["ece_gain.l2"])


def test_fit_on_test_estimators_are_small_on_calibrated_and_large_on_miscalibrated_data():
    probs, labels = calibrated(4000, seed=9)
    ids = ["ece.conf.platt.l1", "ece.conf.beta.l1", "ece.conf.iso.l1", "ece.cw.platt.l2", "ece.cw.beta.l1"]
    good = evaluate(probs, labels, ids)
    bad = evaluate(sharpen(probs, 2.5), labels, ids)
    for metric_id in ids:  # isotonic overfits the test set most (the paper's Table 28: largest bias)
        assert good[metric_id] < (0.04 if ".iso." in metric_id else 0.01) < 0.05 < bad[metric_id], metric_id


def test_cmee_on_lece_synthetic_data_with_known_true_map():
    data = lece3(5000, np.random.default_rng(0))
    probs = softmax(data["logits"], axis=1)
    ids = ["cmee.cw.iso.l1", "cmee.cw.beta.l1", "true_ce.cw.l1", "cmee.conf.platt.l2"]
    values = evaluate(probs, data["labels"], ids, true_probs=data["true_probs"])
    # a fitted map is closer to the true map than the uncalibrated prediction is
    assert values["cmee.cw.beta.l1"] < values["true_ce.cw.l1"]
    assert values["cmee.cw.iso.l1"] < values["true_ce.cw.l1"]
    with pytest.raises(ValueError, match="true calibration map"):
        evaluate(probs, data["labels"], ["cmee.cw.iso.l1"])


# -- bootstrap ---------------------------------------------------------------------------------

def test_bootstrap_intervals_cover_the_estimate_and_pointwise_path_matches_refitting():
    from calbench.metrics.bootstrap import resample_indices

    probs, labels = calibrated(800, seed=10)
    out = evaluate(probs, labels, ["acc", "ece.conf.em10.l1", "nll"], bootstrap=300, level=0.9, seed=4)
    for metric_id in ("acc", "ece.conf.em10.l1", "nll"):
        assert out[f"{metric_id}.ci_low"] <= out[metric_id] <= out[f"{metric_id}.ci_high"]
    idx = resample_indices(800, 300, 4)
    refit = [np.mean(probs[i].argmax(1) == labels[i]) for i in idx]
    percentile = evaluate(probs, labels, ["acc"], bootstrap=300, level=0.9, seed=4, interval="percentile")
    assert percentile["acc.ci_low"] == pytest.approx(np.quantile(refit, 0.05))
    assert percentile["acc.ci_high"] == pytest.approx(np.quantile(refit, 0.95))
    assert out["acc.ci_low"] == pytest.approx(2 * out["acc"] - np.quantile(refit, 0.95))
    narrow = evaluate(probs, labels, ["acc"], bootstrap=300, level=0.5, seed=4)
    assert narrow["acc.ci_high"] - narrow["acc.ci_low"] < out["acc.ci_high"] - out["acc.ci_low"]


def test_bootstrap_of_binned_ece_and_mce_from_resample_counts_equals_recomputing_each_resample(monkeypatch):
    """Binned estimators from the row counts of all resamples at once (the compiled passes of
    calbench.kernels.resampled_bins, 7 resamples at a time; equal-mass in blocks of 3 sorted rows) give the
    resample loop's values within 1e-8, ties of different hits included (taken in the order of their rows, as the
    loop's stable sort of the drawn rows takes them)."""
    from calbench.kernels import resampled_bins
    from calbench.metrics import binned
    from calbench.metrics.bootstrap import bootstrap_intervals, resample_indices
    from calbench.metrics.registry import MetricContext, lookup

    monkeypatch.setattr(binned, "RESAMPLE_RANK_BLOCK", 3)
    monkeypatch.setattr(resampled_bins, "LANES", 7)
    probs, labels = calibrated(300, classes=4, seed=11)
    probs[:20], labels[:20] = probs[0], labels[0]  # tied rows (same scores and hits)
    ids = ["ece.conf.ew15.l1", "ece.cw.ew10.l2", "ece.cw.ew7.l1.debiased", "ece.conf.ew5.l2.debiased",
           "mce.conf.ew15", "ece.conf.em10.l1", "ece.cw.em15.l1", "ece.conf.em7.l2.debiased", "mce.conf.em6",
           "ece.conf.cv.l1"]
    ctx = MetricContext(probs, labels, seed=3)
    families = [(m, *lookup(m)) for m in ids]
    estimates = {m: f.function(ctx, **g) for m, f, g in families}
    fast = bootstrap_intervals(ctx, families, estimates, 40, 0.9, "percentile")
    loop = [[f.function(MetricContext(probs[i], labels[i]), **g) for _, f, g in families]
            for i in resample_indices(300, 40, 3)]
    for metric_id, column in zip(ids, np.array(loop).T):
        low, high = np.quantile(column, [0.05, 0.95])
        assert fast[f"{metric_id}.ci_low"] == pytest.approx(low, abs=1e-8), metric_id
        assert fast[f"{metric_id}.ci_high"] == pytest.approx(high, abs=1e-8), metric_id
    counts = np.bincount(resample_indices(300, 40, 3)[5], minlength=300)[None]
    family, groups = lookup("ece.cw.ew10.l2")
    np.testing.assert_allclose(family.resampled(ctx, counts, **groups), loop[5][1], rtol=0, atol=1e-8)
    family, groups = lookup("ece.cw.em15.l1")
    np.testing.assert_allclose(family.resampled(ctx, counts, **groups), loop[5][6], rtol=0, atol=1e-8)
    assert lookup("ece.conf.cv.l1")[0].resampled(ctx, counts, **lookup("ece.conf.cv.l1")[1]) is None
    labels[1] = (labels[0] + 1) % 4  # rows 0 and 1: same scores, different hits → the re-sort's tie order matters
    tied = MetricContext(probs, labels, seed=3)
    conf, conf_groups = lookup("ece.conf.em10.l1")
    drawn = np.repeat(np.arange(300), counts[0])
    np.testing.assert_allclose(conf.resampled(tied, counts, **conf_groups),
                               conf.function(MetricContext(probs[drawn], labels[drawn]), **conf_groups), rtol=0,
                               atol=1e-12)
    ties = bootstrap_intervals(tied, [("ece.conf.em10.l1", conf, conf_groups)], {"ece.conf.em10.l1": 0.0}, 40, 0.9,
                               "percentile")
    loop = [conf.function(MetricContext(probs[i], labels[i]), **conf_groups) for i in resample_indices(300, 40, 3)]
    assert ties["ece.conf.em10.l1.ci_low"] == pytest.approx(np.quantile(loop, 0.05), abs=1e-12)
    # classwise: the columns with the tie as the others, equal to binning the resample's rows (row i counts[0, i] times)
    expected = family.function(MetricContext(probs[drawn], labels[drawn]), **groups)
    np.testing.assert_allclose(family.resampled(tied, counts, **groups), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("classes, bins, tiny", [(4, 7, False), (40, 15, False), (40, 15, True)])
def test_bootstrap_of_kcal_adaptive_ece_from_resample_counts_equals_recomputing_each_resample(classes, bins, tiny,
                                                                                              monkeypatch):
    """The KCal paper's adaptive ECE (remainder in the last bins; classwise keeps p̂ ≥ min(0.01,
    1/K), so at 40 classes many columns keep fewer rows than bins, or none) from the row counts of all
    resamples equals recomputing it on each resample, resample by resample (also with tiny blocks)."""
    from calbench.kernels import resampled_bins
    from calbench.metrics import binned
    from calbench.metrics.bootstrap import resample_indices
    from calbench.metrics.registry import MetricContext, lookup

    if tiny:
        monkeypatch.setattr(binned, "RESAMPLE_RANK_BLOCK", 1)
        monkeypatch.setattr(resampled_bins, "LANES", 4)
    probs, labels = calibrated(200, classes=classes, seed=5, concentration=0.02)  # most entries below 0.01
    ctx = MetricContext(probs, labels, seed=3)
    idx = resample_indices(200, 30, 3)
    counts = np.stack([np.bincount(i, minlength=200) for i in idx])
    for metric_id in (f"ece.cw.em{bins}.l1.kcal", f"ece.conf.em{bins}.l1.kcal"):
        family, groups = lookup(metric_id)
        loop = [family.function(MetricContext(probs[i], labels[i]), **groups) for i in idx]
        np.testing.assert_allclose(family.resampled(ctx, counts, **groups), loop, rtol=0, atol=1e-12)
    kept = (probs >= 0.01).sum(axis=0)
    assert classes == 4 or kept.min() < bins  # the 40-class case has columns with fewer kept rows than bins


def test_bootstrap_of_true_ce_and_resample_loop_metrics_equal_recomputing_each_resample():
    """The true CEs from the resamples' row counts (l1: means of per-row terms; l2: the root of
    one) and the metrics still recomputed per resample (fed the confidence columns of the full context,
    cut to the resample) equal recomputing every metric on each resample from scratch (1e-10)."""
    from calbench.metrics.bootstrap import bootstrap_intervals, resample_indices
    from calbench.metrics.registry import MetricContext, lookup

    data = lece3(300, np.random.default_rng(6))
    probs, labels, truth = sharpen(softmax(data["logits"], axis=1), 2.0), data["labels"], data["true_probs"]
    ids = ["true_ce.conf.l1", "true_ce.cw.l1", "true_ce.conf.l2", "true_ce.cw.l2", "skce.ul", "kde_ece.conf.l1",
           "ece.conf.platt.l1", "cmee.conf.beta.l1"]
    ctx = MetricContext(probs, labels, truth, seed=2)
    families = [(m, *lookup(m)) for m in ids]
    estimates = {m: f.function(ctx, **g) for m, f, g in families}
    fast = bootstrap_intervals(ctx, families, estimates, 30, 0.8, "percentile")
    loop = np.array([[f.function(MetricContext(probs[i], labels[i], truth[i], seed=2), **g) for _, f, g in families]
                     for i in resample_indices(300, 30, 2)])
    for metric_id, column in zip(ids, loop.T):
        low, high = np.quantile(column, [0.1, 0.9])
        assert fast[f"{metric_id}.ci_low"] == pytest.approx(low, abs=1e-10), metric_id
        assert fast[f"{metric_id}.ci_high"] == pytest.approx(high, abs=1e-10), metric_id


def test_mce_is_the_largest_bin_gap():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.55, 0.45]])
    labels = np.array([0, 1, 0, 0])
    # 2 equal-width bins on confidence: [0.5, 1) holds all → a single non-empty bin
    gap = abs(np.mean([0.9, 0.8, 0.6, 0.55]) - 0.75)
    assert evaluate(probs, labels, ["mce.conf.ew2"])["mce.conf.ew2"] == pytest.approx(gap)
    # 4 equal-mass bins: one point each, the largest gap is |0.8 − 0|
    assert evaluate(probs, labels, ["mce.conf.em4"])["mce.conf.em4"] == pytest.approx(0.8)


def test_estimators_run_on_tiny_test_sets():
    probs = np.array([[0.7, 0.3], [0.4, 0.6], [0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    labels = np.array([0, 1, 1, 1, 0])
    ids = ["ece.conf.cv.l1", "ece.cw.ewcv.l2.debiased", "ece.cw.em20.l1.kcal", "kde_ece.conf.l1", "skce.uq",
           "p_ece.cw", "ece.conf.pl3.l1"]
    values = evaluate(probs, labels, ids)
    assert all(np.isfinite(v) for v in values.values())
    assert evaluate(probs[:1], labels[:1], ["ece.conf.cv.l1"])["ece.conf.cv.l1"] == pytest.approx(0.3)
