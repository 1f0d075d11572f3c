"""Vector/matrix scaling and Dirichlet calibration (Dirichlet paper §3, spec lece_dirichlet.md §1.3–1.6)."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.special import softmax

from calbench.data.synthetic import generate, sample_categorical
from calbench.methods import GridSearch, make
from calbench.methods.dirichlet import canonical_to_linear, linear_to_canonical
from calbench.methods.linear_maps import authors_odir_grid, coarse_odir_grid
from calbench.metrics import evaluate
from calbench.scores import Scores
from calbench.solvers.affine_hessian import hessian, hessian_blocks
from calbench.solvers.affine_objective import affine_logits, hessian_vector, objective, unpack
from calbench.solvers.affine_path_state import PathState
from calbench.solvers.affine_penalty import Penalty, l2_penalty, odir_penalty
from calbench.solvers.affine_softmax_fit import fit_affine_softmax
from calbench.solvers.warm_start_path import warm_start_order

UNTUNED = ["vs", "ms", "dir", "dir_diag"]
TUNED = ["ms_odir", "dir_l2", "dir_odir"]


def _toy(n=600, k=4, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.ones(k), size=n)
    return np.log(q), sample_categorical(softmax(1.7 * np.log(q), axis=1), rng)


@pytest.mark.parametrize("name", UNTUNED + TUNED)
def test_identity_parameters_return_the_input(name):
    logits, y = _toy()
    est = make(name, grid=None)
    k = logits.shape[1]
    est._set_fitted(np.eye(k), np.zeros(k), {}, k)
    np.testing.assert_allclose(est.predict_proba(logits), Scores(logits).probs, atol=1e-12)


@pytest.mark.parametrize("name", UNTUNED)
def test_fit_improves_log_loss(name):
    logits, y = _toy()
    fitted = make(name).fit(logits, y)
    before = evaluate(Scores(logits).probs, y, ["nll"])["nll"]
    assert evaluate(fitted.predict_proba(logits), y, ["nll"])["nll"] < before - 0.01
    assert fitted.fit_info_["converged"]


def test_odir_penalty_hand_computed():
    # W = [[1, 2], [3, 4]], b = [1, -1], k = 2, λ = 2, μ = 4:
    # paper: 2/(2·1)·(2² + 3²) + 4/2·(1 + 1) = 13 + 4 = 17; code: 2·13 + 4·2 = 34.
    w, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, -1.0])
    assert odir_penalty(2.0, 4.0, 2).value(w, b) == pytest.approx(17.0)
    assert odir_penalty(2.0, 4.0, 2, "code").value(w, b) == pytest.approx(34.0)
    # L2 on all 6 parameters: 1+4+9+16+1+1 = 32; paper λ/(k(k+1)) = 3/6.
    assert l2_penalty(3.0, 2).value(w, b) == pytest.approx(16.0)
    # 3 classes: off-diagonal squares 4+9+16+1 = 30, λ/(3·2) = 1 → 30; μ/3 = 1, b² = 9 → 39.
    w3 = np.array([[5.0, 2.0, 0.0], [3.0, 7.0, 4.0], [1.0, 0.0, -2.0]])
    assert odir_penalty(6.0, 3.0, 3).value(w3, np.array([0.0, 3.0, 0.0])) == pytest.approx(39.0)


def test_odir_penalty_is_exact_near_the_identity():
    """Σ_{i≠j} w²ᵢⱼ is summed directly: as Σ w² − Σ w²ᵢᵢ it cancels to rounding noise near W = I, which the
    strongest λ of the authors' grid (λ/(k(k−1)) = 10⁶) turned into objective noise that broke L-BFGS."""
    k = 100
    w = np.eye(k) + 1e-9 * (1 - np.eye(k))
    got = odir_penalty(1e6 * k * (k - 1), 0.0, k).value(w, np.zeros(k))
    assert got == pytest.approx(1e6 * k * (k - 1) * 1e-18, rel=1e-12)


@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_converged_warm_start_is_returned_without_iterations(solver, monkeypatch):
    import calbench.solvers.affine_softmax_fit as affine

    if solver == "lbfgs":
        monkeypatch.setattr(affine, "NEWTON_MAX_PARAMS", 0)
        monkeypatch.setattr(affine, "NEWTON_CG_MAX_CLASSES", 0)
    logits, y = _toy()
    x, penalty = Scores(logits).log_probs, odir_penalty(1.0, 1.0, 4)
    w, b, info = fit_affine_softmax(x, y, penalty, diagonal=False)
    w2, b2, info2 = fit_affine_softmax(x, y, penalty, diagonal=False, init=(w, b))
    assert info["iterations"] > 3 and info2["iterations"] == 0 and info2["converged"]
    assert info2["loss"] == pytest.approx(info["loss"], abs=1e-9)
    np.testing.assert_array_equal(w2, w)


def test_lbfgs_stops_at_an_iterate_whose_predicted_decrease_is_below_tol(monkeypatch):
    """L-BFGS ends at an iterate whose diagonal-Newton predicted decrease is below LBFGS_ITERATE_MARGIN·tol·|f|
    (the start's test, with a margin): from a start near the optimum, in fewer evaluations than L-BFGS-B's own
    stop, which needs one more iteration whose decrease is below tol, and as close to the optimum (tol = 1e-10
    leaves these outputs ~1e-6 free along the weakly curved directions, either way)."""
    import calbench.solvers.affine_lbfgs as lbfgs
    import calbench.solvers.affine_objective as objective_module
    import calbench.solvers.affine_softmax_fit as affine

    logits, y = _toy(n=800, k=6)
    x, penalty = Scores(logits).log_probs, odir_penalty(10.0, 100.0, 6, "code")
    w_opt, b_opt, _ = fit_affine_softmax(x, y, penalty, False, tol=1e-14)
    optimum = softmax(affine_logits(x, w_opt, b_opt, False), axis=1)
    rng = np.random.default_rng(0)
    start = (w_opt + 1e-4 * rng.normal(size=w_opt.shape), b_opt + 1e-4 * rng.normal(size=b_opt.shape))
    monkeypatch.setattr(affine, "NEWTON_MAX_PARAMS", 0)
    monkeypatch.setattr(affine, "NEWTON_CG_MAX_CLASSES", 0)
    calls = {"n": 0}
    evaluate = objective_module.objective_residual

    def counted(*args):
        calls["n"] += 1
        return evaluate(*args)

    monkeypatch.setattr(objective_module, "objective_residual", counted)
    fits = {}
    for margin in (lbfgs.LBFGS_ITERATE_MARGIN, 0.0):
        monkeypatch.setattr(lbfgs, "LBFGS_ITERATE_MARGIN", margin)
        calls["n"] = 0
        w, b, info = fit_affine_softmax(x, y, penalty, False, init=start)
        assert info["solver"] == "lbfgs" and info["converged"]
        np.testing.assert_allclose(softmax(affine_logits(x, w, b, False), axis=1), optimum, atol=2e-6)
        fits[margin] = calls["n"], info["loss"]
    (evaluations, loss), (evaluations_plain, loss_plain) = fits.values()
    assert evaluations < evaluations_plain and loss == pytest.approx(loss_plain, rel=1e-10)


def test_grid_search_does_not_depend_on_the_number_of_threads(monkeypatch):
    """Folds run in threads (calbench.parallel); results are the same on one core as on many."""
    import calbench.parallel

    logits, y = _toy(n=400)
    grid = {"reg_lambda": [10.0, 0.1], "reg_mu": [1.0, 0.01]}
    threaded = make("dir_odir", grid=grid).fit(logits, y)
    monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 1)
    serial = make("dir_odir", grid=grid).fit(logits, y)
    np.testing.assert_array_equal(threaded.cv_losses_, serial.cv_losses_)
    np.testing.assert_array_equal(threaded.predict_proba(logits), serial.predict_proba(logits))


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("penalty", [odir_penalty(2.0, 3.0, 4), l2_penalty(1.5, 4), Penalty()])
def test_gradient_matches_finite_differences(diagonal, penalty):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(50, 4)) - 3.0, rng.integers(4, size=50)
    theta = rng.normal(size=(4 if diagonal else 16) + 4)
    grad = objective(theta, x, y, penalty, diagonal)[1]
    numeric = approx_fprime(theta, lambda t: objective(t, x, y, penalty, diagonal)[0], 1e-7)
    np.testing.assert_allclose(grad, numeric, atol=2e-6)


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("penalty", [odir_penalty(2.0, 3.0, 4), l2_penalty(1.5, 4)])
def test_hessian_matches_finite_differences_of_the_gradient(diagonal, penalty):
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(50, 4)), rng.integers(4, size=50)
    theta = 0.3 * rng.normal(size=8 if diagonal else 20)
    exact = hessian(x, *unpack(theta, 4, diagonal), penalty, diagonal)
    numeric = np.array([approx_fprime(theta, lambda t, i=i: objective(t, x, y, penalty, diagonal)[1][i], 1e-6)
                        for i in range(theta.size)])
    np.testing.assert_allclose(exact, numeric, atol=1e-6)


@pytest.mark.parametrize("diagonal", [False, True])
def test_newton_and_lbfgs_reach_the_same_optimum(diagonal, monkeypatch):
    """Newton finishes small problems (NEWTON_MAX_PARAMS) that L-BFGS has not (LBFGS_ITERS_BEFORE_NEWTON): same
    optimum."""
    import calbench.solvers.affine_softmax_fit as affine

    logits, y = _toy(n=800)
    x, penalty = Scores(logits).log_probs, odir_penalty(0.5, 0.1, 4)
    monkeypatch.setattr(affine, "LBFGS_ITERS_BEFORE_NEWTON", 1)
    w_newton, b_newton, info_newton = fit_affine_softmax(x, y, penalty, diagonal)
    monkeypatch.setattr(affine, "NEWTON_MAX_PARAMS", 0)
    monkeypatch.setattr(affine, "NEWTON_CG_MAX_CLASSES", 0)
    w_lbfgs, b_lbfgs, info_lbfgs = fit_affine_softmax(x, y, penalty, diagonal)
    assert info_newton["solver"] == "lbfgs+newton" and info_lbfgs["solver"] == "lbfgs"
    assert info_newton["converged"] and info_newton["iterations"] < 12
    assert info_newton["loss"] == pytest.approx(info_lbfgs["loss"], abs=1e-9)
    np.testing.assert_allclose(w_newton, w_lbfgs, atol=1e-3)
    np.testing.assert_allclose(b_newton, b_lbfgs, atol=1e-3)


@pytest.mark.parametrize("penalty", [odir_penalty(2.0, 3.0, 4), l2_penalty(1.5, 4)])
def test_hessian_vector_and_blocks_are_those_of_the_exact_hessian(penalty):
    """Truncated Newton's pieces: H v and H's per-class diagonal blocks equal :func:`hessian`'s."""
    rng = np.random.default_rng(3)
    x, k = rng.normal(size=(60, 4)), 4
    theta, v = 0.3 * rng.normal(size=20), rng.normal(size=20)
    exact = hessian(x, *unpack(theta, k, False), penalty, False)
    probs = softmax(affine_logits(x, *unpack(theta, k, False), False), axis=1)
    np.testing.assert_allclose(hessian_vector(x, probs, penalty, v), exact @ v, rtol=1e-12, atol=1e-13)
    theta_d, v_d = theta[[0, 5, 10, 15, 16, 17, 18, 19]], v[:8]  # a diagonal map: (w_11 … w_44, b)
    exact_d = hessian(x, *unpack(theta_d, k, True), penalty, True)
    probs_d = softmax(affine_logits(x, *unpack(theta_d, k, True), True), axis=1)
    np.testing.assert_allclose(hessian_vector(x, probs_d, penalty, v_d, diagonal=True), exact_d @ v_d, rtol=1e-12,
                               atol=1e-13)
    blocks = hessian_blocks(x, probs, penalty)
    for a in range(k):
        index = np.r_[a * k:(a + 1) * k, k * k + a]  # class a's row of W, then b_a
        np.testing.assert_allclose(blocks[a], exact[np.ix_(index, index)], rtol=1e-12, atol=1e-13)


def test_single_precision_hessian_products_are_close_to_the_exact_ones():
    """Truncated Newton's float32 H v and blocks (they only shape its steps) are the float64 ones to ~1e-5."""
    rng = np.random.default_rng(4)
    x, k, penalty = np.log(rng.dirichlet(np.ones(5), size=80)), 5, odir_penalty(0.5, 0.1, 5)
    probs, v = rng.dirichlet(np.ones(k), size=80), rng.normal(size=k * k + k)
    single = x.astype(np.float32), probs.astype(np.float32)
    exact = hessian_vector(x, probs, penalty, v)
    assert hessian_vector(*single, penalty, v).dtype == np.float64
    np.testing.assert_allclose(hessian_vector(*single, penalty, v), exact, rtol=1e-4, atol=1e-5 * np.abs(exact).max())
    np.testing.assert_allclose(hessian_blocks(*single, penalty), hessian_blocks(x, probs, penalty), rtol=1e-4,
                               atol=1e-5)


def test_a_shared_preconditioner_changes_the_steps_not_the_optimum(monkeypatch):
    """Fits on the same features share truncated Newton's Hessian blocks (a ``PathState``, taken at the first fit
    that needs them): a weak penalty fitted after a strong one reaches the optimum of a fresh fit. Both to
    tol = 1e-13: the default 1e-10 bounds the Newton decrement, which leaves the outputs free to ~1e-5 along
    directions of curvature 6e-4 (this penalty's), and two routes to it differ there."""
    import calbench.solvers.affine_softmax_fit as affine

    monkeypatch.setattr(affine, "NEWTON_MAX_PARAMS", 0)
    logits, y = _toy(n=800, k=6)
    x, shared = Scores(logits).log_probs, PathState()
    fit_affine_softmax(x, y, odir_penalty(10.0, 1.0, 6), False, path=shared, newton_cg_after=2)
    assert shared.blocks.shape == (6, 7, 7)  # taken at the strong penalty's first truncated-Newton step
    weak = odir_penalty(0.01, 0.01, 6)
    w_shared, b_shared, info_shared = fit_affine_softmax(x, y, weak, False, path=shared, tol=1e-13)
    w_alone, b_alone, info_alone = fit_affine_softmax(x, y, weak, False, tol=1e-13, newton_cg_after=2)
    assert info_shared["converged"] and info_alone["converged"]
    assert info_alone["solver"] == "lbfgs+newton-cg"
    assert info_shared["solver"] == "newton-cg"  # a path that needed truncated Newton goes straight to it
    assert info_shared["loss"] == pytest.approx(info_alone["loss"], rel=1e-9)
    np.testing.assert_allclose(softmax(affine_logits(x, w_shared, b_shared, False), axis=1),
                               softmax(affine_logits(x, w_alone, b_alone, False), axis=1), atol=1e-6)


@pytest.mark.parametrize("features", ["log_probs", "logits"])
@pytest.mark.parametrize("preconditioner_rows", [1024, 200])
def test_newton_cg_reaches_the_exact_newton_optimum(features, preconditioner_rows, monkeypatch):
    """Full maps beyond NEWTON_MAX_PARAMS are finished by truncated Newton: the same optimum as Newton with
    the exact Hessian (objective within 1e-9 relative) on a weak penalty, where L-BFGS alone crawls; also with
    the preconditioner's blocks from every 4th row (PRECONDITIONER_ROWS)."""
    import calbench.solvers.affine_softmax_fit as affine
    import calbench.solvers.affine_truncated_newton as truncated_newton

    monkeypatch.setattr(truncated_newton, "PRECONDITIONER_ROWS", preconditioner_rows)
    logits, y = _toy(n=800, k=6)
    x, penalty = getattr(Scores(logits), features), odir_penalty(0.01, 0.01, 6)
    w_newton, b_newton, info_newton = fit_affine_softmax(x, y, penalty, False)
    monkeypatch.setattr(affine, "NEWTON_MAX_PARAMS", 0)
    w_cg, b_cg, info_cg = fit_affine_softmax(x, y, penalty, False, newton_cg_after=2)
    assert info_newton["solver"] == "lbfgs+newton" and info_cg["solver"] == "lbfgs+newton-cg"
    assert info_cg["converged"]
    assert info_cg["loss"] == pytest.approx(info_newton["loss"], rel=1e-9)
    np.testing.assert_allclose(softmax(affine_logits(x, w_cg, b_cg, False), axis=1),
                               softmax(affine_logits(x, w_newton, b_newton, False), axis=1), atol=1e-6)


@pytest.mark.parametrize("features", ["log_probs", "logits"])
@pytest.mark.parametrize("penalty", [odir_penalty(0.05, 0.01, 6), l2_penalty(0.05, 6)])
def test_large_maps_reach_the_exact_newton_optimum(features, penalty, monkeypatch):
    """Full maps of LARGE_MAP_CLASSES or more classes (1,000 in the ImageNet runs, here 6 by monkeypatch) start
    from the diagonal map (itself finished by truncated Newton with its exact float32 Hessian) and run
    truncated Newton with float32 products and the centred block preconditioner: the float64 objective
    decides the stop, so the optimum is exact Newton's (objective within 1e-9 relative, outputs 1e-6)."""
    import calbench.solvers.affine_softmax_fit as affine

    logits, y = _toy(n=800, k=6)
    x = getattr(Scores(logits), features)
    w_newton, b_newton, info_newton = fit_affine_softmax(x, y, penalty, False)
    monkeypatch.setattr(affine, "LARGE_MAP_CLASSES", 2)
    monkeypatch.setattr(affine, "NEWTON_MAX_PARAMS", 0)
    shared = PathState()
    w_cg, b_cg, info_cg = fit_affine_softmax(x, y, penalty, False, path=shared)
    assert info_newton["solver"] == "lbfgs+newton" and info_cg["solver"] == "diagonal+newton-cg"
    assert info_cg["converged"] and shared.x_single.dtype == np.float32
    assert info_cg["loss"] == pytest.approx(info_newton["loss"], rel=1e-9)
    np.testing.assert_allclose(softmax(affine_logits(x, w_cg, b_cg, False), axis=1),
                               softmax(affine_logits(x, w_newton, b_newton, False), axis=1), atol=1e-6)
    # a warm start from the optimum is a converged fit, and the start on a grid path reuses its state
    w_warm, _, info_warm = fit_affine_softmax(x, y, penalty, False, init=(w_cg, b_cg), path=shared)
    assert info_warm["converged"] and info_warm["solver"] == "newton-cg"
    assert info_warm["loss"] == pytest.approx(info_newton["loss"], rel=1e-9)
    # a fit alone (sms) takes its diagonal start's preconditioner from every 4th row (PRECONDITIONER_ROWS)
    import calbench.solvers.affine_truncated_newton as truncated_newton

    monkeypatch.setattr(truncated_newton, "PRECONDITIONER_ROWS", 200)
    w_alone, b_alone, info_alone = fit_affine_softmax(x, y, penalty, False)
    assert info_alone["converged"] and info_alone["loss"] == pytest.approx(info_newton["loss"], rel=1e-9)
    np.testing.assert_allclose(softmax(affine_logits(x, w_alone, b_alone, False), axis=1),
                               softmax(affine_logits(x, w_newton, b_newton, False), axis=1), atol=1e-6)


@pytest.mark.parametrize("block_rows", [2048, 7])
def test_class_features_hessian_is_the_log_loss_hessian_over_per_class_features(block_rows, monkeypatch):
    """Parameter (f, a) adds θ·features[f][:, a] to class a's score: the mean log-loss Hessian over those
    parameters is mean[(p_a δ_ab − p_a p_b) f f'], built from p(1 − p) on each class's own block (not p − p²,
    which cancels in float32 on confident rows); accumulated by blocks of rows, also of 7."""
    import calbench.solvers.affine_hessian as affine_hessian
    from calbench.solvers.affine_hessian import class_features_hessian

    monkeypatch.setattr(affine_hessian, "HESSIAN_BLOCK_ROWS", block_rows)

    rng = np.random.default_rng(3)
    n, k = 50, 4
    p = rng.dirichlet(np.ones(k), size=n)
    features = [rng.normal(size=(n, k)), rng.normal(size=(n, 1)), np.ones((1, 1))]
    full = [np.broadcast_to(f, (n, k)) for f in features]
    expected = np.zeros((3 * k, 3 * k))
    for f, ff in enumerate(full):
        for g, fg in enumerate(full):
            for a in range(k):
                for b in range(k):
                    curvature = p[:, a] * ((a == b) - p[:, b])
                    expected[f * k + a, g * k + b] = np.mean(curvature * ff[:, a] * fg[:, b])
    np.testing.assert_allclose(class_features_hessian(p, features), expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("block_entries", [2**15, 45])
def test_full_map_loss_hessian_is_the_log_loss_hessian_in_theta_layout(block_entries, monkeypatch):
    """Newton's Hessian of a full map, G formed class-major and summed over row blocks (of 2 rows at
    NEWTON_BLOCK_ENTRIES = 45, with a remainder), then permuted to θ's layout: entry (a·k + j, b·k + l) is
    mean[(p_a δ_ab − p_a p_b) x_j x_l], the intercepts' at k² + a with feature 1."""
    import calbench.solvers.affine_hessian as affine_hessian
    from calbench.solvers.affine_hessian import loss_hessian

    monkeypatch.setattr(affine_hessian, "NEWTON_BLOCK_ENTRIES", block_entries)
    rng = np.random.default_rng(4)
    n, k = 51, 4
    p, x = rng.dirichlet(np.ones(k), size=n), rng.normal(size=(n, k))
    features = np.hstack([x, np.ones((n, 1))])
    position = lambda a, j: k * k + a if j == k else a * k + j  # noqa: E731
    expected = np.zeros((k * k + k, k * k + k))
    for a in range(k):
        for b in range(k):
            curvature = p[:, a] * ((a == b) - p[:, b])
            for j in range(k + 1):
                for i in range(k + 1):
                    expected[position(a, j), position(b, i)] = np.mean(curvature * features[:, j] * features[:, i])
    np.testing.assert_allclose(loss_hessian(x, p, False), expected, rtol=1e-12, atol=1e-15)


def test_cholesky_solver_keeps_its_ridge_relative_to_each_entry():
    """A Hessian with a strong intercept penalty (curvature 2·10⁶, μ_code = 10⁶) beside weights of curvature
    10⁻³–1: the preconditioned Hessian stays the identity (a ridge of 1e-7 of the mean diagonal was 0.075
    there, so P⁻¹H had eigenvalues down to ~0.01, and truncated Newton needed ~90 Hessian-vector products a
    step on ImageNet-sized ln q̂)."""
    from calbench.solvers.affine_preconditioners import cholesky_solver

    rng = np.random.default_rng(4)
    a = rng.normal(size=(8, 8))
    scales = np.array([1e-3, 1e-2, 0.1, 1.0, 0.5, 2e6, 2e6, 2e6])
    h = (a @ a.T / 8 + np.eye(8)) * np.sqrt(np.outer(scales, scales))
    solve = cholesky_solver(h)
    preconditioned = np.column_stack([solve(column) for column in h.T])  # P⁻¹H: the identity up to the ridge
    eigenvalues = np.linalg.eigvals(preconditioned).real
    assert eigenvalues.min() > 1 - 1e-5 and eigenvalues.max() < 1 + 1e-5


@pytest.mark.parametrize("penalty", [odir_penalty(0.01, 0.01, 5, "code"), odir_penalty(0.01, 1e6, 5, "code"),
                                     odir_penalty(1.0, 0.0, 5, "code", centre=1.3), l2_penalty(0.01, 5, "code")])
def test_balanced_preconditioner_solves_the_softmax_shift_directions_exactly(penalty):
    """Truncated Newton's preconditioner: the per-class blocks' inverse with the intercept penalty added by
    Sherman–Morrison is the inverse of the blocks with it; balanced by the k + 1 shift directions U (one vector
    added to every class's row, which σ(W x + b) ignores), P is symmetric and P H U = U exactly, and P H is far
    better conditioned than the blocks' M⁻¹ H under a weak penalty (Mandel 1993; Nabben & Vuik 2006)."""
    from calbench.solvers.affine_hessian import with_curvature
    from calbench.solvers.affine_objective import pack
    from calbench.solvers.affine_preconditioners import blocks_solver, without_shift

    rng = np.random.default_rng(5)
    k = 5
    x = np.log(rng.dirichlet(np.ones(k), size=400))
    theta = 0.3 * rng.normal(size=k * k + k)
    probs = softmax(affine_logits(x, *unpack(theta, k, False), False), axis=1)
    h = hessian(x, *unpack(theta, k, False), penalty, False)
    blocks_solve = blocks_solver(PathState(blocks=hessian_blocks(x, probs, Penalty())), penalty)
    inverse = np.linalg.inv(with_curvature(hessian_blocks(x, probs, Penalty()), penalty))
    r = rng.normal(size=k * k + k)
    rows = np.hstack([r[: k * k].reshape(k, k), r[k * k:, None]])
    expected = np.einsum("aij,aj->ai", inverse, rows)
    np.testing.assert_allclose(blocks_solve(r), np.concatenate([expected[:, :k].ravel(), expected[:, k]]),
                               rtol=1e-9, atol=1e-12 * np.abs(expected).max())
    precondition = without_shift(blocks_solve, pack(*penalty.curvature(k), False), k)
    identity = np.eye(k * k + k)
    p = np.column_stack([precondition(e) for e in identity])
    np.testing.assert_allclose(p, p.T, atol=1e-9 * np.abs(p).max())
    shift = np.zeros((k * k + k, k + 1))  # column j < k: w_aj of every class a; column k: every b_a
    shift[: k * k, :k] = np.tile(np.eye(k), (k, 1))
    shift[k * k:, k] = 1.0
    np.testing.assert_allclose(softmax(affine_logits(x, *unpack(theta + shift[:, 2], k, False), False), axis=1),
                               probs, atol=1e-12)  # U's columns leave the outputs unchanged
    curved = np.diagonal(shift.T @ h @ shift) > 1e-12  # a shift the penalty leaves flat is a null direction of H
    np.testing.assert_allclose((p @ h @ shift)[:, curved], shift[:, curved], atol=1e-13 * np.abs(h).max())
    m = np.column_stack([blocks_solve(e) for e in identity])

    def condition(a):  # over the directions that H does not map to 0
        eigenvalues = np.sort(np.abs(np.linalg.eigvals(a).real))
        eigenvalues = eigenvalues[eigenvalues > 1e-10 * eigenvalues[-1]]
        return eigenvalues[-1] / eigenvalues[0]

    assert condition(p @ h) < condition(m @ h) / (10.0 if penalty.off < 1.0 else 1.0)


@pytest.mark.parametrize("penalty, bound", [(odir_penalty(10.0, 10.0, 30, "code"), 3.0),
                                            (l2_penalty(0.01, 30, "code"), 400.0)])
def test_large_map_preconditioner_captures_each_row_sum(penalty, bound):
    """ln q̂ share a large per-row component (−log-normaliser), so the Hessian is stiff along each class's
    all-ones weight direction (the row sum t of x) and across classes there. The preconditioner treats that
    direction with the diagonal map's parameters in a dense block (w_aa, γ_a, b_a) and the rest of each row's
    off-diagonal weights by their diagonal without it: under ODIR P⁻¹H's condition number is 1.4 on this
    30-class task, against 15.6 for the diagonal-only one it replaced and 15.4 for Jacobi; under a weak L2
    penalty 268, against 7,971 for Jacobi. P⁻¹ is symmetric positive definite."""
    from calbench.solvers.affine_objective import float32_probs, objective_residual, pack
    from calbench.solvers.affine_preconditioners import large_map_preconditioner

    rng = np.random.default_rng(0)
    k, n = 30, 3000
    z = 3 * np.log(rng.dirichlet(np.full(k, 0.3), size=n))
    y = sample_categorical(softmax(z / 1.5, axis=1), rng)
    x = Scores(z).log_probs
    w, intercept, _ = fit_affine_softmax(x, y, penalty, True)  # the diagonal map, as a full W: the fit's start
    h = hessian(x, w, intercept, penalty, False)
    x_single = x.astype(np.float32)
    probs = float32_probs(objective_residual(pack(w, intercept, False), x, y, penalty, False)[2], y)
    precondition = large_map_preconditioner(x_single, probs, penalty, PathState())
    p_inv = np.column_stack([precondition(e) for e in np.eye(h.shape[0])])
    np.testing.assert_allclose(p_inv, p_inv.T, atol=1e-12 * np.abs(p_inv).max())
    assert np.linalg.eigvalsh(p_inv).min() > 0

    def condition(m):
        eigenvalues = np.sort(np.linalg.eigvals(m).real)
        return eigenvalues[-1] / eigenvalues[0]

    jacobi = condition(h / np.diagonal(h)[:, None])
    assert condition(p_inv @ h) < min(bound, jacobi / 5)


@pytest.mark.parametrize("penalty", [odir_penalty(0.5, 0.01, 6), Penalty()])
@pytest.mark.parametrize("preconditioner_rows", [1024, 200])
def test_diagonal_maps_by_truncated_newton_reach_the_exact_newton_optimum(penalty, preconditioner_rows, monkeypatch):
    """Diagonal maps of LARGE_MAP_CLASSES or more classes (``vs`` at 1,000) are finished by truncated Newton
    with O(n k) Hessian-vector products: the optimum of exact Newton (also unpenalised, where the Hessian
    preconditioner is singular along the shift of every b); also with the preconditioning Hessian from every 4th
    row (PRECONDITIONER_ROWS, a fit alone)."""
    import calbench.solvers.affine_softmax_fit as affine
    import calbench.solvers.affine_truncated_newton as truncated_newton

    monkeypatch.setattr(truncated_newton, "PRECONDITIONER_ROWS", preconditioner_rows)

    logits, y = _toy(n=800, k=6)
    x = Scores(logits).log_probs
    # unpenalised, the loss is flat enough that tol = 1e-10 leaves outputs 1e-5 apart: both fits go further
    w_newton, b_newton, info_newton = fit_affine_softmax(x, y, penalty, True, tol=1e-14)
    monkeypatch.setattr(affine, "LARGE_MAP_CLASSES", 2)
    monkeypatch.setattr(affine, "NEWTON_MAX_PARAMS", 0)
    w_cg, b_cg, info_cg = fit_affine_softmax(x, y, penalty, True, tol=1e-14, newton_cg_after=2)
    assert info_newton["solver"] == "lbfgs+newton" and info_cg["solver"] == "lbfgs+newton-cg"
    assert info_cg["converged"] and info_cg["loss"] == pytest.approx(info_newton["loss"], rel=1e-9)
    np.testing.assert_allclose(softmax(affine_logits(x, w_cg, b_cg, True), axis=1),
                               softmax(affine_logits(x, w_newton, b_newton, True), axis=1), atol=1e-6)


def test_canonical_conversion_round_trip():
    rng = np.random.default_rng(2)
    a = rng.random((4, 4)) * 2
    a[rng.integers(4, size=4), np.arange(4)] = 0.0  # a zero in every column (Eq. 8)
    c = rng.dirichlet(np.ones(4))
    a2, c2 = linear_to_canonical(*canonical_to_linear(a, c))
    np.testing.assert_allclose(a2, a, atol=1e-12)
    np.testing.assert_allclose(c2, c, atol=1e-12)
    # linear → canonical → linear is the same map (not the same W: softmax is shift-invariant)
    w, b = rng.normal(size=(4, 4)), rng.normal(size=4)
    x = np.log(rng.dirichlet(np.ones(4), size=20))
    w2, b2 = canonical_to_linear(*linear_to_canonical(w, b))
    np.testing.assert_allclose(softmax(x @ w2.T + b2, axis=1), softmax(x @ w.T + b, axis=1), atol=1e-12)
    # c is the image of the simplex centre, and A has non-negative columns with a zero each
    a3, c3 = linear_to_canonical(w, b)
    assert (a3 >= 0).all() and np.allclose(a3.min(axis=0), 0)
    np.testing.assert_allclose(softmax(np.full(4, -np.log(4)) @ w.T + b), c3)


def test_planted_dirichlet_map_is_recovered():
    """Labels drawn from σ(A ln(q/u) + ln c): the fitted canonical (A, c) approach the planted ones."""
    rng = np.random.default_rng(3)
    a = np.array([[1.4, 0.0, 0.3], [0.0, 0.8, 0.0], [0.5, 0.6, 1.1]])
    c = np.array([0.5, 0.3, 0.2])
    errors = []
    for n in (2000, 50000):
        q = rng.dirichlet(np.ones(3), size=n)
        y = sample_categorical(softmax(np.log(q * 3) @ a.T + np.log(c), axis=1), rng)
        est = make("dir").fit(np.log(q), y)
        errors.append(max(np.abs(est.canonical_weights_ - a).max(), np.abs(est.canonical_intercept_ - c).max()))
    assert errors[1] < 0.05, errors
    assert errors[1] < errors[0]


def test_lece_table1_dir_column():
    """LECE paper Table 1, DIR column (100 seeds there, 8 here): confidence CE 0.022 ± 0.004,
    classwise CE 0.018 ± 0.002, log-loss 0.747 ± 0.002; each mean must lie within two of the paper's
    per-seed standard deviations (the standard error of 8 seeds is about a third of one)."""
    ids = ["true_ce.conf.l1", "true_ce.cw.l1", "nll"]
    rows = []
    for seed in range(8):
        data = generate("lece3", seed, 5000, 100_000)
        probs = make("dir").fit(data["cal"]["logits"], data["cal"]["labels"]).predict_proba(data["test"]["logits"])
        rows.append([evaluate(probs, data["test"]["labels"], ids, true_probs=data["test"]["true_probs"])[i]
                     for i in ids])
    mean = np.mean(rows, axis=0)
    for got, paper, std in zip(mean, [0.022, 0.018, 0.747], [0.004, 0.002, 0.002]):
        assert abs(got - paper) <= 2 * std, (mean, paper)


def test_warm_started_grid_matches_separate_fits():
    logits, y = _toy(n=400)
    grid = {"reg_lambda": [100.0, 1.0, 0.01], "reg_mu": [10.0, 0.1]}
    est = make("dir_odir", grid=None)
    points = [dict(zip(grid, v)) for v in [(lam, mu) for lam in grid["reg_lambda"] for mu in grid["reg_mu"]]]
    train, val = Scores(logits[:300]), Scores(logits[300:])
    shared = {i: probs for i, probs, _ in est.predict_grid(points, train, y[:300], val)}
    assert sorted(shared) == list(range(len(points)))
    for p, probs in zip(points, (shared[i] for i in range(len(points)))):
        alone = make("dir_odir", grid=None, **p).fit(train, y[:300]).predict_proba(val)
        np.testing.assert_allclose(probs, alone, atol=2e-4)
    assert sorted(warm_start_order(points)) == list(range(len(points)))
    assert warm_start_order(points)[0] in (0, 1)  # strongest λ first


def test_default_grids_are_the_authors():
    g10, g100 = authors_odir_grid(10, "code"), authors_odir_grid(100, "code")
    assert (len(g10["reg_lambda"]), len(g10["reg_mu"])) == (36, 12)
    assert (len(g100["reg_lambda"]), len(g100["reg_mu"])) == (27, 9)
    assert min(g10["reg_lambda"]) == pytest.approx(0.25e-5) and max(g10["reg_lambda"]) == pytest.approx(1e6)
    assert g100["reg_mu"] == pytest.approx([10.0**i for i in range(-2, 7)])
    paper = authors_odir_grid(10)
    np.testing.assert_allclose(paper["reg_lambda"], np.array(g10["reg_lambda"]) * 90)
    np.testing.assert_allclose(paper["reg_mu"], np.array(g10["reg_mu"]) * 10)
    np.testing.assert_allclose(authors_odir_grid(10, with_mu=False)["reg_lambda"], np.array(g10["reg_lambda"]) * 110)
    # paper and code scales give the same penalty after conversion
    w, b = np.arange(9.0).reshape(3, 3), np.array([1.0, 2.0, -1.0])
    assert odir_penalty(6 * 0.5, 3 * 2.0, 3).value(w, b) == pytest.approx(odir_penalty(0.5, 2.0, 3, "code").value(w, b))


@pytest.mark.parametrize("name", TUNED)
def test_tuned_methods_use_five_fold_cv_with_fold_ensemble(name):
    est = make(name)
    assert isinstance(est, GridSearch) and est.folds == 5 and est.ensemble
    logits, y = _toy(n=300)
    est = make(name, grid={"reg_lambda": [1.0, 10.0]}).fit(logits, y)
    assert len(est.estimators_) == 5
    probs = est.predict_proba(logits)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    assert est.fitted_summary()["best_params"]["reg_lambda"] in (1.0, 10.0)


def test_fold_ensemble_keeps_the_searchs_fold_models(monkeypatch):
    """With ``ensemble``, the fold models at the chosen point are those the search fitted (warm-started along
    the grid), not refitted; refitting them from the identity on the same rows (no model kept:
    KEEP_MODELS_BYTES = 0) gives the same maps to the solver's tolerance."""
    import calbench.methods.tuning as tuning
    from calbench.methods.linear_maps import AffineSoftmax

    logits, y = _toy(n=400)
    grid = {"reg_lambda": [10.0, 0.1], "reg_mu": [1.0, 0.01]}
    fits = []
    solve = AffineSoftmax._solve
    monkeypatch.setattr(AffineSoftmax, "_solve", lambda self, *a, **k: fits.append(1) or solve(self, *a, **k))
    kept = make("dir_odir", grid=grid).fit(logits, y)
    assert len(fits) == 5 * 4
    monkeypatch.setattr(tuning, "KEEP_MODELS_BYTES", 0)
    refitted = make("dir_odir", grid=grid).fit(logits, y)
    assert len(fits) == 2 * 5 * 4 + 5
    assert kept.best_index_ == refitted.best_index_
    for a, b in zip(kept.estimators_, refitted.estimators_):
        np.testing.assert_allclose(a.weights_, b.weights_, atol=1e-4)
    np.testing.assert_allclose(kept.predict_proba(logits), refitted.predict_proba(logits), atol=1e-6)
    # room for one model (4 × 4 weights, 4 intercepts) per fold: each fold keeps its lowest-loss one, and the
    # folds where that is not the chosen point refit it (here 2 of 5)
    monkeypatch.setattr(tuning, "KEEP_MODELS_BYTES", (16 + 4) * 8)
    fits.clear()
    partly = make("dir_odir", grid=grid).fit(logits, y)
    fold_best = np.argmin([-partly.cv_results_[f"split{f}_test_score"] for f in range(5)], axis=1)
    assert 0 < np.sum(fold_best != partly.best_index_) < 5
    assert len(fits) == 5 * 4 + np.sum(fold_best != partly.best_index_)
    np.testing.assert_allclose(partly.predict_proba(logits), refitted.predict_proba(logits), atol=1e-6)


def test_callable_default_grid_reaches_grid_search():
    logits, y = _toy(n=200, k=3)
    est = make("dir_l2", max_iter=5)
    est.fit(logits, y)
    assert len(est.cv_losses_) == 12  # one λ per decade of the authors' list for fewer than 100 classes


def test_default_grid_is_the_authors_range_at_one_lambda_per_decade():
    """coarse_odir_grid: a subset of authors_odir_grid (spec §1.5) below 1,000 classes with the same powers
    10^s … 10^6 (the authors' list also has 0.25·10^s and 0.5·10^s below 10^s)."""
    for k in (10, 100):
        coarse, full = coarse_odir_grid(k), authors_odir_grid(k)
        for key in ("reg_lambda", "reg_mu"):
            assert set(np.round(coarse[key], 6)) <= set(np.round(full[key], 6))
            assert max(coarse[key]) == pytest.approx(max(full[key]))
        assert min(coarse["reg_mu"]) == pytest.approx(min(full["reg_mu"]))
        assert min(coarse["reg_lambda"]) == pytest.approx(4 * min(full["reg_lambda"]))
    g100 = coarse_odir_grid(100, "code")
    assert g100["reg_lambda"] == pytest.approx([10.0**i for i in range(-2, 7)])
    assert g100["reg_mu"] == pytest.approx([1e-2, 1e2, 1e6])
    assert coarse_odir_grid(100, "code", with_mu=False)["reg_lambda"][0] == pytest.approx(0.01)
    assert coarse_odir_grid(1000, "code")["reg_lambda"][0] == pytest.approx(10.0)
    assert coarse_odir_grid(1000, "code", with_mu=False)["reg_lambda"][0] == pytest.approx(0.01)


@pytest.mark.filterwarnings("ignore::calbench.methods.base.MissingClassWarning")  # 3 rows a class
def test_from_1000_classes_every_mu_of_the_range_pins_the_intercepts():
    """From 1,000 classes the default grid keeps one μ (μ_code = 10, the range's lowest; linear_maps._mu_powers):
    each intercept's penalty curvature 2μ ≥ 20 dwarfs the mean log-loss's (≤ 1/4, about 1/k), so μ_code = 10,
    10⁴ and 10⁶ (the three the grid had) fit the same map: |bₐ| ≤ |∂loss/∂bₐ|/(2μ) at μ_code = 10 and the
    outputs of the three agree to 1e-4."""
    assert coarse_odir_grid(1000, "code")["reg_mu"] == pytest.approx([10.0])
    assert coarse_odir_grid(1000)["reg_mu"] == pytest.approx([1000 * 10.0])  # paper scale: μ_paper = k·μ_code
    rng = np.random.default_rng(3)
    k, n = 1000, 3000
    z = 2 * rng.normal(size=(n, k))
    z[np.arange(n), rng.integers(0, k, n)] += 9.0  # 1,000-class logits, overconfident by 1.5
    y = sample_categorical(softmax(z / 1.5, axis=1), rng)
    probs = []
    for mu in (10.0, 1e4, 1e6):
        est = make("ms_odir", grid=None, reg_lambda=1e6, reg_mu=mu, reg_scale="code")
        est.fit(z, y)
        probs.append(est.predict_proba(z))
        grad_b = probs[-1].mean(axis=0) - np.bincount(y, minlength=k) / n  # the log-loss's, at the fit
        np.testing.assert_allclose(est.intercept_, -grad_b / (2 * mu), atol=1e-6 / mu)  # optimality in b
        assert np.abs(est.intercept_).max() < 1e-3
    np.testing.assert_allclose(probs[0], probs[2], atol=1e-4)
    np.testing.assert_allclose(probs[1], probs[2], atol=1e-4)


def test_bad_settings_raise_clear_errors():
    logits, y = _toy(n=100)
    with pytest.raises(ValueError, match="reg_scale"):
        make("dir_odir", grid=None, reg_scale="keras").fit(logits, y)
    with pytest.raises(ValueError, match="reg_lambda"):
        make("ms_odir", grid=None, reg_lambda=-1.0).fit(logits, y)
    with pytest.raises(ValueError, match="eps"):
        make("dir", eps=0.0).fit(logits, y)


def test_clipping_of_log_probabilities():
    """ln q̂ is clipped below at ln(eps) (Dirichlet paper §3 clips q̂ before the log)."""
    logits = np.array([[0.0, -60.0, -5.0], [1.0, 2.0, 3.0]])
    est = make("dir", eps=1e-12)
    x = est.features(Scores(logits))
    assert x.min() == pytest.approx(np.log(1e-12))
    assert est.features(Scores(logits))[1] == pytest.approx(Scores(logits).log_probs[1])


def test_transform_passes_logits_and_large_class_counts_stay_linear_in_memory():
    rng = np.random.default_rng(4)
    k = 300
    logits, y = rng.normal(size=(200, k)) * 3, rng.integers(k, size=200)
    est = make("ms_odir", grid=None, reg_lambda=1e3, reg_mu=1.0, max_iter=3).fit(logits, y)
    out = est.transform(Scores(logits))
    np.testing.assert_allclose(softmax(out.logits, axis=1), est.predict_proba(logits))
    assert est.weights_.shape == (k, k)


def test_default_config_settings_build_and_fit():
    """The reduced grids of config/config.yaml are valid settings of the Dirichlet paper methods, and
    every one of them runs in the default config or in config/cifar.yaml."""
    import yaml

    from conftest import REPO

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cifar = yaml.safe_load((REPO / "config" / "cifar.yaml").read_text())
    logits, y = _toy(n=200, k=3)
    for name in UNTUNED + TUNED:
        assert name in config["methods"] + cifar["methods"]
        est = make(name, **(config["method_settings"].get(name) or {})).fit(logits, y)
        np.testing.assert_allclose(est.predict_proba(logits).sum(axis=1), 1.0)


def test_a_fit_stopped_by_max_iter_warns_naming_the_setting():
    """A weak penalty on separable data has no finite minimiser; the fit must say so."""
    from calbench.convergence import NotConvergedWarning

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 30)
    logits = 4.0 * np.eye(3)[y] + 0.1 * rng.standard_normal((90, 3))  # separable: the loss keeps falling
    with pytest.warns(NotConvergedWarning, match=r"max_iter=5 .*reg_lambda=1e-06"):
        make("dir_odir", reg_lambda=1e-6, reg_mu=1e-6, grid=None, max_iter=5).fit(logits, y)


@pytest.mark.parametrize("name", ["dir_odir", "ms_odir", "vs"])
def test_a_fit_that_separates_its_calibration_data_warns_that_no_optimum_exists(name):
    """Separable calibration data (every row right with a margin): ODIR leaves the diagonal unpenalised and
    vector scaling everything, so the log-loss falls towards 0 as the weights grow; the solver stops on a tiny
    decrease and must say that the map is overconfident (the default run's digits ResNet: training loss
    1.5e-10, test NLL 3.7 against 0.066 uncalibrated). Noisy labels (a finite optimum) do not warn."""
    import warnings

    from calbench.convergence import NoFiniteOptimumWarning

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 30)
    logits = 4.0 * np.eye(3)[y] + 0.1 * rng.standard_normal((90, 3))
    settings = {} if name == "vs" else {"reg_lambda": 1.0, "reg_mu": 1.0, "grid": None}
    with pytest.warns(NoFiniteOptimumWarning, match=rf"{name}: the training objective fell to .*separable"):
        make(name, **settings).fit(logits, y)
    noisy = np.where(rng.random(90) < 0.2, rng.integers(0, 3, 90), y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoFiniteOptimumWarning)
        make(name, **settings).fit(logits, noisy)


def test_a_grid_search_reports_each_kind_of_fold_warning_once():
    """Separable calibration data make every CV fit of dir_odir warn (folds × points of them, 30 log lines per
    default-run job on digits): the grid search gathers them into one warning of the same category that says how
    often it came."""
    from calbench.convergence import NoFiniteOptimumWarning

    y = np.repeat(np.arange(3), 30)
    logits = 4.0 * np.eye(3)[y] + 0.1 * np.random.default_rng(0).standard_normal((90, 3))
    search = make("dir_odir", grid={"reg_lambda": [1.0, 10.0], "reg_mu": [1.0]}, cv={"folds": 3})
    with pytest.warns(NoFiniteOptimumWarning) as caught:
        search.fit(logits, y)
    gathered = [str(w.message) for w in caught if "grid search" in str(w.message)]
    assert len(gathered) == 1, [str(w.message) for w in caught]
    assert gathered[0].startswith("dir_odir grid search (3 folds × 2 points): this warning came 6 times in the CV "
                                  "fits, first as: dir_odir: the training objective fell to")


@pytest.mark.parametrize("name, warns", [("vs", True), ("ms", True), ("ms_odir", False), ("dir_l2", False)])
def test_a_class_separated_by_its_own_logit_warns_where_its_scale_and_intercept_are_free(name, warns):
    """One class's rows all above the others' on its own logit, the other classes overlapping (training loss far
    above 1e-6): raising that class's weight and moving its intercept lowers every row's loss, so vs and ms have
    no finite optimum (the default run's digits ViT, seed-0 split: vs weight 96, test NLL 0.54 against 0.17
    uncalibrated). ODIR and L2 penalise the intercept or the diagonal: a finite optimum, no warning."""
    import warnings

    from calbench.convergence import NoFiniteOptimumWarning
    from calbench.methods.linear_maps import separated_classes

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    logits = 0.8 * rng.standard_normal((300, 3)) + np.eye(3)[y]
    logits[:, 0] = np.where(y == 0, rng.uniform(2, 3, 300), rng.uniform(-1, 1, 300))
    assert separated_classes(logits, y).tolist() == [0]
    assert separated_classes(np.c_[-logits[:, :1], logits[:, 1:]], y).tolist() == [0]  # below the others, too
    settings = {"reg_lambda": 1.0, "grid": None, **({"reg_mu": 1.0} if name == "ms_odir" else {})}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = make(name, **({} if warns else settings)).fit(logits, y)
    separated = [str(w.message) for w in caught if issubclass(w.category, NoFiniteOptimumWarning)]
    assert model.fit_info_["loss"] > 0.1 and len(separated) == int(warns), separated
    assert all(m.startswith(f"{name}: the calibration rows of class(es) [0] are separated from all others by their "
                            "own logit") for m in separated)


def test_dir_l2_warns_when_every_lambda_of_its_grid_is_too_strong():
    """The penalty weights are open-ended: a Dir-L2 grid of strong λ only (the default one's situation at 1,000
    classes, docs/methods_parametric.md) picks its weakest λ, still falling steeply there, and says so."""
    from calbench.methods.tuning import GridEdgeWarning

    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 600)
    z = rng.normal(size=(600, 4)) + 3.0 * np.eye(4)[y]
    with pytest.warns(GridEdgeWarning, match=r"dir_l2: the 5-fold CV log-loss is lowest at the smallest reg_lambda "
                                             r"of the grid, 10 .*grid: \{reg_lambda: \[\.\.\.\]\}"):
        make("dir_l2", grid={"reg_lambda": [10.0, 100.0, 1000.0]}).fit(z, y)


def test_a_default_grid_continues_its_warm_started_path_as_fresh_fits_would():
    """The extension of a default grid (GridSearch ``extend``) continues each fold's path from its fitted models:
    the CV losses of the added points equal those of the same points written out and fitted along a fresh path,
    and the search stops at the first point where the loss rises (weak-λ end of a too-strong Dir-L2 grid)."""
    from calbench.methods import GridSearch

    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 600)
    z = rng.normal(size=(600, 4)) + 3.0 * np.eye(4)[y]
    grid = [10.0, 100.0, 1000.0]
    extended = GridSearch(make("dir_l2", grid=None), {"reg_lambda": grid}, folds=5, ensemble=True,
                          extend=True).fit(z, y)
    added = [p["reg_lambda"] for p in extended.added_points_]
    assert added and added == pytest.approx([grid[0] / 10**i for i in range(1, len(added) + 1)])
    assert extended.cv_results_["param_reg_lambda"] == pytest.approx(grid + added)
    losses = extended.cv_losses_
    assert losses[-1] > losses[-2] or len(added) == 3  # stopped where the loss rose, or at the bound
    written = GridSearch(make("dir_l2", grid=None), {"reg_lambda": grid + added}, folds=5, ensemble=True).fit(z, y)
    np.testing.assert_allclose(extended.cv_losses_, written.cv_losses_, rtol=1e-7)


@pytest.mark.parametrize("diagonal", [True, False])
def test_float32_hessians_of_saturated_rows_stay_positive_semi_definite(diagonal):
    """The log-loss Hessian Σ (diag(p) − p pᵀ) ⊗ x̃ x̃ᵀ is positive semi-definite because 1 − pₐ = Σ_{b≠a} p_b.
    In float32, rows whose top probability rounds to 1 (1 − p = 0 while the others stay positive) and
    probabilities among the subnormals made truncated Newton's preconditioner indefinite (−21 and −1.3·10⁸ after
    Jacobi scaling) on an unpenalised 1,000-class vector scaling; built from :func:`curvature_parts` the
    scaled Hessian's eigenvalues stay ≥ −1e-6."""
    from calbench.solvers.affine_hessian import class_features_hessian, loss_hessian

    rng = np.random.default_rng(5)
    n, k = 40, 6
    logits = rng.normal(size=(n, k)) * 3
    logits[:, 0] += np.where(np.arange(n) < n // 2, 40.0, -40.0)  # p₀ is 1.0 in float32 or below 10⁻¹⁵
    logits[n // 2:, 1] -= 90.0  # p₁ ≈ 10⁻⁴⁰: float32 subnormals
    p = softmax(logits, axis=1).astype(np.float32)
    x = rng.normal(size=(n, k)).astype(np.float32)
    assert (p[: n // 2, 0] == 1.0).all() and ((0.0 < p) & (p < np.finfo(np.float32).tiny)).any()
    h = loss_hessian(x, p, diagonal) if not diagonal else class_features_hessian(p, [x, np.ones((1, 1), np.float32)])
    scale = 1.0 / np.sqrt(np.maximum(np.diagonal(h), 1e-300))
    assert np.linalg.eigvalsh(h * scale[:, None] * scale[None, :]).min() > -1e-6
    from calbench.solvers.affine_hessian import curvature_parts

    kept, complement = curvature_parts(p)
    np.testing.assert_allclose(complement[: n // 2, 0], np.delete(kept[: n // 2], 0, axis=1).sum(axis=1), rtol=1e-6)
    assert kept[n // 2:, 1].max() == 0.0 and (np.delete(kept, 1, axis=1) == np.delete(p, 1, axis=1)).all()
