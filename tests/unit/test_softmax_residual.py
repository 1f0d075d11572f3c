"""The compiled row passes of the affine-softmax solver (kernels/softmax_residual.py) equal the plain numpy
objective, gradient, probabilities and Hessian pieces, and a grid search selects what it did before them."""

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

from calbench.data.synthetic import sample_categorical
from calbench.kernels.softmax_residual import hessian_vector_pass, residual_pass, softmax_pass
from calbench.methods import make
from calbench.solvers.affine_hessian import hessian
from calbench.solvers.affine_objective import (
    affine_logits,
    float32_probs,
    hessian_diagonal,
    hessian_vector,
    objective,
    objective_residual,
    pack,
    unpack,
)
from calbench.solvers.affine_penalty import Penalty, l2_penalty, odir_penalty

PENALTIES = [odir_penalty(2.0, 3.0, 6), l2_penalty(1.5, 6)]


def _scores(kind: str, rng, n=40, k=6) -> np.ndarray:
    """Scores x Wᵀ of several kinds: ordinary, large (±3·10⁴), offset by 10⁶ per row, tied rows and entries,
    very negative (exp underflows below −708 after the max shift). 300 rows of 6 pass through the kernels'
    exp in three blocks of 85 (BLOCK_ENTRIES) and a remainder of 45."""
    base = rng.normal(size=(n, k))
    if kind == "large":
        return base * 3e4
    if kind == "offset":
        return base + rng.choice([-1e6, 1e6], size=(n, 1))
    if kind == "ties":
        return np.round(base)
    if kind == "underflow":
        return np.where(rng.random((n, k)) < 0.5, -1e5, base)
    return base


def _plain_residual(scores, intercept, y):
    """The straightforward numpy form: σ(s + b) − onehot(y), the summed log-loss, the residual's column sums."""
    logits = scores + intercept
    residual = softmax(logits, axis=1)
    residual[np.arange(y.size), y] -= 1.0
    loss = float(np.sum(logsumexp(logits, axis=1) - logits[np.arange(y.size), y]))
    return residual, loss, residual.sum(axis=0)


def _plain_objective(theta, x, y, penalty, diagonal):
    """:func:`objective` written out in numpy (the form before the compiled passes)."""
    n, k = x.shape
    weights, intercept = unpack(theta, k, diagonal)
    logits = affine_logits(x, weights, intercept, diagonal)
    residual = softmax(logits, axis=1)
    residual[np.arange(n), y] -= 1.0
    loss = np.mean(logsumexp(logits, axis=1) - logits[np.arange(n), y])
    pen_w, pen_b = penalty.gradient(weights, intercept)
    grad_w = np.einsum("ij,ij->j", residual, x) + n * np.diagonal(pen_w) if diagonal else (residual.T @ x + n * pen_w)
    grad = np.concatenate([np.ravel(grad_w), residual.sum(axis=0) + n * pen_b]) / n
    return loss + penalty.value(weights, intercept), grad


@pytest.mark.parametrize("kind", ["normal", "large", "offset", "ties", "underflow"])
@pytest.mark.parametrize("rows", [40, 300])
def test_residual_pass_equals_the_numpy_softmax_residual(kind, rows):
    rng = np.random.default_rng(0)
    scores, intercept = _scores(kind, rng, n=rows), rng.normal(size=6)
    y = rng.integers(0, 6, scores.shape[0])
    residual, loss, sums = _plain_residual(scores, intercept, y)
    work, column_sums = scores.copy(), np.zeros(6)
    assert residual_pass(work, intercept, y, column_sums) == pytest.approx(loss, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(work, residual, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(column_sums, sums, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["normal", "large", "offset", "ties", "underflow"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("rows", [40, 300])
def test_softmax_pass_equals_scipy_softmax(kind, dtype, rows):
    rng = np.random.default_rng(1)
    scores, intercept = _scores(kind, rng, n=rows).astype(dtype), rng.normal(size=6).astype(dtype)
    expected = softmax(scores.astype(np.float64) + intercept.astype(np.float64), axis=1)
    if dtype == np.float32:  # s + b rounds to float32's spacing first (0.06 at 10⁶; 0.008 at the 10⁵ of a row
        expected = softmax((scores + intercept).astype(np.float64), axis=1)  # that underflows whole)
    work = scores.copy()
    softmax_pass(work, intercept)
    assert work.dtype == dtype
    np.testing.assert_allclose(work, expected, rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_hessian_vector_pass_equals_the_softmax_jacobian_product(dtype):
    rng = np.random.default_rng(2)
    probs = rng.dirichlet(np.ones(6), size=40)
    dz, shift = rng.normal(size=(40, 6)) * 5, rng.normal(size=6)
    d = dz + shift
    expected = probs * (d - np.sum(probs * d, axis=1, keepdims=True))
    work, sums = dz.astype(dtype), np.zeros(6)
    hessian_vector_pass(work, shift.astype(dtype), probs.astype(dtype), sums)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(work, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
    np.testing.assert_allclose(sums, work.sum(axis=0, dtype=np.float64), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_objective_and_gradient_equal_the_numpy_ones(penalty, diagonal, scale):
    """Within 1e-8 relative (here 1e-12), also where the scores reach ±10⁴ and the probabilities saturate."""
    rng = np.random.default_rng(3)
    x, y = np.log(rng.dirichlet(np.ones(6), size=50)) * scale / 10, rng.integers(0, 6, 50)
    theta = pack(np.eye(6) + 0.3 * rng.normal(size=(6, 6)), rng.normal(size=6), diagonal)
    value, grad = objective(theta, x, y, penalty, diagonal)
    plain_value, plain_grad = _plain_objective(theta, x, y, penalty, diagonal)
    assert value == pytest.approx(plain_value, rel=1e-12)
    np.testing.assert_allclose(grad, plain_grad, rtol=1e-12, atol=1e-12 * np.abs(plain_grad).max())


@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("diagonal", [False, True])
def test_hessian_diagonal_from_the_residual_equals_the_exact_hessians(penalty, diagonal):
    rng = np.random.default_rng(4)
    x, y = np.log(rng.dirichlet(np.ones(6), size=50)), rng.integers(0, 6, 50)
    weights, intercept = np.eye(6) + 0.3 * rng.normal(size=(6, 6)), rng.normal(size=6)
    residual = objective_residual(pack(weights, intercept, diagonal), x, y, penalty, diagonal)[2]
    exact = np.diagonal(hessian(x, weights if not diagonal else np.diag(np.diagonal(weights)), intercept, penalty,
                                diagonal))
    np.testing.assert_allclose(hessian_diagonal(x, y, residual, penalty, diagonal), exact, rtol=1e-12, atol=1e-15)


def test_single_precision_probabilities_equal_scipy_softmax():
    """Truncated Newton's float32 σ(W x + b) (:func:`float32_probs`, from the float64 residual), full and
    diagonal maps."""
    rng = np.random.default_rng(5)
    x, y = np.log(rng.dirichlet(np.ones(6), size=50)), rng.integers(0, 6, 50)
    theta = pack(np.eye(6) + 0.3 * rng.normal(size=(6, 6)), rng.normal(size=6), False)
    for diagonal, t in [(False, theta), (True, theta[[0, 7, 14, 21, 28, 35, 36, 37, 38, 39, 40, 41]])]:
        expected = softmax(affine_logits(x, *unpack(t, 6, diagonal), diagonal), axis=1)
        probs = float32_probs(objective_residual(t, x, y, Penalty(), diagonal)[2], y)
        assert probs.dtype == np.float32
        np.testing.assert_allclose(probs, expected, rtol=1e-7, atol=1e-12)
    v = rng.normal(size=42)
    probs = softmax(affine_logits(x, *unpack(theta, 6, False), False), axis=1)
    exact = hessian(x, *unpack(theta, 6, False), l2_penalty(1.0, 6), False) @ v
    np.testing.assert_allclose(hessian_vector(x, probs, l2_penalty(1.0, 6), v), exact, rtol=1e-12, atol=1e-13)


def _twenty_class_task():
    rng = np.random.default_rng(7)
    q = rng.dirichlet(np.full(20, 0.3), size=1200)
    y = sample_categorical(softmax(1.7 * np.log(q), axis=1), rng)
    return 1.7 * np.log(q), y


# Obtained with the numpy objective before the compiled passes (commit ed3468f): best point, test NLL, CV losses;
# dir_l2's are those of its fits converged to tol = 1e-13 (at the default 1e-10 the weak L2 penalty's flat
# directions leave them free to ~1e-7: test NLL 2.0535680699 with that solver, 2.0535679101 with the balanced
# truncated Newton).
BEFORE = {
    "dir_odir": ({"reg_lambda": 100.0, "reg_mu": 10.0}, 1.5255868427875674,
                 [2.1859930161939243, 2.185831704158757, 1.589977997408651, 1.589635189993917, 1.5233782049031763,
                  1.5212659322277027]),
    "dir_l2": ({"reg_lambda": 0.1}, 2.053567902207, [2.175454558975, 2.116717170512, 2.899553952640]),
}
GRIDS = {"dir_odir": {"reg_lambda": [1e-2, 1e0, 1e2], "reg_mu": [1e-2, 1e1]},
         "dir_l2": {"reg_lambda": [1e-3, 1e-1, 1e1]}}


@pytest.mark.parametrize("name", ["dir_odir", "dir_l2"])
def test_grid_search_selects_the_same_point_with_the_same_loss_as_before(name):
    """20 classes: L-BFGS, and truncated Newton (``dir_l2``'s selected fits) with the path's shared
    preconditioner. The optimum is defined to the solver's tolerance (1e-10 relative in the objective),
    so the validation losses agree to ~1e-7, the selected point's to 1e-8 (the paper's penalties, as then)."""
    z, y = _twenty_class_task()
    est = make(name, grid=GRIDS[name], reg_scale="code", shrink_to="paper", cv={"folds": 3}).fit(z[:800], y[:800])
    best, test_nll, cv_losses = BEFORE[name]
    assert est.best_params_ == best
    probs = est.predict_proba(z[800:])
    assert -np.log(probs[np.arange(400), y[800:]]).mean() == pytest.approx(test_nll, rel=1e-8)
    np.testing.assert_allclose(est.cv_losses_, cv_losses, rtol=1e-6)
    assert est.cv_losses_[est.best_index_] == pytest.approx(cv_losses[est.best_index_], rel=1e-8)
