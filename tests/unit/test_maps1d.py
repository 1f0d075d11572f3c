"""Binary calibration maps (Platt, beta, isotonic, PL, PL3) and the calibrators built from them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit, logit

from calbench.convergence import NotConvergedWarning
from calbench.data.synthetic import planted_temperature
from calbench.maps1d import Beta, Isotonic, PiecewiseLinear, PiecewiseLinearCV, Platt, make_map
from calbench.methods import make
from calbench.metrics import evaluate
from calbench.scores import PROB_EPS


def draw(n, true_map, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, size=n)
    return p, (rng.uniform(size=n) < true_map(p)).astype(float)


def test_platt_recovers_a_logistic_map():
    p, y = draw(20_000, lambda p: expit(0.6 * logit(p) + 0.3))
    fitted = Platt().fit(p, y)
    assert fitted.a_ == pytest.approx(0.6, abs=0.05) and fitted.b_ == pytest.approx(0.3, abs=0.05)


def test_beta_recovers_its_map_and_keeps_slopes_non_negative():
    a, b, c = 0.8, 1.6, -0.2
    p, y = draw(30_000, lambda p: expit(a * np.log(p) - b * np.log1p(-p) + c))
    fitted = Beta().fit(p, y)
    assert (fitted.a_, fitted.b_, fitted.c_) == pytest.approx((a, b, c), abs=0.12)
    decreasing = Beta().fit(*draw(5000, lambda p: 1 - p))  # a decreasing truth: slopes clipped at 0
    assert decreasing.a_ >= 0 and decreasing.b_ >= 0
    grid = np.linspace(0.01, 0.99, 50)
    assert np.all(np.diff(decreasing.predict(grid)) >= -1e-12)


def test_isotonic_is_monotone_and_in_unit_interval():
    p, y = draw(3000, lambda p: p**2)
    out = Isotonic().fit(p, y).predict(np.linspace(-0.0, 1.0, 200))
    assert np.all(np.diff(out) >= 0) and out.min() >= 0 and out.max() <= 1


def test_pl_starts_at_identity_and_recovers_a_piecewise_linear_map():
    p, y = draw(20_000, lambda p: np.where(p < 0.5, 0.5 * p, 1.5 * p - 0.5))
    model = PiecewiseLinear(3, logit_space=False)
    theta0 = model._init_theta(p)
    model.theta_ = theta0
    grid = np.linspace(0.05, 0.95, 19)
    assert model.predict(grid) == pytest.approx(grid, abs=0.01)
    model.fit(p, y)
    truth = np.where(grid < 0.5, 0.5 * grid, 1.5 * grid - 0.5)
    assert np.abs(model.predict(grid) - truth).max() < 0.04
    knots, values = model.knots()
    assert knots[0] == 0 and knots[-1] == 1 and np.all(np.diff(knots) > 0)


def test_pl3_with_one_piece_is_platt_scaling():
    p, y = draw(8000, lambda p: expit(0.7 * logit(p) - 0.2))
    grid = np.linspace(0.02, 0.98, 25)
    pl3 = PiecewiseLinear(1, logit_space=True).fit(p, y).predict(grid)
    assert pl3 == pytest.approx(Platt().fit(p, y).predict(grid), abs=0.01)


def test_pl_losses_and_optimisers_agree():
    p, y = draw(3000, lambda p: p**1.5, seed=3)
    grid = np.linspace(0.05, 0.95, 10)
    lbfgs = PiecewiseLinear(2, logit_space=True, loss="ce").fit(p, y).predict(grid)
    mse = PiecewiseLinear(2, logit_space=True, loss="mse").fit(p, y).predict(grid)
    adam = PiecewiseLinear(2, logit_space=True, loss="ce", optimizer="adam").fit(p[:1500], y[:1500]).predict(grid)
    assert np.abs(lbfgs - mse).max() < 0.05 and np.abs(lbfgs - adam).max() < 0.05


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("logit_space", [False, True])
def test_pl_batched_loss_and_gradient_match_the_plain_definition(logit_space, loss):
    """The batched loss of several models (pieces as runs of the sorted data, scratch rows reused) is the sum of
    each model's mean loss on its own predictions (fit-on-test App. C.1: CE on predictions clipped to
    [1e-16, 1 − 1e-16], or squared error); its gradient equals central differences."""
    rng = np.random.default_rng(5)
    model = PiecewiseLinear(4, logit_space=logit_space, loss=loss)
    ps = [rng.beta(1, 4, 300), rng.beta(2, 2, 200), rng.beta(3, 1, 250)]
    ys = [(rng.uniform(size=p.size) < p**1.3).astype(float) for p in ps]
    folds = model.sorted_folds(ps, ys)
    theta = np.array([model._init_theta(model._input(p)) for p in ps]) + rng.normal(0, 0.3, (3, 9))
    value, grad = model._loss_grad(theta, folds)
    plain = 0.0
    for row, p, y in zip(theta, ps, ys):
        model.theta_ = row
        q = model.predict(p)
        if loss == "ce":
            q = np.clip(q, PROB_EPS, 1 - PROB_EPS)
            plain += np.mean(-(y * np.log(q) + (1 - y) * np.log1p(-q)))
        else:
            plain += np.mean((q - y) ** 2)
    assert value == pytest.approx(plain, rel=1e-12)
    assert model._loss_grad(theta, folds)[0] == value  # nothing carried over in the scratch rows
    numeric = np.zeros_like(theta)
    for i in np.ndindex(theta.shape):
        step = np.zeros_like(theta)
        step[i] = 1e-6
        numeric[i] = (model._loss_grad(theta + step, folds)[0] - model._loss_grad(theta - step, folds)[0]) / 2e-6
    assert np.abs(grad - numeric).max() < 1e-6 * np.abs(grad).max()


def _plain_loss_and_grad(model, theta, ps, ys):
    """The definition, written out in torch (autograd): widths softmax(a), knots [0, cumsum, 1] (PL3: their
    logits), values σ(v) (PL) or v (PL3), linear interpolation, σ on PL3's output, mean CE on predictions clipped
    to [ε, 1 − ε] (fit-on-test App. C.1) or mean squared error; summed over the models."""
    torch = pytest.importorskip("torch")
    theta = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    B = model.n_pieces
    total = 0
    for row, p, y in zip(theta, ps, ys):
        w = torch.softmax(row[:B], 0)
        zero, one = torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
        b = torch.cat([zero, torch.cumsum(w, 0)[:-1], one])
        x = torch.tensor(model._input(p))
        t = torch.logit(b.clamp(PROB_EPS, 1 - PROB_EPS)) if model.logit_space else b
        u = row[B:] if model.logit_space else torch.sigmoid(row[B:])
        k = torch.searchsorted(t[1:-1].detach(), x, right=False)
        r = ((x - t[k]) / (t[k + 1] - t[k]).clamp_min(1e-12)).clamp(0, 1)
        q = u[k] + (u[k + 1] - u[k]) * r
        q = torch.sigmoid(q) if model.logit_space else q
        y = torch.tensor(y)
        if model.loss == "ce":
            qc = q.clamp(PROB_EPS, 1 - PROB_EPS)
            total = total - torch.mean(y * torch.log(qc) + (1 - y) * torch.log1p(-qc))
        else:
            total = total + torch.mean((q - y) ** 2)
    total.backward()
    return total.item(), theta.grad.numpy()


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("logit_space", [False, True])
def test_pl_compiled_loss_and_gradient_equal_the_definition(logit_space, loss):
    """The compiled pass (pieces as runs of the sorted data; −ln(1 − q̂) by its series below 1e-4, the logistic
    by a polynomial exp) equals the definition and its autograd gradient (1e-10), also with one-vs-rest-like
    inputs (most p̂ tiny, some clipped at ε) and in the softmax's saturation."""
    rng = np.random.default_rng(7)
    model = PiecewiseLinear(5, logit_space=logit_space, loss=loss)
    ps = [rng.beta(1, 4, 300), np.clip(rng.beta(0.05, 3, 400), 1e-15, 1), rng.beta(3, 1, 250)]
    ys = [(rng.uniform(size=p.size) < p**1.3).astype(float) for p in ps]
    ys[1][np.argsort(ps[1])[:3]] = 1.0  # positives among the smallest p̂: −ln q̂ at the clip
    theta = np.array([model._init_theta(model._input(p)) for p in ps]) + rng.normal(0, 0.3, (3, 11))
    theta[2, :5] += [8.0, -30.0, 0.0, 0.0, 0.0]  # a width of e^-30 relative: knots on top of each other
    value, grad = model._loss_grad(theta, model.sorted_folds(ps, ys))
    plain, plain_grad = _plain_loss_and_grad(model, theta, ps, ys)
    assert value == pytest.approx(plain, rel=1e-12, abs=1e-12)
    assert np.abs(grad - plain_grad).max() < 1e-10


def test_pl3_compiled_logistic_equals_expit():
    """The loss pass's σ (exp(−f) by the vectorised exp, written by the interpolation; σ completed in the sums'
    pass, q̂ left in the scratch row) equals expit of the map's f, on f from −800 to 800."""
    from calbench.kernels.piecewise import loss_grad, scratch

    x = np.sort(np.concatenate([np.linspace(-27.6, 27.6, 4001), np.random.default_rng(1).normal(0, 3, 1000)]))
    y = (np.arange(x.size) % 3 == 0).astype(float)
    row = np.array([0.0, -800.0, 800.0])  # one piece from t_0 = logit ε to t_1 = logit(1 − ε)
    work = scratch(x.size, 1)
    loss_grad(row, x, y, np.flatnonzero(y), True, True, np.empty(3), work)
    t, _, _, u = PiecewiseLinear(1, logit_space=True)._knots(row)
    f = u[0] + (u[1] - u[0]) * np.clip((x - t[0]) * (1.0 / (t[1] - t[0])), 0.0, 1.0)
    assert np.allclose(work[0][0], expit(f), rtol=5e-16, atol=1e-307)  # below −708: 3e-308, not 0


@pytest.mark.parametrize("logit_space", [False, True])
def test_pl_compiled_lbfgs_reaches_the_optimum_and_fits_each_data_set_alone(logit_space):
    """On a smooth case with one optimum (one piece: PL3 is logistic regression on logit p̂, PL a line between
    σ(v_0) and σ(v_1)) the compiled L-BFGS run to tight tolerances gives the outputs of scipy's L-BFGS-B on the
    same loss (to 1e-7: with the loss's rounding, ~2e-16, either optimiser may stop a few 1e-8 from the optimum);
    fitting several data sets at once gives each one's own fit, bitwise."""
    from scipy.optimize import minimize

    from calbench.kernels.piecewise import CONVERGED, lbfgs_rows

    rng = np.random.default_rng(3)
    ps = [rng.beta(1, 3, 400), rng.beta(2, 2, 300)]
    ys = [(rng.uniform(size=p.size) < p**1.4).astype(float) for p in ps]
    model = PiecewiseLinear(1, logit_space=logit_space)
    folds = model.sorted_folds(ps, ys)
    start = np.array([model._init_theta(model._input(p)) for p in ps])
    theta = start.copy()
    states, _ = lbfgs_rows(theta, folds.x, folds.y, folds.start, logit_space, True, 10_000, 0.0, 1e-12)
    assert list(states) == [CONVERGED] * 2
    grid = np.linspace(0.02, 0.98, 30)
    for f, row in enumerate(start):
        one = folds.take([f])
        result = minimize(lambda v: (lambda lg: (lg[0], lg[1][0]))(model._loss_grad(v[None], one)), row, jac=True,
                          method="L-BFGS-B", options={"maxiter": 10_000, "ftol": 0.0, "gtol": 1e-12})
        model.theta_ = result.x
        reference = model.predict(grid)
        model.theta_ = theta[f]
        assert np.abs(model.predict(grid) - reference).max() < 1e-7
        alone = row.copy()[None]
        lbfgs_rows(alone, one.x, one.y, one.start, logit_space, True, 10_000, 0.0, 1e-12)
        assert np.array_equal(alone[0], theta[f])


def test_pl_fit_stopped_by_max_iter_warns():
    p, y = draw(2000, lambda p: p**1.5, seed=6)
    with pytest.warns(NotConvergedWarning, match="max_iter=2"):
        PiecewiseLinear(4, logit_space=True, max_iter=2).fit(p, y)


def test_pl_cv_prefers_few_pieces_on_calibrated_data_and_averages_fold_models():
    p, y = draw(1200, lambda p: p, seed=4)
    cv = PiecewiseLinearCV(logit_space=True, n_folds=5, max_pieces=3).fit(p, y)
    assert cv.n_pieces_ <= 2 and len(cv.models_) == 5
    grid = np.linspace(0.1, 0.9, 9)
    assert cv.predict(grid) == pytest.approx(np.mean([m.predict(grid) for m in cv.models_], axis=0))
    refit = PiecewiseLinearCV(logit_space=True, n_folds=5, max_pieces=2, ensemble=False).fit(p, y)
    assert len(refit.models_) == 1
    assert list(PiecewiseLinearCV().candidates(1000)) == [1, 2, 3, 4, 5, 6]  # the paper's range at n = 1000
    assert PiecewiseLinearCV().candidates(3000)[-1] == 16


def test_pl_cv_starts_scores_and_predictions_equal_their_definitions():
    """The CV's shortcuts: every B's equal-mass start from one np.quantile call per fold equals the start from
    np.quantile of that B's levels alone (paper App. C.1: knots at the quantiles, identity map); the compiled
    held-out Brier scores and predictions equal the definition (interpolate at the knots, PL3: then σ)."""
    from calbench.kernels.piecewise import mean_squared_errors

    rng = np.random.default_rng(11)
    ps = [rng.beta(0.3, 4, size) for size in (450, 451, 449)]
    ys = [(rng.uniform(size=p.size) < p).astype(float) for p in ps]
    for logit_space in (False, True):
        folds = PiecewiseLinear(1, logit_space).sorted_folds(ps, ys)
        models = [PiecewiseLinear(b, logit_space) for b in (1, 2, 5, 16)]
        quantiles = folds.quantiles(np.concatenate([m.levels() for m in models]))
        at = 0
        for model in models:
            b = model.n_pieces
            for f, (lo, hi) in enumerate(zip(folds.start[:-1], folds.start[1:])):
                q = np.quantile(folds.x[lo:hi], np.linspace(0, 1, b + 1))
                values, q = (q, expit(q)) if logit_space else (logit(np.clip(q, 0.001, 0.999)), q)
                widths = np.diff(np.concatenate([[0.0], q[1:]]))
                start = np.concatenate([np.log(np.maximum(widths, 1e-12)), values])
                np.testing.assert_array_equal(model._starts(quantiles[f:f + 1, at:at + b + 1])[0], start)
            at += b + 1
            theta = np.array([model._init_theta(folds.x[lo:hi]) + rng.normal(0, 0.5, 2 * b + 1)
                              for lo, hi in zip(folds.start[:-1], folds.start[1:])])
            brier = []
            for row, p, y in zip(theta, ps, ys):
                model.theta_ = row
                t, _, _, u = model._knots(row)
                x = model._input(p)
                k = np.searchsorted(t[1:-1], x, side="left")
                f = u[k] + (u[k + 1] - u[k]) * np.clip((x - t[k]) / np.maximum(np.diff(t), 1e-12)[k], 0.0, 1.0)
                plain = expit(f) if logit_space else f
                np.testing.assert_allclose(model.predict(p), plain, rtol=1e-15, atol=0)
                brier.append(np.mean((plain - y) ** 2))
            scores = mean_squared_errors(theta, folds.x, folds.y, folds.start, logit_space)
            np.testing.assert_allclose(scores, brier, rtol=1e-14)


def test_vector_log_sum_equals_the_sum_of_libm_logs():
    from calbench.kernels.vector_log import log_sum

    rng = np.random.default_rng(2)
    t = np.concatenate([10.0 ** rng.uniform(-300, 300, 20_000), rng.uniform(0.5, 2.0, 20_000), 1.0 - 10.0 **
                        rng.uniform(-16, -1, 5000), [1.0, 2.0, np.sqrt(2.0), np.nextafter(np.sqrt(2.0), 0), 1e-12]])
    logs = np.log(t)
    each = np.array([log_sum(np.array([v]), np.empty(1)) for v in t])
    assert np.all(np.abs(each - logs) <= 2 * np.spacing(np.abs(logs)))  # within 2 ulps
    assert abs(log_sum(t.copy(), np.empty_like(t)) - math.fsum(logs)) <= 1e-15 * np.abs(logs).sum()  # + rounding


@pytest.mark.parametrize("logit_space", [False, True])
def test_pl_compiled_ce_on_falling_and_flat_pieces_equals_the_definition(logit_space):
    """CE's logarithms are taken on a run at one end of each piece (where q̂ ≥ 1e-4, found from the piece's
    line): at the top of a rising piece, the bottom of a falling one, all or none of a flat one."""
    rng = np.random.default_rng(8)
    model = PiecewiseLinear(4, logit_space=logit_space)
    p = np.clip(rng.beta(0.2, 3, 2000), 1e-15, 1)
    y = (rng.uniform(size=p.size) < 0.1).astype(float)
    falling, flat_low, flat_high = (-3.0, -6.0, -12.0, -3.0, -1.0), (-9.5,) * 5, (-2.0,) * 5
    rows = [np.concatenate([np.zeros(4), values]) for values in (falling, flat_low, flat_high)]
    if not logit_space:
        rows = [np.concatenate([row[:4], row[4:] + 1.0]) for row in rows]  # PL: values σ(v) around 1e-4 too
    theta = np.array(rows)
    value, _ = model._loss_grad(theta, model.sorted_folds([p] * 3, [y] * 3))
    plain = 0.0
    for row in theta:
        model.theta_ = row
        q = np.clip(model.predict(p), PROB_EPS, 1 - PROB_EPS)
        plain += np.mean(-(y * np.log(q) + (1 - y) * np.log1p(-q)))
    assert value == pytest.approx(plain, rel=1e-13)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="probabilities must lie in"):
        Platt().fit(np.array([0.2, 1.3]), np.array([0, 1]))
    with pytest.raises(ValueError, match="allowed"):
        make_map("spline")


@pytest.mark.parametrize("name", ["platt", "beta"])
def test_one_vs_rest_calibrators_fix_an_overconfident_model(name):
    cal = planted_temperature(3000, np.random.default_rng(0), num_classes=4, temperature=2.5)
    test = planted_temperature(3000, np.random.default_rng(1), num_classes=4, temperature=2.5)
    probs = make(name).fit(cal["logits"], cal["labels"]).predict_proba(test["logits"])
    assert probs.sum(axis=1) == pytest.approx(np.ones(3000))
    before = evaluate(make("uncal").fit(cal["logits"], cal["labels"]).predict_proba(test["logits"]), test["labels"],
                      ["nll", "ece.cw.em15.l1"])
    after = evaluate(probs, test["labels"], ["nll", "ece.cw.em15.l1"])
    assert after["nll"] < before["nll"] - 0.1 and after["ece.cw.em15.l1"] < 0.5 * before["ece.cw.em15.l1"]


@pytest.mark.parametrize("name", ["pl3_conf", "pl_ovr"])
def test_piecewise_calibrators_output_distributions(name):
    cal = planted_temperature(600, np.random.default_rng(0), num_classes=3, temperature=2.0)
    model = make(name, loss="mse", n_folds=3, max_pieces=2).fit(cal["logits"], cal["labels"])
    probs = model.predict_proba(cal["logits"])
    assert probs.min() >= 0 and probs.sum(axis=1) == pytest.approx(np.ones(600))
    assert model.fitted_summary()


@pytest.mark.parametrize("decimals", [1, 3, 8])  # many ties in p, some, none
def test_isotonic_on_target_runs_equals_plain_pav_on_every_point(decimals):
    """The run-compressed fit (IRM's n·L pairs in < 1 GB) has the knots and outputs of PAV on all points."""
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(decimals)
    p = np.round(rng.beta(0.5, 2.0, 3000), decimals)
    y = (rng.random(3000) < p).astype(float)
    plain = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(p, y)
    fitted = Isotonic().fit(p, y)
    np.testing.assert_array_equal(fitted.knots_x_, plain.X_thresholds_)
    np.testing.assert_allclose(fitted.knots_y_, plain.y_thresholds_, atol=1e-12)
    query = np.concatenate([rng.random(1000), p])
    np.testing.assert_allclose(fitted.predict(query), plain.predict(query), atol=1e-12)
    checked = Isotonic().fit_checked(p, y.astype(bool))
    np.testing.assert_allclose(checked.predict(query), plain.predict(query), atol=1e-12)
