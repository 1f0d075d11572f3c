"""The calibrator interface, the registry, chains, grid search, uncal and temperature scaling."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from calbench import Scores
from calbench.data.synthetic import planted_temperature
from calbench.methods import Chain, GridSearch, available, code_files, make
from calbench.methods.tuning import expand_grid, fold_loss
from conftest import shared_data


def exactly_calibrated_rows(temperature, classes=10, rows=300, copies=20, seed=0):
    """Logits T·s whose labels follow σ(s) *exactly*: each row is repeated `copies` times with labels
    allocated in proportion to integer counts, so the log-loss minimiser is β = 1/T with no sampling error."""
    rng = np.random.default_rng(seed)
    counts = 1 + rng.multinomial(copies - classes, rng.dirichlet(np.ones(classes) * 0.3), size=rows)
    s = np.log(counts / copies)
    logits = np.repeat(temperature * s, copies, axis=0)
    labels = np.concatenate([np.repeat(np.arange(classes), c) for c in counts])
    return logits, labels


@pytest.mark.parametrize("temperature", [0.4, 1.0, 2.5, 7.0])
def test_ts_recovers_a_planted_temperature_to_1e_3(temperature):
    logits, labels = exactly_calibrated_rows(temperature)
    assert make("ts").fit(logits, labels).temperature_ == pytest.approx(temperature, abs=1e-3)


def test_ts_recovers_temperature_from_sampled_labels():
    data = planted_temperature(200_000, np.random.default_rng(3), num_classes=10, temperature=2.5)
    assert make("ts").fit(data["logits"], data["labels"]).temperature_ == pytest.approx(2.5, abs=0.02)


def test_ts_solver_matches_a_brute_force_minimiser():
    data = planted_temperature(3000, np.random.default_rng(1), num_classes=5, temperature=0.7)
    z, y = data["logits"], data["labels"]
    nll = lambda log_t: -np.mean(log_softmax(z / np.exp(log_t), axis=1)[np.arange(y.size), y])  # noqa: E731
    reference = np.exp(minimize_scalar(nll, bounds=(-5, 5), method="bounded", options={"xatol": 1e-10}).x)
    assert make("ts").fit(z, y).temperature_ == pytest.approx(reference, rel=1e-6)


def test_ts_subsample_start_reaches_the_same_temperature():
    """The subsample start (large inputs) changes the Newton path, not the minimiser: a tiny threshold
    forces two nested subsample stages on a small input."""
    from calbench.solvers.temperature_fit import fit_inverse_temperature

    data = planted_temperature(4000, np.random.default_rng(6), num_classes=20, temperature=1.8)
    z, y = data["logits"], data["labels"]
    direct = fit_inverse_temperature(z, y, subsample_entries=10**9)
    staged = fit_inverse_temperature(z, y, subsample_entries=2_000)
    assert staged == pytest.approx(direct, rel=1e-10)


def test_ts_series_of_row_moments_equals_evaluating_the_data(monkeypatch):
    """The gradient and curvature at β + δ from the power series of the row moments at β equal
    the direct evaluation at β + δ (small δ), and the fit that proposes its second point from the series ends
    at the plain Newton fit's temperature (1e-10 relative)."""
    from calbench.solvers import temperature_fit as temperature

    data = planted_temperature(3000, np.random.default_rng(7), num_classes=50, temperature=1.6)
    z, y = data["logits"], data["labels"]
    top = z.max(axis=1)
    z_true = z[np.arange(y.size), y] - top
    moments = temperature._row_moments(0.6, z, top, temperature.MOMENT_ORDER)
    for delta in (0.0, 1e-4, -3e-3):
        exact = temperature._gradient_curvature(temperature._row_moments(0.6 + delta, z, top, 2), z_true)
        np.testing.assert_allclose(temperature._gradient_curvature(moments, z_true, delta), exact, rtol=1e-11)
    fast = temperature.fit_inverse_temperature(z, y, subsample_entries=20_000)
    monkeypatch.setattr(temperature, "SERIES_RADIUS", 0.0)  # no series: Newton steps on the data only
    plain = temperature.fit_inverse_temperature(z, y, subsample_entries=20_000)
    assert fast == pytest.approx(plain, rel=1e-10)


def straightforward_inverse_temperature(z, y):
    """The root of the log-loss's derivative in β, mean_i(Σ_j σ(β z_i)_j z_ij − z_iy), by Brent's method with
    scipy's softmax: the minimiser of the convex NLL of σ(β z), written out without the fast path's devices."""
    from scipy.optimize import brentq
    from scipy.special import softmax

    def derivative(beta):
        return np.mean(np.sum(softmax(beta * z, axis=1) * z, axis=1) - z[np.arange(y.size), y])

    return brentq(derivative, 1e-6, 1e6, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=1000)


def awkward_logits(case):
    """Small tasks (400 × 7, labels drawn from σ(s)) whose logits are large, tied or very negative."""
    rng = np.random.default_rng(11)
    data = planted_temperature(400, rng, num_classes=7, temperature=1.3)
    z, y = data["logits"], data["labels"]
    if case == "large":
        z = 3e4 * z
    elif case == "offset":
        z = z + 1e6 * rng.normal(size=(z.shape[0], 1))
    elif case == "ties":
        z = np.round(z)  # integer logits: ties everywhere, also for the row max
        z[:50] = 2.0  # rows of equal logits
    elif case == "negative":
        far = rng.random(z.shape) < 0.3
        far[np.arange(y.size), y] = False
        z = np.where(far, -1e5 * (1 + rng.random(z.shape)), z)  # exp underflows to 0 there
        z[0, y[0]] = -3e3  # one label far below its row max
    return z, y


@pytest.mark.parametrize("case", ["plain", "large", "offset", "ties", "negative"])
def test_ts_fast_path_equals_the_straightforward_fit_and_softmax(case):
    """The compiled fit (vectorised exp, row moments, series proposal, subsample start) ends where
    the plain derivative's root is (1e-8 relative), with the same answer whatever its row blocks (1 row per
    block or all rows in one, on threads); its prediction equals scipy's softmax(z / T) (1e-12)."""
    from scipy.special import softmax

    from calbench.solvers.temperature_fit import fit_inverse_temperature, softmax_scaled

    z, y = awkward_logits(case)
    beta = fit_inverse_temperature(z, y, subsample_entries=1_000)
    assert beta == pytest.approx(straightforward_inverse_temperature(z, y), rel=1e-8)
    assert fit_inverse_temperature(z, y, subsample_entries=1_000, block_entries=1) == beta
    probs = softmax_scaled(z, beta)
    np.testing.assert_array_equal(softmax_scaled(z, beta, block_entries=5), probs)
    if case != "offset":  # there z / T rounds the differences to 1e-10 before scipy subtracts the row max
        np.testing.assert_allclose(probs, softmax(z * beta, axis=1), rtol=1e-12, atol=1e-300)
    ts = make("ts").fit(z, y)
    np.testing.assert_allclose(ts.predict_proba(z), softmax(z / ts.temperature_, axis=1) if case != "offset"
                               else probs, rtol=1e-12, atol=1e-300)


def test_vector_exp_equals_numpy_exp_and_flushes_below_the_normal_range():
    """The compiled exp (2^k·e^r, Taylor to r^12) equals np.exp to 1e-15 relative; under 2^−1022 it is 0."""
    from calbench.kernels.vector_exp import exp_split

    t = np.concatenate([np.random.default_rng(0).uniform(-760, 708, 200_000), [0.0, -0.0, 1e-300, -746.5, 708.0]])
    frac, scale = t.copy(), np.empty_like(t)
    exp_split(frac, scale)
    result, exact = frac * scale, np.exp(t)
    normal = t > -708.3
    np.testing.assert_allclose(result[normal], exact[normal], rtol=1e-15, atol=0)
    assert (result[t < -708.8] == 0).all() and np.abs(result - exact)[~normal].max() < 2.3e-308


def test_ts_on_real_cifar10_logits_equals_the_straightforward_fit():
    """The default run's size (CIFAR-10 ResNet-20, 10 classes): the same temperature as the plain fit."""
    folder = shared_data("logits", "cifar10_resnet-20")
    z, y = np.load(folder / "scores.npy").astype(np.float64)[:5000], np.load(folder / "targets.npy")[:5000]
    ts = make("ts").fit(z, y)
    assert 1.0 / ts.temperature_ == pytest.approx(straightforward_inverse_temperature(z, y), rel=1e-10)


def test_ts_on_separable_data_sharpens_without_failing():
    logits = np.array([[2.0, 0.0], [0.0, 2.0]] * 10)
    labels = np.array([0, 1] * 10)
    ts = make("ts").fit(logits, labels)
    # Log-loss keeps decreasing as T → 0; the solver stops once the loss is flat to float64 precision.
    assert 0 < ts.temperature_ < 0.1
    probs = ts.predict_proba(logits)
    assert np.isfinite(probs).all() and -np.mean(np.log(probs[np.arange(20), labels])) < 1e-9


def test_ts_preserves_argmax_and_uncal_is_identity():
    data = planted_temperature(500, np.random.default_rng(2))
    ts = make("ts").fit(data["logits"], data["labels"])
    assert (ts.predict_proba(data["logits"]).argmax(1) == data["logits"].argmax(1)).all()
    uncal = make("uncal").fit(data["logits"], data["labels"])
    np.testing.assert_allclose(uncal.predict_proba(data["logits"]), Scores(data["logits"]).probs)


def test_scores_from_probs_uses_the_log_as_logits_floored_at_the_smallest_float():
    p = np.array([[0.2, 0.8], [1.0, 0.0], [1 - 1e-20, 1e-20]])
    scores = Scores.from_probs(p)
    tiny = np.finfo(float).tiny
    np.testing.assert_allclose(scores.probs, [[0.2, 0.8], [1.0, tiny], [1.0, 1e-20]], rtol=1e-12, atol=0)
    np.testing.assert_allclose(scores.logits[:, 1], np.log([0.8, tiny, 1e-20]))
    with pytest.raises(ValueError, match="values must lie in"):
        Scores.from_probs(np.array([[2.0, -1.0]]))


def test_make_builds_chains_and_rejects_unknown_names_with_the_allowed_list():
    chain = make("ts+ts")
    assert isinstance(chain, Chain) and len(chain.steps) == 2
    with pytest.raises(ValueError, match=r"unknown method 'nope' in 'ts\+nope'; allowed: .*ts"):
        make("ts+nope")
    with pytest.raises(ValueError, match=r"unknown method 'lec' in 'ts\+lec'; did you mean 'lece' or 'lecd'\? allowed"):
        make("ts+lec")  # a typo gets the nearest names, as a metric typo does
    with pytest.raises(ValueError, match=r"method 'ts': .*allowed settings"):
        make("ts", alpha=1)
    assert {"ts", "uncal"} <= set(available())


def test_chain_fits_each_stage_on_the_previous_output():
    data = planted_temperature(4000, np.random.default_rng(5), temperature=3.0)
    chain = make("ts+ts").fit(data["logits"], data["labels"])
    first, second = chain.steps
    assert first.temperature_ == pytest.approx(3.0, abs=0.2)
    assert second.temperature_ == pytest.approx(1.0, abs=1e-6)  # TS of a TS output is already optimal
    np.testing.assert_allclose(chain.predict_proba(data["logits"]), first.predict_proba(data["logits"]), atol=1e-6)


def test_code_files_name_the_modules_of_every_stage():
    files = code_files("uncal+ts")
    assert any(f.endswith("methods/temperature.py") for f in files)
    assert any(f.endswith("methods/uncal.py") for f in files)
    assert any(f.endswith("methods/base.py") for f in files)
    assert any(f.endswith("kernels/vector_exp.py") for f in files)  # ts's compiled passes use its exp
    assert {"kernels/piecewise.py", "kernels/vector_exp.py"} <= {  # PL's lazily imported kernel
        "/".join(f.split("/")[-2:]) for f in code_files("pl3_conf")}


def test_grid_search_picks_the_best_point_and_can_average_fold_models():
    data = planted_temperature(1000, np.random.default_rng(4), temperature=2.0)

    class Fixed(type(make("uncal"))):
        """Softmax of logits / t for a fixed t (a toy method to tune)."""

        def __init__(self, t=1.0):
            self.t = t

        def _predict_proba(self, scores):
            return Scores(scores.logits / self.t).probs

    search = GridSearch(Fixed(), {"t": [0.5, 1.0, 2.0, 4.0]}, folds=5, seed=0).fit(data["logits"], data["labels"])
    assert search.best_params_ == {"t": 2.0}
    assert search.cv_losses_.shape == (4,)
    ensemble = GridSearch(Fixed(), {"t": [1.0, 2.0]}, folds=3, ensemble=True).fit(data["logits"], data["labels"])
    assert len(ensemble.estimators_) == 3
    assert ensemble.predict_proba(data["logits"]).sum(1) == pytest.approx(np.ones(1000))

    class Skipping(Fixed):
        """A grid hook that forgets its last point."""

        def predict_grid(self, points, train, y_train, val, start=()):
            return ((i, Fixed(**p).fit(train, y_train).predict_proba(val), None) for i, p in enumerate(points[:-1]))

    with pytest.raises(RuntimeError, match=r"left grid points \[1\] without a prediction"):
        GridSearch(Skipping(), {"t": [1.0, 2.0]}, folds=3).fit(data["logits"], data["labels"])


def test_grid_search_warns_when_its_optimum_is_at_an_open_end_of_the_grid():
    """GridEdgeWarning: the chosen value is the grid's last of an open-ended hyperparameter and the loss still
    falls there (by more than EDGE_RISE); not inside the grid, not on a plateau, not for a bounded one."""
    import warnings

    from calbench.methods.tuning import GridEdgeWarning

    data = planted_temperature(1000, np.random.default_rng(4), temperature=2.0)

    class Fixed(type(make("uncal"))):
        """Softmax of logits / t for a fixed t; t is open-ended."""

        open_ended_params = ("t",)

        def __init__(self, t=1.0):
            self.t = t

        def _predict_proba(self, scores):
            return Scores(scores.logits / self.t).probs

    with pytest.warns(GridEdgeWarning, match=r"lowest at the largest t of the grid, 1 \(.*at 0.5\).*past 1"):
        GridSearch(Fixed(), {"t": [0.25, 0.5, 1.0]}, folds=3).fit(data["logits"], data["labels"])

    class Bounded(Fixed):
        open_ended_params = ()

    with warnings.catch_warnings():
        warnings.simplefilter("error", GridEdgeWarning)
        assert GridSearch(Fixed(), {"t": [0.5, 1.0, 2.0, 4.0]}, folds=3).fit(
            data["logits"], data["labels"]).best_params_ == {"t": 2.0}
        plateau = GridSearch(Fixed(), {"t": [1.9999, 2.0, 4.0]}, folds=3).fit(data["logits"], data["labels"])
        assert plateau.best_params_ == {"t": 1.9999}  # the end, 1e-6 below the next: no warning
        GridSearch(Bounded(), {"t": [0.25, 0.5, 1.0]}, folds=3).fit(data["logits"], data["labels"])


class _FixedTemperature(type(make("uncal"))):
    """Softmax of logits / t for a fixed t; t is open-ended (a planted temperature of 2 is best)."""

    open_ended_params = ("t",)

    def __init__(self, t=1.0):
        self.t = t

    def _predict_proba(self, scores):
        return Scores(scores.logits / self.t).probs


@pytest.mark.parametrize("grid, added, best", [
    ([0.02, 0.2], [2.0, 20.0], 2.0),  # optimum at the largest value: continued up until the loss rises
    ([200.0, 2000.0], [20.0, 2.0, 0.2], 2.0),  # at the smallest: continued down until it rises
    ([0.2, 2.0, 20.0], [], 2.0),  # bracketed: nothing added
])
def test_an_extended_grid_follows_a_falling_loss_past_its_end_until_it_rises(grid, added, best):
    """A default grid (``extend``) continues a decade at a time past the end where the CV optimum lies with the
    loss still falling, and stops at the first point where it rises; ``cv_results_`` lists the added points."""
    import warnings

    from calbench.methods.tuning import GridEdgeWarning

    data = planted_temperature(1000, np.random.default_rng(4), temperature=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GridEdgeWarning)
        search = GridSearch(_FixedTemperature(), {"t": grid}, folds=3, extend=True).fit(data["logits"],
                                                                                        data["labels"])
    assert search.cv_results_["param_t"] == pytest.approx(grid + added)
    assert search.best_params_["t"] == pytest.approx(best)
    assert len(search.cv_losses_) == len(grid + added)


def test_an_extended_grid_stops_at_its_bound_and_warns(monkeypatch):
    """After EXTEND_DECADES decades the extension stops and GridEdgeWarning says that the bound was reached; a
    loss that falls by less than EXTEND_FALL (outputs near uniform) is not followed."""
    from calbench.methods import tuning

    monkeypatch.setattr(tuning, "EXTEND_DECADES", 1)
    data = planted_temperature(1000, np.random.default_rng(4), temperature=2.0)
    with pytest.warns(tuning.GridEdgeWarning, match=r"lowest at the largest t of the grid \(the default grid, 0.02 "
                                                    r"to 0.2, continued 1 decades: the bound of its extension\), 2 \("):
        search = GridSearch(_FixedTemperature(), {"t": [0.02, 0.2]}, folds=3, extend=True).fit(
            data["logits"], data["labels"])
    assert search.cv_results_["param_t"] == pytest.approx([0.02, 0.2, 2.0])
    plateau = GridSearch(_FixedTemperature(), {"t": [2e3, 2e4]}, folds=3, extend=True).fit(data["logits"],
                                                                                          data["labels"])
    assert plateau.cv_results_["param_t"] == [2e3, 2e4]


def test_a_written_grid_is_searched_as_written():
    """``make`` extends a default grid only: a grid the user writes runs as written and warns at its end."""
    from calbench.methods.tuning import GridEdgeWarning

    assert make("dir_l2").extend and make("dir_odir", reg_mu=1.0).extend
    assert not make("dir_l2", grid={"reg_lambda": [1.0, 10.0]}).extend
    data = planted_temperature(1000, np.random.default_rng(4), temperature=2.0)
    with pytest.warns(GridEdgeWarning, match="lowest at the largest t of the grid, 0.2"):
        search = GridSearch(_FixedTemperature(), {"t": [0.02, 0.2]}, folds=3).fit(data["logits"], data["labels"])
    assert search.cv_results_["param_t"] == [0.02, 0.2]


def test_grid_helpers():
    assert expand_grid({"a": [1, 2], "b": [3]}) == [{"a": 1, "b": 3}, {"a": 2, "b": 3}]
    with pytest.raises(ValueError, match="grid.a: expected a non-empty list"):
        expand_grid({"a": 1})
    probs, y = np.array([[0.5, 0.5], [0.9, 0.1]]), np.array([0, 0])
    assert fold_loss(probs, y, "nll") == pytest.approx(-(np.log(0.5) + np.log(0.9)) / 2)
    assert fold_loss(probs, y, "brier") == pytest.approx((0.5 + 0.02) / 2)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="logits: contains NaN"):
        make("ts").fit(np.array([[np.nan, 1.0], [0.0, 1.0]]), np.array([0, 1]))
    with pytest.raises(ValueError, match=r"labels: values must lie in \[0, 2\)"):
        make("ts").fit(np.zeros((2, 2)), np.array([0, 5]))
    with pytest.raises(ValueError, match="expected a 2-D array"):
        make("ts").fit(np.zeros(4), np.array([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="not fitted yet"):  # scikit-learn's NotFittedError
        make("ts").predict_proba(np.zeros((2, 2)))


def test_kfold_splits_equal_scikit_learns_shuffled_kfold():
    from sklearn.model_selection import KFold

    from calbench.folds import kfold_splits

    for n, k, seed in [(103, 10, 3), (50, 5, 0), (1000, 7, 11)]:
        ours = list(kfold_splits(n, k, seed))
        theirs = list(KFold(k, shuffle=True, random_state=seed).split(np.zeros(n)))
        assert all((a == c).all() and (b == d).all() for (a, b), (c, d) in zip(ours, theirs))


def test_stratified_kfold_splits_equal_scikit_learns_shuffled_stratified_kfold():
    """GridSearch's folds without importing scikit-learn: the same folds, so tuned methods keep their numbers."""
    from sklearn.model_selection import StratifiedKFold

    from calbench.folds import stratified_kfold_splits

    rng = np.random.default_rng(0)
    for n, classes, k, seed in [(103, 3, 10, 3), (500, 10, 5, 0), (2000, 100, 10, 11), (37, 2, 3, 5)]:
        y = np.concatenate([np.repeat(np.arange(classes), k), rng.integers(0, classes, n - classes * k)])
        y = 7 * rng.permutation(y) + 2  # labels that are neither 0..C-1 nor in order of first appearance
        ours = stratified_kfold_splits(y, k, seed)
        theirs = list(StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(n), y))
        assert len(ours) == k
        assert all((a == c).all() and (b == d).all() for (a, b), (c, d) in zip(ours, theirs))
    with pytest.raises(ValueError, match="every class needs >= 3 rows"):
        stratified_kfold_splits(np.array([0, 0, 0, 1, 1]), 3, 0)
