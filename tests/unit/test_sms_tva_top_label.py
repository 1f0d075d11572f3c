"""SMS/SVS (Berta et al. 2025), TvA (Le Coz et al. 2024) and top-label binning (Gupta & Ramdas 2022)."""

import numpy as np
import pytest
from scipy.special import softmax

from calbench.data.synthetic import planted_temperature
from calbench.methods import make
from conftest import reference, shared_data


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
    calibrators = reference("probmetrics.calibrators", "probmetrics")
    cal = calibrators.get_calibrator(name, **{f"{name}_print_init_info": False})
    cal.fit(softmax(z_cal, axis=1), y_cal)
    return nll(cal.predict_proba(softmax(z_test, axis=1)), y_test)


@pytest.mark.peers
@pytest.mark.parametrize("name", ["sms", "svs"])
def test_same_test_nll_as_probmetrics_synthetic(name):
    z, y, z_test, y_test = synthetic(n=500, k=6, seed=2, temperature=3.0)
    ours = nll(make(name).fit(z, y).predict_proba(z_test), y_test)
    assert ours == pytest.approx(_probmetrics_nll(name, z, y, z_test, y_test), abs=1e-3)


@pytest.mark.peers
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


def test_penalty_bounds_the_newton_decrease():
    """The log-loss Hessian is positive semi-definite, so H ⪰ C (the penalty's curvature) and ½gᵀH⁻¹g ≤ ½gᵀC⁻¹g:
    truncated Newton may stop on the bound without its last CG solve. Checked against the exact Hessian at a
    point away from the optimum; infinite where a parameter is unpenalised (ODIR's free diagonal)."""
    from calbench.solvers.affine_hessian import hessian
    from calbench.solvers.affine_objective import AffineProblem, objective, unpack
    from calbench.solvers.affine_penalty import Penalty, odir_penalty

    z, y, _, _ = synthetic(n=300, k=4)
    x = np.log(softmax(z, axis=1))
    rng = np.random.default_rng(1)
    for diagonal in (False, True):
        penalty = Penalty(off=0.3, diag=0.02, bias=0.05, diag_centre=1.0)
        theta = rng.normal(scale=0.3, size=4 + 4 if diagonal else 16 + 4)
        _, grad = objective(theta, x, y, penalty, diagonal)
        exact = 0.5 * grad @ np.linalg.solve(hessian(x, *unpack(theta, 4, diagonal), penalty, diagonal), grad)
        bound = AffineProblem(x, y, penalty, diagonal, 1e-10).newton_decrease_bound(grad)
        assert exact <= bound < 1e3 * exact
    assert AffineProblem(x, y, odir_penalty(1.0, 1.0, 4), False, 1e-10).newton_decrease_bound(grad) == np.inf


def test_sms_fit_alone_reaches_the_per_class_blocks_optimum_on_cifar100():
    """CIFAR-100 ResNet-20, seed-0 random 5,000 / 5,000 split: ``sms`` from 50 classes runs truncated Newton from the
    identity with the large-map preconditioner and stops on the penalty's bound; its optimum is the one of the
    route it replaced (2 L-BFGS iterations, then truncated Newton with the per-class blocks): training objective
    within 1e-9 relative, test probabilities within 1e-5 (the stop at tol = 1e-10 leaves W within about 1e-6 of
    the optimum: the replaced route's own iterates differ by as much with its blocks from every row), and test
    NLL 1.153633 to 1e-4, as probmetrics's (docs/runtime.md, "``sms`` and ``svs`` beside probmetrics")."""
    from calbench.solvers.affine_softmax_fit import fit_affine_softmax

    folder = shared_data("logits", "cifar100_resnet-20")
    z = np.load(folder / "scores.npy").astype(np.float64)
    y = np.load(folder / "targets.npy").astype(np.int64)
    order = np.random.default_rng(0).permutation(y.size)
    cal, test = order[:5000], order[5000:]
    est = make("sms").fit(z[cal], y[cal])
    assert est.fit_info_["converged"] and est.fit_info_["solver"] == "newton-cg"
    x = est.features(est._check_scores(z[cal]))
    weights, intercept, info = fit_affine_softmax(x, y[cal], est.penalty(100), False, tol=est.tol, newton_cg_after=2)
    assert info["solver"] == "lbfgs+newton-cg" and info["converged"]
    assert est.fit_info_["loss"] == pytest.approx(info["loss"], rel=1e-9)
    before = est._set_fitted(weights, intercept, info, 100).predict_proba(z[test])
    after = make("sms").fit(z[cal], y[cal]).predict_proba(z[test])
    np.testing.assert_allclose(after, before, atol=1e-5)
    assert nll(after, y[test]) == pytest.approx(1.153633, abs=1e-4)


# -- TvA and top-label binning ---------------------------------------------------------------------------

def is_distribution(p):
    return np.isfinite(p).all() and (p >= 0).all() and np.allclose(p.sum(axis=1), 1.0)


def test_tva_ts_equals_ts_with_two_classes():
    """With k = 2 the top-versus-all BCE is the log-loss itself (Le Coz et al. §3), so T is TS's."""
    z, y, _, _ = synthetic(n=800, k=2, temperature=3.0)
    assert make("tva_ts").fit(z, y).temperature_ == pytest.approx(make("ts").fit(z, y).temperature_, rel=1e-6)


def test_tva_ts_minimises_the_top_label_bce():
    z, y, _, _ = synthetic(n=800, k=6, temperature=2.5)
    top = z.argmax(axis=1)
    t = (top == y).astype(float)

    def bce(temperature):
        c = softmax(z / temperature, axis=1).max(axis=1)
        return -np.mean(t * np.log(c) + (1 - t) * np.log(1 - c))

    fitted = make("tva_ts").fit(z, y).temperature_
    assert bce(fitted) <= min(bce(fitted * 1.01), bce(fitted / 1.01))


def test_tva_hist_with_one_bin_sets_every_confidence_to_the_accuracy():
    """Hand-checked: 4 rows, 1 bin → ĉ = accuracy 0.5; the others share 0.5 in their original proportions."""
    probs = np.array([[0.6, 0.3, 0.1], [0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    y = np.array([0, 1, 1, 0])  # correct, wrong, correct, wrong
    from calbench import Scores
    out = make("tva_hist", n_bins=1).fit(Scores.from_probs(probs), y).predict_proba(Scores.from_probs(probs))
    np.testing.assert_allclose(out[0], [0.5, 0.375, 0.125], atol=1e-9)
    np.testing.assert_allclose(out[3], [0.25, 0.25, 0.5], atol=1e-9)


def test_keep_prediction_flattens_the_rest_just_enough():
    """ĉ = 0.4 for [0.5, 0.45, 0.05]: plain rescaling gives the runner-up 0.54 > ĉ; mixing the rest
    (0.9, 0.1) with uniform at α = 0.14 / 0.24 gives (0.4, 0.2), so the prediction stays class 0."""
    from calbench.methods.tva import keep_prediction
    out = keep_prediction(np.log([[0.5, 0.45, 0.05], [0.7, 0.2, 0.1]]), np.array([0.4, 0.6]))
    np.testing.assert_allclose(out, [[0.4, 0.4, 0.2], [0.6, 4 / 15, 2 / 15]], atol=1e-8)
    assert (out.argmax(axis=1) == 0).all()


@pytest.mark.parametrize("name", ["tva_ts", "tva_vs", "tva_hist", "tva_iso", "tlhb", "sms", "svs"])
def test_newer_methods_output_distributions_and_compose_in_chains(name):
    z, y, z_test, _ = synthetic(n=400, k=4)
    for method in (name, f"ts+{name}"):
        assert is_distribution(make(method).fit(z, y).predict_proba(z_test))


def test_tva_vs_with_strong_regularisation_is_tva_ts():
    """reg → ∞ forces w = w̄·1 and b = 0: one free scale fitted by the TvA BCE, i.e. ``tva_ts``'s confidence."""
    z, y, z_test, y_test = synthetic(n=300, k=4)
    out = make("tva_vs", reg=1e9).fit(z, y).predict_proba(z_test)
    ts_conf = make("tva_ts").fit(z, y).predict_proba(z_test).max(axis=1)
    np.testing.assert_allclose(out.max(axis=1), ts_conf, atol=1e-5)
    assert (out.argmax(axis=1) == z_test.argmax(axis=1)).all()


def test_tlhb_bins_each_predicted_class_separately():
    """Hand-checked M2B: class 0 predicted on 4 rows (2 bins of 2 with points_per_bin = 2: accuracies 0 and 1),
    class 1 predicted on 2 rows (1 bin: accuracy 1/2)."""
    probs = np.array([[0.6, 0.4], [0.65, 0.35], [0.9, 0.1], [0.95, 0.05], [0.3, 0.7], [0.2, 0.8]])
    y = np.array([1, 1, 0, 0, 1, 0])
    from calbench import Scores
    s = Scores.from_probs(probs)
    out = make("tlhb", points_per_bin=2).fit(s, y).predict_proba(s)
    np.testing.assert_allclose(out[:, 0], [0.0, 0.0, 1.0, 1.0, 0.5, 0.5], atol=1e-9)


# -- metrics: top-label ECE, smooth ECE -------------------------------------------------------------------

def test_top_label_ece_hand_example():
    """Gupta & Ramdas top-label ECE with 1 bin: class 0 predicted on 2 rows (mean c 0.7, accuracy 1/2 → 0.2),
    class 1 on 2 rows (mean c 0.6, accuracy 1 → 0.4); weighted 1/2 each = 0.3 (confidence ECE, 1 bin: 0.15)."""
    from calbench.metrics import evaluate
    probs = np.array([[0.6, 0.4], [0.8, 0.2], [0.4, 0.6], [0.4, 0.6]])
    y = np.array([0, 1, 1, 1])
    out = evaluate(probs, y, ["ece.tl.em1.l1", "ece.conf.em1.l1"])
    assert out["ece.tl.em1.l1"] == pytest.approx(0.3)
    assert out["ece.conf.em1.l1"] == pytest.approx(abs(0.65 - 0.75))


def test_smooth_ece_is_relplots_smece_of_the_confidence_and_weighted_by_predicted_class():
    relplot = pytest.importorskip("relplot", reason="relplot (smooth ECE reference) not installed")
    from calbench.metrics import evaluate
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=600)
    y = rng.integers(3, size=600)
    out = evaluate(probs, y, ["smece.conf", "smece.tl"])
    top, conf = probs.argmax(axis=1), probs.max(axis=1)
    hits = (top == y).astype(float)
    assert out["smece.conf"] == pytest.approx(relplot.smECE(conf, hits), abs=1e-12)
    expected = sum(np.mean(top == c) * relplot.smECE(conf[top == c], hits[top == c]) for c in range(3))
    assert out["smece.tl"] == pytest.approx(expected, abs=1e-12)


def test_smooth_reliability_diagram_is_written(tmp_path):
    pytest.importorskip("relplot", reason="relplot (smooth ECE reference) not installed")
    from calbench.metrics.smooth_ece import reliability_diagram
    rng = np.random.default_rng(1)
    path = reliability_diagram(rng.dirichlet(np.ones(3), size=200), rng.integers(3, size=200), tmp_path / "rd.png")
    assert path.stat().st_size > 1000
