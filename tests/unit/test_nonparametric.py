"""Histogram binning (H-LECE, H-LECD, hist), isotonic (IROvA, IRM), ETS, and their chains."""

import numpy as np
import pytest

from calbench.data.synthetic import lece3, planted_temperature
from calbench.methods import make
from calbench.methods.ets import EnsembleLoss, ensemble, loss_value
from calbench.scores import Scores


@pytest.fixture(scope="module")
def synthetic():
    rng = np.random.default_rng(0)
    return lece3(3000, rng), lece3(2000, rng)


def test_single_bin_hist_lecd_is_the_prior_and_hist_lece_the_global_shift(synthetic):
    cal, test = synthetic
    y, p, pt = cal["labels"], np.exp(cal["logits"]), np.exp(test["logits"])
    prior = np.bincount(y, minlength=3) / y.size
    out = make("hist_lecd", n_bins=1).fit(cal["logits"], y).predict_proba(test["logits"])
    np.testing.assert_allclose(out, np.tile(prior, (len(pt), 1)), atol=1e-12)
    shifted = pt - (p.mean(0) - prior)
    out = make("hist_lece", n_bins=1, eps=0.0).fit(cal["logits"], y).predict_proba(test["logits"])
    clean = (shifted >= 0).all(axis=1)
    np.testing.assert_allclose(out[clean], shifted[clean], atol=1e-12)


def test_hist_lece_corrects_by_the_bin_error_with_equal_width_bins(synthetic):
    """Figure 1b: ĉ_j = p̂_j − (p̄_j(B) − ȳ_j(B)) on 5 equal-width bins, then renormalised."""
    cal, test = synthetic
    y, p, pt = cal["labels"], np.exp(cal["logits"]), np.exp(test["logits"])
    expected = np.empty_like(pt)
    for j in range(3):
        bins, bins_t = np.minimum((p[:, j] * 5).astype(int), 4), np.minimum((pt[:, j] * 5).astype(int), 4)
        for b in range(5):
            inside = bins == b
            expected[bins_t == b, j] = pt[bins_t == b, j] - (p[inside, j].mean() - np.mean(y[inside] == j))
    expected = np.clip(expected, 0, None)
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(make("hist_lece", eps=0.0).fit(cal["logits"], y).predict_proba(test["logits"]),
                               expected, atol=1e-12)


def test_hist_uses_equal_size_bins_and_predicts_bin_frequencies(synthetic):
    cal, _ = synthetic
    y, p = cal["labels"], Scores(cal["logits"]).probs
    model = make("hist", n_bins=10).fit(cal["logits"], y)
    fitted = model.binary_maps_[0]
    bins = np.searchsorted(fitted["edges"], p[:, 0], side="left")
    assert np.bincount(bins).tolist() == [300] * 10
    np.testing.assert_allclose(fitted["y_mean"], [np.mean(y[bins == b] == 0) for b in range(10)])


def test_empty_bins_leave_the_prediction_unchanged():
    p = np.array([[0.95, 0.05], [0.9, 0.1], [0.92, 0.08]])
    y = np.array([0, 0, 1])
    query = np.array([[0.5, 0.5]])  # bins with no calibration point in both classes
    out = make("hist_lecd", n_bins=5).fit(np.log(p), y).predict_proba(np.log(query))
    np.testing.assert_allclose(out, query)


@pytest.mark.parametrize("name", ["hist", "hist_lece", "hist_lecd"])
def test_bad_bin_count_is_named(name, synthetic):
    cal, _ = synthetic
    with pytest.raises(ValueError, match="^n_bins:"):
        make(name, n_bins=0).fit(cal["logits"], cal["labels"])


def test_irova_is_isotonic_per_class_then_renormalised(synthetic):
    cal, test = synthetic
    model = make("irova", eps=0.0).fit(cal["logits"], cal["labels"])
    grid = np.linspace(0, 1, 101)
    for fitted in model.binary_maps_:
        assert np.all(np.diff(fitted.predict(grid)) >= 0)
    out = model.predict_proba(test["logits"])
    assert np.allclose(out.sum(1), 1) and (out >= 0).all()
    with_eps = make("irova").fit(cal["logits"], cal["labels"]).predict_proba(test["logits"])
    assert (with_eps > 0).all() and np.abs(with_eps - out).max() < 1e-8


def test_irm_fits_one_strictly_increasing_map_on_all_pooled_entries(synthetic):
    cal, test = synthetic
    model = make("irm").fit(cal["logits"], cal["labels"])
    assert model.isotonic_.knots_x_.max() <= 1 and model.isotonic_.knots_x_.size > 2
    a = np.linspace(0.01, 0.99, 99)[:, None] * np.ones((1, 3))
    mapped = model.isotonic_.predict(a[:, 0]) + model.eps * a[:, 0]
    assert np.all(np.diff(mapped) > 0)
    out = model.predict_proba(test["logits"])
    np.testing.assert_array_equal(out.argmax(1), test["logits"].argmax(1))
    with pytest.raises(ValueError, match="^eps:"):
        make("irm", eps=0.0).fit(cal["logits"], cal["labels"])


@pytest.mark.parametrize("loss", ["mse", "nll"])
def test_ets_loss_from_sums_equals_the_direct_formula(loss):
    """The fast ETS objective (per-t sums) equals loss_value of the formed ensemble, also off the
    simplex (SLSQP evaluates infeasible trial points)."""
    rng = np.random.default_rng(2)
    z, y = 3.0 * rng.standard_normal((300, 7)), rng.integers(7, size=300)
    fast, onehot = EnsembleLoss(z, y, loss), np.eye(7)[y]
    for t, w in [(0.7, (1.0, 0.0, 0.0)), (2.3, (0.5, 0.3, 0.2)), (1.1, (0.9, -0.05, 0.3)), (5.0, (0.0, 0.0, 1.0))]:
        assert fast(t, w) == pytest.approx(loss_value(ensemble(z, t, w), onehot, loss), rel=1e-12, abs=1e-15)


def test_ets_recovers_a_planted_temperature_and_joint_is_no_worse_than_two_stage():
    rng = np.random.default_rng(1)
    data = planted_temperature(4000, rng, num_classes=5, temperature=2.0)
    z, y = data["logits"], data["labels"]
    onehot = np.eye(5)[y]
    joint = make("ets").fit(z, y)
    staged = make("ets", procedure="two_stage").fit(z, y)
    assert joint.temperature_ == pytest.approx(2.0, rel=0.1) and joint.weights_[0] > 0.8
    assert np.isclose(joint.weights_.sum(), 1) and (joint.weights_ >= 0).all()
    loss = [loss_value(ensemble(z, m.temperature_, m.weights_), onehot, "mse") for m in (joint, staged)]
    assert loss[0] <= loss[1] + 1e-12
    nll = make("ets", loss="nll").fit(z, y)
    assert nll.temperature_ == pytest.approx(2.0, rel=0.1)


@pytest.mark.parametrize("settings,key", [({"loss": "hinge"}, "loss"), ({"procedure": "adam"}, "procedure")])
def test_ets_bad_options_are_named(settings, key):
    z = np.log(np.full((10, 3), 1 / 3))
    with pytest.raises(ValueError, match=f"^{key}:"):
        make("ets", **settings).fit(z, np.arange(10) % 3)


@pytest.mark.parametrize("chain", ["ts+lece", "ts+lecd", "ts+irova", "ets+lece", "ts+irm", "ts+hist_lece"])
def test_chains_fit_the_second_stage_on_the_first_stage_output(chain, synthetic):
    cal, test = synthetic
    first, second = chain.split("+")
    settings = {second: {"grid": None}} if second in ("lece", "lecd") else {}
    model = make(chain, **settings).fit(cal["logits"], cal["labels"])
    alone = make(second, **settings.get(second, {})).fit(
        make(first).fit(cal["logits"], cal["labels"]).transform(cal["logits"]), cal["labels"])
    staged = make(first).fit(cal["logits"], cal["labels"]).transform(test["logits"])
    np.testing.assert_allclose(model.predict_proba(test["logits"]), alone.predict_proba(staged), atol=1e-12)
    assert model.preserves_argmax == (chain == "ts+irm")
