"""SMS/SVS (Berta et al. 2025), TvA (Le Coz et al. 2024) and top-label binning (Gupta & Ramdas 2022)."""

import numpy as np
import pytest
from scipy.special import softmax

from calbench.data.synthetic import planted_temperature
from calbench.methods import make
from conftest import shared_data


def nll(p, y):
    return float(-np.mean(np.log(p[np.arange(y.size), y])))


def synthetic(n=600, k=5, seed=0, temperature=2.0):
    data = planted_temperature(2 * n, np.random.default_rng(seed), num_classes=k, temperature=temperature)
    z, y = data["logits"], data["labels"]
    return z[:n], y[:n], z[n:], y[n:]


# -- SMS / SVS ------------------------------------------------------------------------------------------

def test_sms_penalty_weights_scale_with_k_and_n():
    """λ_b k^ρ/n^τ, λ_d k^ρ/n^τ, λ_o (k(k−1))^ρ/n^τ (paper's structured penalty; probmetrics defaults)."""
    z, y, _, _ = synthetic(n=60, k=3)
    est = make("sms", lambda_intercept=2.0, lambda_off_diagonal=3.0).fit(z, y)
    pen = est.penalty(3)
    assert (pen.bias, pen.diag, pen.off, pen.diag_centre) == pytest.approx((2 * 3 / 60, 3 / 60, 3 * 6 / 60, 1.0))


@pytest.mark.parametrize("name", ["sms", "svs"])
def test_strong_penalty_leaves_the_preprocessed_distribution(name):
    """With λ → ∞, Δ = 0 and b = 0, so the output is q̃ = (1 − ε)σ(β z) + ε/k, ε = 1/(n + 1), β the TS fit."""
    z, y, z_test, _ = synthetic()
    settings = {"lambda_intercept": 1e12, "lambda_diagonal": 1e12}
    if name == "sms":
        settings["lambda_off_diagonal"] = 1e12
    est = make(name, **settings).fit(z, y)
    beta = 1.0 / make("ts").fit(z, y).temperature_
    eps = 1.0 / (z.shape[0] + 1)
    expected = (1 - eps) * softmax(beta * z_test, axis=1) + eps / z.shape[1]
    np.testing.assert_allclose(est.predict_proba(z_test), expected, atol=1e-8)


@pytest.mark.parametrize("name", ["sms", "svs"])
def test_sms_beats_ts_on_a_miscalibrated_affine_map(name):
    """Labels drawn from σ(A z + c) with a non-scalar A: the structured map must fit better than TS."""
    rng = np.random.default_rng(4)
    k, n = 4, 4000
    z = rng.normal(size=(2 * n, k)) * 2
    a = np.diag([0.5, 1.0, 1.5, 2.0])
    y = np.array([rng.choice(k, p=p) for p in softmax(z @ a.T + np.array([0.5, 0, -0.5, 0]), axis=1)])
    p_ts = make("ts").fit(z[:n], y[:n]).predict_proba(z[n:])
    p = make(name).fit(z[:n], y[:n]).predict_proba(z[n:])
    assert nll(p, y[n:]) < nll(p_ts, y[n:]) - 0.01
    assert np.allclose(p.sum(axis=1), 1) and (p >= 0).all()


def _probmetrics_nll(name, z_cal, y_cal, z_test, y_test):
    calibrators = pytest.importorskip(
        "probmetrics.calibrators", reason="probmetrics (the SMS authors' package; extra `reference`) not installed")
    cal = calibrators.get_calibrator(name, **{f"{name}_print_init_info": False})
    cal.fit(softmax(z_cal, axis=1), y_cal)
    return nll(cal.predict_proba(softmax(z_test, axis=1)), y_test)


@pytest.mark.parametrize("name", ["sms", "svs"])
def test_same_test_nll_as_probmetrics_synthetic(name):
    z, y, z_test, y_test = synthetic(n=500, k=6, seed=2, temperature=3.0)
    ours = nll(make(name).fit(z, y).predict_proba(z_test), y_test)
    assert ours == pytest.approx(_probmetrics_nll(name, z, y, z_test, y_test), abs=1e-3)


@pytest.mark.parametrize("name", ["sms", "svs"])
def test_same_test_nll_as_probmetrics_cifar10(name):
    folder = shared_data("logits", "cifar10_resnet-20")
    z = np.load(folder / "scores.npy").astype(np.float64)
    y = np.load(folder / "targets.npy")
    order = np.random.default_rng(0).permutation(y.size)
    cal, test = order[:5000], order[5000:]
    ours = nll(make(name).fit(z[cal], y[cal]).predict_proba(z[test]), y[test])
    assert ours == pytest.approx(_probmetrics_nll(name, z[cal], y[cal], z[test], y[test]), abs=1e-3)


def test_sms_rejects_negative_strength():
    z, y, _, _ = synthetic(n=50, k=3)
    with pytest.raises(ValueError, match="lambda_diagonal"):
        make("sms", lambda_diagonal=-1.0).fit(z, y)
