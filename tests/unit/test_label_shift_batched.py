"""The label-shift estimators on many redraws at once (docs/label_shift.md): the EM of Saerens, Latinne &
Decaestecker (2002, Eqs. 2.9–2.10) over each redraw's rows of non-zero weight, and RLLS's box-constrained problem
(Azizzadenesheli et al. 2019, Eq. 4) solved exactly for all redraws, each against the same computation run on one
redraw at a time."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import softmax

from calbench.kernels.vector_log import log_dot
from calbench.metrics import label_shift as ls
from calbench.metrics import rlls


def _probs(n, k, seed, scale=2.0):
    rng = np.random.default_rng(seed)
    return softmax(scale * rng.normal(size=(n, k)), axis=1)


def _em_alone(probs, source, weights, tol=ls.EM_TOL, max_iter=ls.EM_MAX_ITER):
    """EM with SQUAREM as :func:`calbench.metrics.label_shift.em_priors` defines it, on one redraw given as dense row
    weights: matrix-vector products over all its rows (the computation before the redraws were batched)."""
    scaled, total = probs / source, weights.sum()

    def step(pi):
        mix = scaled @ pi
        return pi * ((weights / mix) @ scaled) / total, weights @ np.log(np.maximum(mix, 1e-300)) / total

    def floored(pi):
        return np.maximum(pi / source, ls.WEIGHT_FLOOR)

    return _squarem(source.copy(), step, floored, np.linalg.norm, tol, max_iter)


def _squarem(pi, step, floored, norm, tol, max_iter):
    """SQUAREM (Varadhan & Roland 2008, S3) over the EM ``step`` (priors → (next priors, log-likelihood)) from ``pi``,
    as :func:`calbench.metrics.label_shift.em_priors` steps it: (priors, EM steps taken)."""
    steps = 0
    while steps < max_iter:
        first, loglik = step(pi)
        second, _ = step(first)
        r, v = first - pi, second - 2 * first + pi
        alpha = min(-norm(r) / max(norm(v), 1e-300), -1.0)
        jump = pi - 2 * alpha * r + alpha ** 2 * v
        plain = (jump <= 0).any()
        jump = second if plain else jump
        new, jumped = step(jump)
        if plain or jumped < loglik:
            new, jump = second, first
        steps += 3
        change = np.max(np.abs(floored(new) - floored(jump)) / floored(jump))
        pi = new
        if not change > tol:
            break
    return pi, steps


def test_batched_em_equals_em_on_each_redraw_alone():
    # Saerens et al. (2002) Eqs. 2.9-2.10 with SQUAREM (Varadhan & Roland 2008, S3): the redraws' EMs run together
    # over their non-zero rows, each stopped by its own criterion, as each run alone over all rows
    probs = _probs(400, 5, 0)
    source = probs.mean(axis=0)
    rng = np.random.default_rng(1)
    weights = rng.poisson(np.where(rng.random((40, 400)) < 0.3, 1.5, 0.0)).astype(float)
    weights[:, :5] += 1  # no redraw without rows
    priors, steps = ls.em_priors(probs, source, weights=weights)
    alone = [_em_alone(probs, source, w) for w in weights]
    np.testing.assert_allclose(priors, [pi for pi, _ in alone], rtol=0, atol=1e-12)
    assert steps == max(s for _, s in alone)
    single, single_steps = ls.em_priors(probs, source)
    pi, pi_steps = _em_alone(probs, source, np.ones(400))
    np.testing.assert_allclose(single, pi, rtol=0, atol=1e-12)
    assert single_steps == pi_steps


def test_log_dot_is_the_weighted_sum_of_libm_logs():
    rng = np.random.default_rng(2)
    t = np.concatenate([10.0 ** rng.uniform(-300, 300, 5000), rng.uniform(0.5, 2.0, 5000), [1.0, np.sqrt(2.0)]])
    w = rng.integers(0, 5, t.size).astype(float) * 0.75
    terms = w * np.log(t)
    assert abs(log_dot(t.copy(), w, np.empty_like(t)) - math.fsum(terms)) <= 1e-15 * np.abs(terms).sum() + \
        2 * np.spacing(np.abs(terms)).sum()


def _objective(confusion, b, strength, theta):
    return np.linalg.norm(confusion @ theta - b) + strength * np.linalg.norm(theta)


def _lbfgsb_alone(confusion, b, strength):
    """RLLS's problem on one redraw by L-BFGS-B at tight tolerances (the per-redraw computation before)."""
    if np.linalg.norm(confusion.T @ b) <= strength * np.linalg.norm(b):
        return np.zeros(b.size)

    def objective(theta):
        residual = confusion @ theta - b
        r_norm, t_norm = np.linalg.norm(residual), np.linalg.norm(theta)
        return r_norm + strength * t_norm, (confusion.T @ residual / max(r_norm, 1e-300)
                                            + strength * theta / max(t_norm, 1e-300))

    start = 0.5 * np.maximum(np.linalg.lstsq(confusion, b, rcond=None)[0], -1.0)
    return minimize(objective, start, jac=True, method="L-BFGS-B", bounds=[(-1.0, None)] * b.size,
                    options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-12}).x


def _rlls_problems(k=6, seed=3):
    """A soft confusion matrix of calibrated outputs and prediction changes b of tweak-one and Dirichlet redraws:
    at 0 (tiny changes), an exact fit inside the box, and at the bound θ = −1 (a class the target lacks)."""
    probs = _probs(3000, k, seed)
    labels = np.array([np.random.default_rng(seed + i).choice(k, p=p) for i, p in enumerate(probs)])
    inputs = ls.LabelShiftInputs.from_calibration(probs, labels, None)
    rng = np.random.default_rng(seed)
    target = np.vstack([rng.dirichlet(np.ones(k), 20), rng.dirichlet(np.full(k, 0.3), 20)])
    target = np.vstack([target, np.full((5, k), 1 / k) + 1e-5 * rng.normal(size=(5, k))])
    changes = target @ inputs.soft_confusion.T - inputs.source_priors  # μ̂ of a set with priors `target`
    changes[:10] += 0.01 * rng.normal(size=(10, k))  # off the range of exact fits with w ≥ 0
    return inputs.soft_confusion, changes, rlls.regulariser(k, inputs.cal_rows)


def test_rlls_solve_is_the_optimum_l_bfgs_b_approaches_on_each_redraw():
    # Azizzadenesheli et al. (2019) Eq. 4, θ ≥ −1: all redraws at once, each at least as low in the objective as
    # L-BFGS-B run on it alone, and within its stopping tolerance of its point; at the paper's regulariser and at a
    # 200 times stronger one (where ‖Cᵀ b‖ ≤ Δ ‖b‖: θ = 0)
    confusion, changes, strength = _rlls_problems()
    kinds = {"zero": 0, "bound": 0, "exact": 0}
    for scale in (1.0, 200.0):
        found = rlls.solve(confusion, changes, scale * strength)
        alone = np.array([_lbfgsb_alone(confusion, b, scale * strength) for b in changes])
        kinds["zero"] += int((found == 0).all(axis=1).sum())
        kinds["bound"] += int((found == -1).any(axis=1).sum())
        kinds["exact"] += int((np.linalg.norm(found @ confusion.T - changes, axis=1) < 1e-14).sum())
        for theta, reference, b in zip(found, alone, changes):
            assert (_objective(confusion, b, scale * strength, theta)
                    <= _objective(confusion, b, scale * strength, reference) + 1e-15)
        np.testing.assert_allclose(found, alone, rtol=0, atol=1e-6)
        assert (found >= -1).all()
    assert min(kinds.values()) >= 3, kinds


def test_rlls_newton_hands_unconverged_problems_to_l_bfgs_b(monkeypatch):
    # a problem Newton has not solved after max_iter steps, or whose Newton step is undefined (singular Hessian),
    # is finished by L-BFGS-B (at tight tolerances) from where Newton left it
    confusion, changes, strength = _rlls_problems(seed=4)
    bound = changes[(rlls.solve(confusion, changes, strength) == -1).any(axis=1)]
    assert len(bound) >= 3
    newton = rlls.solve(confusion, bound, strength)
    np.testing.assert_allclose(rlls.solve(confusion, bound, strength, max_iter=1), newton, rtol=0, atol=1e-6)
    undefined = lambda confusion, gram, strength, theta, changes: (np.full_like(theta, np.nan), theta)  # noqa: E731
    monkeypatch.setattr(rlls, "_newton_direction", undefined)
    np.testing.assert_allclose(rlls.solve(confusion, bound, strength), newton, rtol=0, atol=1e-6)


@pytest.mark.parametrize("estimator", ["rlls", "rlls_hard"])
def test_rlls_weights_of_redraws_equal_their_weights_alone(estimator):
    probs = _probs(2000, 4, 5)
    labels = np.argmax(probs + 0.3 * np.random.default_rng(5).random(probs.shape), axis=1)
    inputs = ls.LabelShiftInputs.from_calibration(probs[:1000], labels[:1000], None)
    weights = np.random.default_rng(6).poisson(np.where(labels[1000:] == 0, 3.0, 0.3), (30, 1000)).astype(float)
    together = ls.class_weights(probs[1000:], inputs, estimator, weights)[0]
    for w, row in zip(weights, together):
        picked = np.repeat(np.arange(1000), w.astype(int))
        np.testing.assert_allclose(row, ls.class_weights(probs[1000:][picked], inputs, estimator)[0], atol=1e-12)


def _em_in_kernel_order(probs, source, weights, tol=ls.EM_TOL, max_iter=ls.EM_MAX_ITER):
    """EM with SQUAREM on one redraw over its rows of non-zero weight in numpy, each sum in the kernel's order: mᵢ
    over the classes in turn, the step's sums over the rows in turn (a cumulative sum), the likelihood by
    :func:`log_dot`, the norms as numpy's row norms (pairwise sums; a vector's norm is a BLAS dot product)."""
    safe = np.where(source > 0, source, 1.0)
    rows = np.flatnonzero(weights)
    scaled, w, total = (probs / safe)[rows], weights[rows], weights.sum()

    def step(pi):
        mix = np.zeros(rows.size)
        for j in range(pi.size):
            mix = mix + scaled[:, j] * pi[j]
        sums = np.cumsum((w / mix)[:, None] * scaled, axis=0)[-1]
        mix = np.maximum(mix, 1e-300)
        return pi * sums / total, log_dot(mix, w, np.empty_like(mix)) / total

    def floored(pi):
        return np.maximum(pi / safe, ls.WEIGHT_FLOOR)

    def norm(x):
        return np.linalg.norm(x[None, :], axis=1)[0]

    return _squarem(source.copy(), step, floored, norm, tol, max_iter)


@pytest.mark.parametrize("k", [5, 150])
def test_em_kernel_is_the_numpy_computation_to_the_bit(k):
    # Saerens et al. (2002) Eqs. 2.9-2.10 with SQUAREM (Varadhan & Roland 2008, S3), run per redraw over its gathered
    # rows in one compiled loop (calbench.kernels.label_shift.em_redraws): the same iterates as numpy computes them
    # in the same order, to the bit; 150 classes sum the norms in numpy's split pairwise order; exact zeros in the
    # probabilities and a redraw on one row
    probs = _probs(300, k, 7, scale=3.0)
    probs[:40, 1] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    source = probs.mean(axis=0)
    rng = np.random.default_rng(8)
    weights = rng.poisson(np.where(rng.random((25, 300)) < 0.3, 1.5, 0.0)).astype(float) * 0.75
    weights[:, :3] += 1
    weights[4] = 0.0
    weights[4, 17] = 2.0
    priors, steps = ls.em_priors(probs, source, weights=weights)
    alone = [_em_in_kernel_order(probs, source, w) for w in weights]
    np.testing.assert_array_equal(priors, [pi for pi, _ in alone])
    assert steps == max(s for _, s in alone) and len({s for _, s in alone}) > 1
    with pytest.warns(RuntimeWarning, match="after 6 iterations"):
        found, six = ls.em_priors(probs, source, max_iter=6, weights=weights)
    np.testing.assert_array_equal(found, [_em_in_kernel_order(probs, source, w, max_iter=6)[0] for w in weights])
    assert six == 6


def test_pairwise_sum_is_numpys_add_reduce():
    from calbench.kernels.label_shift import _pairwise_sum

    rng = np.random.default_rng(9)
    for n in [*range(0, 140), 255, 256, 257, 1000, 1031, 4099]:
        x = rng.random(n) * 10.0 ** rng.integers(-8, 8, n)
        assert _pairwise_sum(x) == np.add.reduce(x), n


def test_redraws_take_the_rows_the_per_redraw_draw_takes():
    # each redraw of a set lists its resample's copies of every class's rows (by class, each row as often as the
    # resample drew it; a class the resample missed: its rows once each) and takes the copy at ⌊u · copies⌋ per slot
    from calbench.data.label_shift import redraw_weights

    rng = np.random.default_rng(10)
    labels = rng.integers(0, 4, 60)
    labels[labels == 3] = 2
    labels[:2] = 3  # class 3: two rows, often missed by a resample
    counts = rng.multinomial(60, np.full(60, 1 / 60), size=200)
    sizes = np.array([20, 10, 5, 5])
    weights = redraw_weights("prior/dirichlet1/0", labels, sizes, 3, counts)
    uniforms = np.random.default_rng([3, zlib.crc32(b"prior/dirichlet1/0"), 4242]).random((200, sizes.sum()))
    classes = np.repeat(np.arange(4), sizes)
    for r in range(200):
        copies = []
        for c in range(4):
            rows = np.flatnonzero(labels == c)
            drawn = np.repeat(rows, counts[r, rows])
            copies.append(drawn if drawn.size else rows)
        taken = [copies[c][int(np.floor(u * copies[c].size))] for c, u in zip(classes, uniforms[r])]
        np.testing.assert_array_equal(weights[r], np.bincount(taken, minlength=60) * 60 / sizes.sum())
    assert (counts[:, :2].sum(axis=1) == 0).any()  # the uniform case was drawn


def test_adapted_pairs_are_the_reweighted_rows_argmax_and_label_probability():
    # Saerens et al. (2002) Eq. 2.4 on every (redraw, row) pair: p ⊙ w renormalised, its first argmax as np.argmax
    # takes it (ties from equal columns and from quotients that round together) and its label's entry, exactly
    from calbench.kernels.label_shift import adapted_pairs, reweighted_rows, sparse_rows

    probs = _probs(400, 6, 11)
    probs[:, 4] = probs[:, 1]  # exact ties
    probs[:50, 2] = probs[:50, 0] * (1 + 2.0 ** -52)  # products that differ by an ulp and may divide to one value
    probs[50:60] = np.eye(6)[1]
    probs /= probs.sum(axis=1, keepdims=True)
    labels = np.random.default_rng(12).integers(0, 6, 400)
    ratios = np.exp(np.random.default_rng(13).normal(size=(30, 6)))
    ratios[:, 4] = ratios[:, 1]
    ratios[:, 2] = ratios[:, 0]
    ratios[3, 1] = 0.0  # zeroes rows 50-59: they keep p
    weights = np.random.default_rng(14).poisson(0.5, (30, 400)).astype(float)
    indptr, cols, _ = sparse_rows(weights)
    sets = np.repeat(np.arange(30), np.diff(indptr))
    hits, label_probs = np.empty(cols.size), np.empty(cols.size)
    adapted_pairs(probs, labels, ratios, indptr, cols, hits, label_probs)
    adapted = np.empty((cols.size, 6))
    reweighted_rows(probs, ratios, sets, cols, adapted)
    np.testing.assert_array_equal(adapted[sets == 3][np.isin(cols[sets == 3], range(50, 60))],
                                  probs[cols[(sets == 3) & np.isin(cols, range(50, 60))]])
    np.testing.assert_array_equal(hits, np.argmax(adapted, axis=1) == labels[cols])
    np.testing.assert_array_equal(label_probs, adapted[np.arange(cols.size), labels[cols]])
    np.testing.assert_array_equal(adapted, ls.reweight(probs[cols], ratios[sets]))


def test_rlls_condition_test_is_numpys_with_the_svd_only_where_cholesky_leaves_it_open():
    # the Newton Hessians' test cond(H) < 1e14 (Azizzadenesheli et al. 2019 Eq. 4 solved by projected Newton): a
    # factorisation of the symmetric part shows most of them; the answer is np.linalg.cond's on every matrix
    from calbench.kernels.label_shift import positive_definite

    rng = np.random.default_rng(15)
    k, matrices = 6, []
    for exponent in np.linspace(0, 20, 41):  # symmetric positive semi-definite, condition 1 to 1e20 and singular
        q = np.linalg.qr(rng.normal(size=(k, k)))[0]
        spectrum = np.logspace(0, -exponent, k) * rng.uniform(0.1, 10)
        matrices.append(q @ np.diag(spectrum) @ q.T)
    matrices += [m + 1e-9 * rng.normal(size=(k, k)) for m in matrices[:10]]  # not symmetric
    matrices += [-matrices[0], np.zeros((k, k)), np.diag([1.0, 1, 1, 1, 1, 0])]
    matrices = np.array(matrices)
    found = rlls._conditioned(matrices, 1e14)
    np.testing.assert_array_equal(found, np.linalg.cond(matrices) < 1e14)
    assert found.sum() >= 20 and (~found).sum() >= 10
    symmetric = (matrices + matrices.transpose(0, 2, 1)) / 2
    factorises = np.empty(len(matrices), dtype=bool)
    positive_definite(symmetric, factorises)
    eigenvalues = np.linalg.eigvalsh(symmetric)
    clear = np.abs(eigenvalues[:, 0]) > 1e-8 * np.abs(eigenvalues).max(axis=1)  # not singular to rounding
    np.testing.assert_array_equal(factorises[clear], eigenvalues[clear, 0] > 0)
    assert clear.sum() >= 20 and (~factorises[clear]).any()


def test_redraw_and_class_sums_are_bincounts_over_the_redraws_entries():
    # the adapted per-row metrics' weighted sums and the floor share's weight per class, each redraw's entries summed
    # in their order (np.bincount's), to the bit
    from calbench.kernels.label_shift import class_sums, redraw_sums, sparse_rows

    rng = np.random.default_rng(16)
    weights = rng.poisson(0.4, (20, 300)) * 0.37
    labels, terms = rng.integers(0, 4, 300), rng.normal(size=300)
    indptr, cols, vals = sparse_rows(weights)
    sets = np.repeat(np.arange(20), np.diff(indptr))
    np.testing.assert_array_equal(cols, np.nonzero(weights)[1])
    sums, per_class = np.empty(20), np.empty((20, 4))
    redraw_sums(indptr, vals, terms[cols], sums)
    class_sums(indptr, cols, vals, labels, per_class)
    np.testing.assert_array_equal(sums, np.bincount(sets, vals * terms[cols], minlength=20))
    np.testing.assert_array_equal(per_class.ravel(), np.bincount(sets * 4 + labels[cols], vals, minlength=80))
