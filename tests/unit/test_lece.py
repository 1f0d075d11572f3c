"""LECE and LECD (LECE paper Algorithm 1, §3.2): defining behaviour, a brute-force reference, the grid hook."""

import numpy as np
import pytest

from calbench.data.synthetic import lece3
from calbench.kernels import neighbour_sums as neighbour_sums_module
from calbench.methods import lece as lece_module
from calbench.methods import make
from calbench.methods.tuning import GridSearch


@pytest.fixture(params=["default tiles", "tiny tiles"])
def summation(request, monkeypatch):
    """Run a test with the compiled cache-blocked kernel's own tile sizes and with tiles of 3 pool rows and
    blocks of 2 queries, so that neighbour lists cross tiles."""
    if request.param == "tiny tiles":
        monkeypatch.setattr(neighbour_sums_module, "TILE_ROWS", 3)
        monkeypatch.setattr(neighbour_sums_module, "QUERY_BLOCK", 2)
    return request.param


@pytest.fixture(params=["partial sums", "loose partial sums", "float32 product"])
def kl_bounds(request, monkeypatch):
    """Run a KL test with each source of the score intervals: the sums over a peaked query's
    largest classes (default), the same with a remaining mass of up to 0.5 (wide intervals: many rows
    re-scored in float64), and the float32 matrix product for every query."""
    if request.param == "loose partial sums":
        monkeypatch.setattr(neighbour_sums_module, "RESIDUAL_MASS", 0.5)
    elif request.param == "float32 product":
        monkeypatch.setattr(neighbour_sums_module, "MAX_CLASSES", 0)
    return request.param


def _data(n, classes, seed):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(classes, 0.7), size=n)
    y = np.array([rng.choice(classes, p=row ** 0.8 / np.sum(row ** 0.8)) for row in p])
    return np.log(p), y


def _algorithm1(p_cal, y_cal, p_query, q, t, distance="kl", lecd=False, eps=1e-30):
    """Algorithm 1 written out literally (full distance matrix, full sort), the test's reference."""
    if distance == "kl":
        a, b = np.clip(p_query, eps, 1), np.clip(p_cal, eps, 1)
        d = np.sum(a * np.log(a), axis=1)[:, None] - a @ np.log(b).T
    else:
        d = np.sum((p_query[:, None, :] - p_cal[None, :, :]) ** 2, axis=2)
    k = max(1, int(q * len(p_cal)))
    onehot = np.eye(p_cal.shape[1])[y_cal]
    out = np.empty_like(p_query)
    for i, row in enumerate(d):
        nearest = np.argsort(row)[:k]
        p_bar, y_bar = p_cal[nearest].mean(0), onehot[nearest].mean(0)
        c = y_bar if lecd else p_query[i] - (p_bar - y_bar)
        c = np.where((p_query[i] <= t) | (c <= t), p_query[i], c)
        out[i] = c / c.sum()
    return out


@pytest.mark.parametrize("name", ["lece", "lecd"])
@pytest.mark.parametrize("distance", ["kl", "euclidean"])
@pytest.mark.parametrize("q,t", [(0.05, 0.0), (0.2, 0.02), (0.5, 0.1), (1.0, 0.0)])
def test_matches_algorithm1_written_out(name, distance, q, t, summation, kl_bounds):
    z, y = _data(300, 4, 0)
    zq, _ = _data(50, 4, 1)
    cal = make(name, q=q, t=t, distance=distance, grid=None).fit(z, y)
    expected = _algorithm1(np.exp(z), y, np.exp(zq), q, t, distance, lecd=name == "lecd")
    np.testing.assert_allclose(cal.predict_proba(zq), expected, atol=1e-12)


def test_threshold_one_is_identity():
    z, y = _data(400, 5, 2)
    zq, _ = _data(100, 5, 3)
    out = make("lece", q=0.1, t=1.0, grid=None).fit(z, y).predict_proba(zq)
    np.testing.assert_allclose(out, np.exp(zq), atol=1e-14)


def test_lecd_with_all_neighbours_predicts_class_prior():
    z, y = _data(500, 4, 4)
    zq, _ = _data(30, 4, 5)
    out = make("lecd", q=1.0, t=0.0, grid=None).fit(z, y).predict_proba(zq)
    np.testing.assert_allclose(out, np.tile(np.bincount(y, minlength=4) / y.size, (30, 1)), atol=1e-14)


def test_lece_with_all_neighbours_is_a_global_shift():
    """q = 1: ĉ = p̂ − (mean p̂ − mean y), §1.8 special values (rows where no threshold fires)."""
    z, y = _data(500, 3, 6)
    zq, _ = _data(200, 3, 7)
    p, pq = np.exp(z), np.exp(zq)
    shifted = pq - (p.mean(0) - np.eye(3)[y].mean(0))
    out = make("lece", q=1.0, t=0.0, grid=None).fit(z, y).predict_proba(zq)
    clean = (shifted > 0).all(axis=1)
    assert clean.sum() > 100
    np.testing.assert_allclose(out[clean], shifted[clean], atol=1e-12)


def test_outputs_are_distributions_and_k_is_floor_of_q_n():
    z, y = _data(333, 3, 8)
    cal = make("lece", q=0.07, t=0.0, grid=None).fit(z, y)
    assert cal.k_ == 23  # ⌊0.07 · 333⌋
    out = cal.predict_proba(_data(50, 3, 9)[0])
    assert (out >= 0).all() and np.allclose(out.sum(1), 1)


def test_blocks_give_the_same_output(monkeypatch):
    z, y = _data(400, 6, 10)
    zq, _ = _data(250, 6, 11)
    reference = make("lece", q=0.1, t=0.01, grid=None).fit(z, y).predict_proba(zq)
    for entries in (400 * 7, 100):  # blocks of 7 queries; single queries with neighbours gathered 16 at a time
        monkeypatch.setattr(lece_module, "BLOCK_ENTRIES", entries)
        monkeypatch.setattr(lece_module, "BUILD_ROWS", 7)  # the pool built 7 rows at a time
        np.testing.assert_allclose(make("lece", q=0.1, t=0.01, grid=None).fit(z, y).predict_proba(zq), reference,
                                   atol=1e-12)


@pytest.mark.parametrize("q", [0.03, 0.31])  # k = 6, 62: not multiples of the 4 copies
def test_exactly_k_neighbours_when_distances_tie(q, summation, kl_bounds):
    """Each calibration point appears 4 times (same label): distances tie at the k-th neighbour."""
    z, y = _data(50, 3, 15)
    z, y = np.tile(z, (4, 1)), np.tile(y, 4)
    zq, _ = _data(40, 3, 16)
    expected = _algorithm1(np.exp(z), y, np.exp(zq), q, 0.0)
    out = make("lece", q=q, t=0.0, grid=None).fit(z, y).predict_proba(zq)
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_predict_grid_equals_one_fit_per_point(summation):
    z, y = _data(300, 4, 12)
    zq, _ = _data(60, 4, 13)
    points = [{"q": q, "t": t} for q in (0.01, 0.1, 0.2, 1.0) for t in (0.0, 0.05, 1.0)]
    from calbench.scores import Scores
    shared = {i: probs for i, probs, _ in make("lecd", grid=None).predict_grid(points, Scores(z), y, Scores(zq))}
    assert sorted(shared) == list(range(len(points)))
    for point, out in zip(points, (shared[i] for i in range(len(points)))):
        np.testing.assert_allclose(out, make("lecd", grid=None, **point).fit(z, y).predict_proba(zq), atol=1e-12)


def test_default_is_the_paper_grid_with_10_fold_log_loss_cv():
    cal = make("lece")
    assert isinstance(cal, GridSearch) and cal.folds == 10 and cal.scoring == "nll"
    assert cal.grid["q"] == [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.1, 0.2, 1.0]
    assert cal.grid["t"] == [0, 0.00125, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.05, 0.10, 1.0]
    data = lece3(1500, np.random.default_rng(0))
    cal.fit(data["logits"], data["labels"])
    assert cal.best_params_["q"] in cal.grid["q"] and len(cal.cv_losses_) == 100


@pytest.mark.parametrize("settings,key", [({"q": 0}, "q"), ({"q": 1.5}, "q"), ({"t": -0.1}, "t"),
                                          ({"distance": "cosine"}, "distance")])
def test_bad_settings_are_named(settings, key):
    z, y = _data(50, 3, 14)
    with pytest.raises(ValueError, match=f"^{key}:"):
        make("lece", grid=None, **settings).fit(z, y)


@pytest.mark.parametrize("columns", [5, 64, 70])  # one padded chunk, one full chunk, a full and a padded one
@pytest.mark.parametrize("tile_rows,query_block", [(512, 64), (3, 2), (1, 1)])
def test_cumulative_band_sums_equal_a_plain_loop(columns, tile_rows, query_block, monkeypatch):
    """The cache-blocked kernel against sums over each query's first ends[j] neighbours."""
    monkeypatch.setattr(neighbour_sums_module, "TILE_ROWS", tile_rows)
    monkeypatch.setattr(neighbour_sums_module, "QUERY_BLOCK", query_block)
    rng = np.random.default_rng(4)
    targets = rng.normal(size=(40, columns))
    nearest = np.stack([rng.permutation(40)[:12] for _ in range(7)])
    ends = [2, 5, 6, 12]
    out = neighbour_sums_module.cumulative_band_sums(neighbour_sums_module.chunk_columns(targets), columns,
                                                     nearest, ends)
    assert out.shape == (7, 4, columns)
    for i in range(7):
        for j, end in enumerate(ends):
            np.testing.assert_allclose(out[i, j], targets[nearest[i, :end]].sum(axis=0), atol=1e-12)


def test_neighbour_keys_by_pool_row_equal_a_sort():
    """The kernel's neighbour keys (row << shift | band) from a scan of the marked pool rows against
    np.sort of them; a row listed twice is refused (the scan would list it once)."""
    rng = np.random.default_rng(5)
    nearest = np.stack([rng.permutation(50)[:12] for _ in range(6)])
    band_of_rank = np.repeat(np.arange(4), 3)
    keys = np.empty((6, 12), dtype=np.int64)
    neighbour_sums_module._keys_by_row(nearest, band_of_rank, 2, 50, keys)
    np.testing.assert_array_equal(keys, np.sort(nearest << 2 | band_of_rank, axis=1))
    nearest[2, 5] = nearest[2, 0]
    with pytest.raises(ValueError, match="twice"):
        neighbour_sums_module.cumulative_band_sums(np.zeros((1, 50, 64)), 3, nearest, [3, 12])


@pytest.mark.parametrize("name", ["lece", "lecd"])
@pytest.mark.parametrize("scoring", ["nll", "brier"])
def test_grid_losses_equal_the_losses_of_the_grid_outputs(name, scoring, summation):
    """The per-row CV scores against fold_loss of each (q, t) output of predict_grid."""
    from calbench.methods.tuning import fold_loss
    from calbench.scores import Scores

    z, y = _data(300, 5, 17)
    zq, yq = _data(80, 5, 18)
    points = [{"q": q, "t": t} for q in (0.01, 0.05, 0.2, 1.0) for t in (0.0, 0.0025, 0.05, 0.1, 0.3, 1.0)]
    estimator = make(name, grid=None)
    losses = estimator.grid_losses(points, Scores(z), y, Scores(zq), yq, scoring)
    expected = np.zeros(len(points))
    for i, out, _ in estimator.predict_grid(points, Scores(z), y, Scores(zq)):
        expected[i] = fold_loss(out, yq, scoring)
    np.testing.assert_allclose(losses, expected, rtol=0, atol=1e-10)
    assert len(set(np.round(expected, 6))) > 10  # the thresholds and neighbourhoods change the outputs


def test_cv_search_with_the_grid_losses_hook_equals_scoring_each_output(monkeypatch):
    z, y = _data(300, 4, 19)

    def search():
        return make("lece", grid={"q": [0.05, 0.2], "t": [0.0, 0.05]}, cv={"folds": 3}).fit(z, y)

    with_hook = search()
    monkeypatch.delattr(lece_module.LECE, "grid_losses")
    without = search()
    np.testing.assert_allclose(with_hook.cv_losses_, without.cv_losses_, rtol=0, atol=1e-10)
    assert with_hook.best_params_ == without.best_params_


@pytest.mark.parametrize("bins", [4096, 3, 1])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_order_statistics_equal_a_full_sort(bins, dtype, monkeypatch):
    """The histogram selection of the rank boundaries' scores against np.sort: random rows, ties,
    a constant row, a far outlier (every other value in one bin), chosen rows; 1 bin sorts each row whole."""
    monkeypatch.setattr(neighbour_sums_module, "SELECT_BINS", bins)
    rng = np.random.default_rng(23)
    values = rng.gamma(2.0, size=(9, 301)).astype(dtype)
    values[1] = np.round(values[1])  # ties
    values[2] = 1.5
    values[3, 7] = 1e30
    values[4, 1::2] = values[4, :-1:2]
    rows = np.array([8, 0, 1, 2, 3, 4, 4, 5])
    for ends in ([1], [5, 17, 40, 119, 301], [300]):
        ends = np.array(ends)
        out = neighbour_sums_module._smallest(values, rows, ends)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, np.sort(values[rows], axis=1)[:, ends - 1])


def test_float32_kl_neighbours_equal_the_float64_order_at_near_ties(kl_bounds):
    """Pool rows in pairs whose KL scores differ by ~1e-9 (below float32's resolution): every rank band
    holds the rows of the float64 order (float32 product, float64 re-check at the boundaries)."""
    rng = np.random.default_rng(20)
    p = rng.dirichlet(np.full(8, 0.5), size=60)
    twin = p * (1 + 1e-9 * rng.normal(size=p.shape))
    pool = np.vstack([p, twin / twin.sum(axis=1, keepdims=True)])
    queries = rng.dirichlet(np.full(8, 0.5), size=12)
    log_rows = -np.log(np.clip(pool, 1e-30, 1))
    ends = [5, 17, 40, 119]
    logits = np.log(pool)
    cols32 = np.ascontiguousarray(log_rows.T, dtype=np.float32)
    nearest = neighbour_sums_module.nearest_kl_by_band(queries, cols32, cols32.max(axis=0), logits,
                                                       np.zeros(len(pool)), ends, 1e-30, np.abs(logits).max())
    reference = np.argsort(queries @ log_rows.T, axis=1, kind="stable")
    for start, end in zip([0, *ends[:-1]], ends):
        assert (np.sort(nearest[:, start:end], axis=1) == np.sort(reference[:, start:end], axis=1)).all()
    # the pool as rows `members` of larger arrays (a CV fold's pool within the whole set's logits)
    members = np.arange(len(pool)) * 2 + 1
    wide = np.full((2 * len(pool) + 1, 8), 50.0)
    wide[members] = logits
    assert (neighbour_sums_module.nearest_kl_by_band(queries, cols32, cols32.max(axis=0), wide, np.zeros(len(wide)),
                                                     ends, 1e-30, np.abs(logits).max(), members) == nearest).all()


def test_confident_predictions_with_queries_in_the_pool_match_algorithm1(summation, kl_bounds):
    """Scores near 0 (queries equal to pool points, p̂_top ≈ 1 − 1e-15): the float32 bound's absolute part
    and the float64 re-check from the logits still give Algorithm 1's neighbours."""
    z, y = _data(200, 6, 21)
    z = 40 * z / np.abs(z).max(axis=1, keepdims=True)
    expected = _algorithm1(np.exp(z - np.log(np.exp(z).sum(1, keepdims=True))), y,
                           np.exp(z[:30] - np.log(np.exp(z[:30]).sum(1, keepdims=True))), 0.1, 0.0)
    out = make("lece", q=0.1, t=0.0, grid=None).fit(z, y).predict_proba(z[:30])
    np.testing.assert_allclose(out, expected, atol=1e-10)


def _peaked(n, classes, seed):
    """Logits of peaked predictions (a few classes above 0.01 per row), as a 1,000-class network's."""
    rng = np.random.default_rng(seed)
    z = 6.0 * rng.normal(size=(n, classes))
    return z, np.array([rng.choice(classes, p=row) for row in np.exp(z) / np.exp(z).sum(1, keepdims=True)])


@pytest.mark.parametrize("name", ["lece", "lecd"])
@pytest.mark.parametrize("q,t", [(0.1, 0.01), (0.3, 0.05)])
def test_prediction_summing_only_the_classes_above_t_matches_algorithm1(name, q, t, summation, kl_bounds,
                                                                         monkeypatch):
    """With t > 0 a class with p̂ⱼ ≤ t keeps p̂ⱼ (Algorithm 1 line 7), so prediction sums the neighbours only
    at the entries p̂ⱼ > t: the same outputs as Algorithm 1 and as the dense sums of every class."""
    z, y = _peaked(300, 30, 22)
    zq, _ = _peaked(60, 30, 23)
    p, pq = (np.exp(a - np.log(np.exp(a).sum(1, keepdims=True))) for a in (z, zq))
    assert (pq > t).mean() <= lece_module.SPARSE_SHARE  # the sparse path is taken
    calls = []
    column_sums = neighbour_sums_module.column_sums
    monkeypatch.setattr(neighbour_sums_module, "column_sums", lambda *a: calls.append(1) or column_sums(*a))
    cal = make(name, q=q, t=t, grid=None).fit(z, y)
    out = cal.predict_proba(zq)
    assert calls
    np.testing.assert_allclose(out, _algorithm1(p, y, pq, q, t, lecd=name == "lecd"), rtol=0, atol=1e-12)
    monkeypatch.setattr(lece_module, "SPARSE_SHARE", 0.0)  # every class summed
    np.testing.assert_allclose(cal.predict_proba(zq), out, rtol=0, atol=1e-14)


@pytest.mark.parametrize("name,distance", [("lece", "kl"), ("lecd", "kl"), ("lece", "euclidean")])
def test_cv_with_one_shared_pool_equals_a_pool_per_fold(name, distance, summation, monkeypatch):
    """The grid search builds the whole set's pool once and gives each fold its training rows of it
    (``grid_shared``): the same CV losses as a pool built from each fold's training part."""
    z, y = _peaked(240, 12, 24)

    def search():
        grid = {"q": [0.02, 0.1, 0.3, 1.0], "t": [0.0, 0.01, 0.1]}
        return make(name, grid=grid, distance=distance, cv={"folds": 4}).fit(z, y)

    shared = search()
    monkeypatch.delattr(lece_module.LECE, "grid_shared")
    per_fold = search()
    np.testing.assert_allclose(shared.cv_losses_, per_fold.cv_losses_, rtol=0, atol=1e-12)
    assert shared.best_params_ == per_fold.best_params_
