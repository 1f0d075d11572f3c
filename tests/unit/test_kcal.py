"""KCal (Lin, Trivedi & Sun, ICLR 2023): Eq. 3 by hand, Eq. 6 episodes, bandwidth search, fit/predict."""

from __future__ import annotations

import copy
import subprocess
import sys

import numpy as np
import pytest

from calbench.folds import fold_ids
from calbench.methods import make
from calbench.methods.kcal import cv_log_loss, golden_section, kde_log_loss, kde_probs, project
from calbench.scores import Scores

FAST = {"steps_per_epoch": 20, "max_epochs": 4, "n_folds": 5, "device": "cpu"}
NEEDS_TORCH = "KCal trains its projection with torch: pip install 'calbench[models]'"


def test_eq3_on_a_hand_made_example():
    # Support on a line: class 0 at 0 and 1, class 1 at 3; query at 2; d = 1, h = 1 → kernel exp(−Δ²).
    support = np.array([[0.0], [3.0], [1.0]])
    labels = np.array([0, 1, 0])
    k0, k1 = np.exp(-4.0) + np.exp(-1.0), np.exp(-1.0)
    probs = kde_probs(np.array([[2.0]]), support, labels, 3, 1.0)
    np.testing.assert_allclose(probs, [[k0 / (k0 + k1), k1 / (k0 + k1), 0.0]], rtol=1e-6)  # float32 kernels
    # Bandwidth h divides the mean squared distance: h = 2 halves every exponent.
    k0, k1 = np.exp(-2.0) + np.exp(-0.5), np.exp(-0.5)
    expected = [[k0 / (k0 + k1), k1 / (k0 + k1)]]
    np.testing.assert_allclose(kde_probs(np.array([[2.0]]), support, labels, 2, 2.0), expected, rtol=1e-6)


def test_far_queries_do_not_underflow_and_leave_out_excludes_own_group():
    support = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0]])
    labels = np.array([0, 0, 1])
    far = kde_probs(np.array([[1000.0, 0.0]]), support, labels, 2, 0.1)
    np.testing.assert_allclose(far, [[0.0, 1.0]])  # every raw kernel value underflows; the ratio does not
    loo = kde_probs(support, support, labels, 2, 1.0, np.arange(3), np.arange(3))
    # Point 2 is alone in class 1: left out, only class-0 mass remains.
    np.testing.assert_allclose(loo[2], [1.0, 0.0])
    assert kde_log_loss(support, labels, 2, 1.0, np.arange(3)) == pytest.approx(-np.log(1e-10) / 3, rel=1e-6)
    # The cached CV loss (products kept, nearest distances found by the first call) equals the uncached one at
    # every bandwidth.
    rng = np.random.default_rng(4)
    z, y = rng.normal(size=(300, 3)), rng.integers(0, 4, 300)
    folds = fold_ids(300, 5, 0)
    for cache in (True, False):
        reused = cv_log_loss(z, y, 4, folds, cache=cache)
        assert [reused(h) for h in (0.5, 2.0, 0.1)] == [kde_log_loss(z, y, 4, h, folds) for h in (0.5, 2.0, 0.1)]


def test_compiled_blocks_and_group_exclusion_equal_the_plain_formulas():
    """Eq. 3 with out-of-group support, computed by the compiled kernel in row blocks, equals the straightforward
    float64 computation: all pairs at once, exclusion by comparing every pair's groups. Integer embeddings make
    the float32 matrix product exact, so both see the same squared distances."""
    from calbench.methods.kcal import _Support

    rng = np.random.default_rng(3)
    n, k, d, h = 300, 7, 5, 0.7
    z, y = rng.integers(-3, 4, size=(n, d)).astype(float), rng.integers(0, k, n)
    groups = fold_ids(n, 6, 1)
    sq = ((z[:, None] - z[None]) ** 2).sum(-1)
    sq[groups[:, None] == groups[None, :]] = np.inf
    kernel = np.exp((sq.min(1, keepdims=True) - sq) / (d * h))
    plain = np.stack([kernel[:, y == c].sum(1) for c in range(k)], axis=1)
    plain /= plain.sum(1, keepdims=True)
    blocked = _Support(z, y, k, groups)
    for chunk in (1, 7, 1000):  # blocks of one row, blocks that do not divide n, one block
        probs = np.concatenate([blocked.shares(*block, h) for _, *block in blocked.blocks(z, groups, chunk=chunk)])
        np.testing.assert_allclose(probs, plain, rtol=1e-10, atol=1e-14)
        label_probs = np.concatenate([blocked.label_shares(*block, y[lo:lo + block[0].shape[0]], h)
                                      for lo, *block in blocked.blocks(z, groups, chunk=chunk)])
        np.testing.assert_allclose(label_probs, plain[np.arange(n), y], rtol=1e-10, atol=1e-14)
    # The CV loss (true-class shares only) is the mean log-loss of the all-class shares.
    assert kde_log_loss(z, y, k, h, groups) == pytest.approx(-np.mean(np.log(plain[np.arange(n), y])), rel=1e-12)
    # Leave-one-out (a group per point) excludes exactly each point itself: point 2, alone in class 1, gets share 0.
    line = np.array([[0.0], [1.0], [5.0]])
    loo = kde_probs(line, line, np.array([0, 0, 1]), 2, 1.0, np.arange(3), np.arange(3))
    share = np.exp(-np.array([25.0, 16.0])) / (np.exp(-1.0) + np.exp(-np.array([25.0, 16.0])))
    np.testing.assert_allclose(loo, [[1 - share[0], share[0]], [1 - share[1], share[1]], [1, 0]], rtol=1e-12)


@pytest.mark.parametrize("cores", [2, 3, 7])
def test_threaded_blocks_give_the_serial_results_bit_for_bit(monkeypatch, cores):
    """Eq. 3's blocks run in threads (each a contiguous run of whole blocks): the predictions and the CV loss,
    cached products or not, equal one thread's bit for bit (blocks of 7 rows; runs that do not divide n)."""
    import calbench.methods.kcal as kcal

    rng = np.random.default_rng(5)
    n, k, d = 101, 4, 3
    z, y = rng.normal(size=(n, d)), rng.integers(0, k, n)
    groups = fold_ids(n, 5, 0)
    monkeypatch.setattr(kcal, "CHUNK_ROWS", 7)

    def results():
        return (kde_probs(z, z, y, k, 0.6, groups, groups), cv_log_loss(z, y, k, groups)(0.6),
                cv_log_loss(z, y, k, groups, cache=False)(0.6))

    monkeypatch.setattr(kcal, "available_cores", lambda: 1)
    monkeypatch.setattr(kcal, "thread_map", lambda function, items: [function(item) for item in items])
    serial = results()
    monkeypatch.undo()
    monkeypatch.setattr(kcal, "CHUNK_ROWS", 7)
    monkeypatch.setattr(kcal, "available_cores", lambda: cores)
    monkeypatch.setattr("calbench.parallel.available_cores", lambda: cores)
    threaded = results()
    np.testing.assert_array_equal(threaded[0], serial[0])
    assert threaded[1:] == serial[1:]


def test_compiled_nearest_distance_equals_the_masked_minimum():
    """kernel_sums._nearest (the shift of each row's kernels) is exactly numpy's minimum of the same float64 distances
    over the support outside the query's group, clipped at 0; +inf where the whole support is in the group."""
    from calbench.kernels.kernel_sums import _nearest

    rng = np.random.default_rng(5)
    points = rng.normal(size=(1001, 4)).astype(np.float32)
    support_sq = np.einsum("ij,ij->i", points.astype(np.float64), points.astype(np.float64))
    groups = rng.integers(0, 3, points.shape[0])
    for i in range(20):
        gram = (2.0 * points[i]) @ points.T
        query_sq = support_sq[i] - 1e-3 * (i % 2)  # odd rows: the own point's distance slightly negative
        sq = query_sq + support_sq - gram.astype(np.float64)
        for group in (groups[i], -1):
            expected = max(sq[groups != group].min(), 0.0)
            assert _nearest(gram, query_sq, support_sq, groups, group) == expected
    assert _nearest(gram, 0.0, support_sq, np.zeros_like(groups), 0) == np.inf


def test_compiled_exp_matches_numpy_over_the_float64_range():
    """The kernel's vectorised exp (calbench.kernels.vector_exp, through calbench.kernels.kernel_sums) against np.exp,
    from exp(0) down to its underflow: one support point per class at squared distance t from the query, d = h = 1."""
    t = np.concatenate([[0.0], np.geomspace(1e-6, 700.0, 400), [707.0, 750.0, 1e4]])
    support = np.sqrt(t).astype(np.float32)[:, None]  # the kernel's float32 points; squared exactly in float64
    t = support[:, 0].astype(np.float64) ** 2
    probs = kde_probs(np.zeros((1, 1)), support, np.arange(t.size), t.size, 1.0)[0]
    # rtol 1e-13: the reduction t − k·ln 2 is exact to ~1e-19; the rest is rounding
    np.testing.assert_allclose(probs[:-3], np.exp(-t[:-3]) / np.exp(-t).sum(), rtol=1e-13, atol=0)
    assert probs[-2] == probs[-1] == 0.0  # below 2^-1022: 0, as float64 exp underflows


def test_golden_section_finds_the_minimum_within_tolerance():
    h, evaluations = golden_section(lambda h: (h - 2.7) ** 2, 0.1, 10.0, 1e-4)
    assert h == pytest.approx(2.7, abs=1e-4)
    assert evaluations == 2 + int(np.ceil(np.log(9.9 / 1e-4) / np.log(1 / 0.6180339887)))  # the spec's 24 steps


def test_folds_are_balanced():
    ids = fold_ids(103, 20, 0)
    assert np.bincount(ids).min() == 5 and np.bincount(ids).max() == 6


def test_episode_sampler_follows_eq6_weights():
    torch = pytest.importorskip("torch", reason=NEEDS_TORCH)
    from calbench.models.projection import EpisodeSampler

    labels = torch.tensor([0] * 30 + [1] * 5 + [2] * 65)
    sampler = EpisodeSampler(labels, 3, batch_size=20, m=10, generator=torch.Generator().manual_seed(0))
    for _ in range(20):
        pred, background, weights = sampler()
        assert pred.unique().numel() == 20 and not np.intersect1d(pred.numpy(), background.numpy()).size
        available = np.bincount(labels.numpy(), minlength=3) - np.bincount(labels[pred].numpy(), minlength=3)
        taken = np.bincount(labels[background].numpy(), minlength=3)
        np.testing.assert_array_equal(taken, np.minimum(available, 10))
        np.testing.assert_allclose(weights.numpy(), available / np.maximum(taken, 1))


def test_episode_loss_is_eq6_log_loss():
    torch = pytest.importorskip("torch", reason=NEEDS_TORCH)
    from calbench.models.projection import episode_loss

    rng = np.random.default_rng(0)
    zp, zb = rng.normal(size=(4, 3)), rng.normal(size=(7, 3))
    yp, yb = np.array([0, 1, 1, 0]), np.array([0, 0, 1, 1, 1, 0, 1])
    w = np.array([2.5, 4.0])
    kernel = np.exp(-((zp[:, None] - zb[None]) ** 2).sum(-1) / 3) * w[yb]
    p = np.stack([kernel[:, yb == k].sum(1) for k in (0, 1)], 1) / kernel.sum(1, keepdims=True)
    expected = -np.log(p[np.arange(4), yp]).mean()
    got = episode_loss(torch.tensor(zp), torch.tensor(yp), torch.tensor(zb), torch.tensor(yb),
                       torch.tensor(np.log(w)), 3)
    assert float(got) == pytest.approx(expected, rel=1e-10)
    # A row whose own class is far from it: p̂ underflows, the loss is clipped at 1e-10 with finite gradients.
    zp = torch.tensor([[0.0, 0.0, 0.0], [30.0, 0.0, 0.0]], requires_grad=True)
    zb = torch.tensor([[0.1, 0.0, 0.0], [30.0, 0.5, 0.0]])
    got = episode_loss(zp, torch.tensor([1, 1]), zb, torch.tensor([0, 1]), torch.zeros(2), 3)
    assert got.item() == pytest.approx(-np.log(1e-10) / 2, rel=1e-6)  # row 0 clipped, row 1: p̂ = 1 − e^−298
    got.backward()
    assert torch.isfinite(zp.grad).all()


@pytest.mark.parametrize("projection", ["skip_elu", "linear"])
def test_training_rows_equal_the_module_on_gathered_rows(projection):
    """One episode's train-mode pass through the affine map (of every row, BatchNorm's moments from the row
    indicator, for an episode of at least half the rows; of the gathered rows for a smaller one) equals the
    module on ``features[index]``: outputs, gradients and BatchNorm's running statistics."""
    torch = pytest.importorskip("torch", reason=NEEDS_TORCH)
    from calbench.models.projection import PROJECTIONS, TrainingRows

    rng = np.random.default_rng(5)
    features = torch.tensor(rng.normal(size=(200, 12)) * rng.uniform(0.5, 3, 12) + 40.0)  # float64: exact checks
    torch.manual_seed(0)
    plain = PROJECTIONS[projection](12, 4).double()
    with torch.no_grad():  # BatchNorm's affine parameters away from their (1, 0) initialisation
        plain.bn.weight.uniform_(0.5, 2.0)
        plain.bn.bias.uniform_(-1.0, 1.0)
    fused = copy.deepcopy(plain)
    rows = TrainingRows(features, torch.device("cpu"))
    for index in (torch.randperm(200)[:150], torch.randperm(200)[:99], torch.arange(3), torch.tensor([7, 199, 0, 54])):
        target = torch.randn(index.numel(), 4, dtype=torch.float64)
        outputs = []
        for module, run in ((plain.train(), lambda m: m(features[index])), (fused, lambda m: rows.project(m, index))):
            module.zero_grad()
            out = run(module)
            (out * target).sum().backward()
            outputs.append(out.detach())
        np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-10, atol=1e-10)
        for (name, a), b in zip(plain.named_parameters(), fused.parameters()):
            np.testing.assert_allclose(b.grad, a.grad, rtol=1e-9, atol=1e-9, err_msg=name)
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_allclose(getattr(fused.bn, name), getattr(plain.bn, name), rtol=1e-12, err_msg=name)


def _clusters(n, rng, k=4, h=40, noise=1.0):
    centres = np.random.default_rng(99).normal(size=(k, h)) * 0.4  # the same classes in every split
    y = rng.integers(0, k, n)
    emb = centres[y] + noise * rng.normal(size=(n, h))
    logits = 400.0 * emb @ centres.T / h  # an overconfident linear readout
    return Scores(logits, emb), y


def test_kcal_fits_is_deterministic_and_beats_the_uncalibrated_log_loss():
    pytest.importorskip("torch", reason=NEEDS_TORCH)
    rng = np.random.default_rng(0)
    train, cal, test = (_clusters(n, rng) for n in (600, 300, 400))
    models = [make("kcal", seed=1, **FAST).fit(cal[0], cal[1], train=train) for _ in range(2)]
    probs = models[0].predict_proba(test[0])
    np.testing.assert_array_equal(probs, models[1].predict_proba(test[0]))
    np.testing.assert_allclose(probs.sum(1), 1.0)
    assert models[0].support_.shape == (300, 32) and 0.1 <= models[0].bandwidth_ <= 10
    nll = -np.mean(np.log(np.maximum(probs[np.arange(400), test[1]], 1e-12)))
    assert nll < -np.mean(test[0].log_probs[np.arange(400), test[1]])
    assert (probs.argmax(1) == test[1]).mean() > 0.75
    summary = models[0].fitted_summary()
    assert summary["dim"] == 32 and summary["epochs"] <= FAST["max_epochs"]


def test_projection_training_warns_when_stopped_by_max_epochs_not_by_its_schedule():
    pytest.importorskip("torch", reason=NEEDS_TORCH)
    import warnings

    from calbench.convergence import NotConvergedWarning

    rng = np.random.default_rng(6)
    train, cal = _clusters(200, rng), _clusters(100, rng)
    fast = {**FAST, "steps_per_epoch": 3, "max_epochs": 2}
    with pytest.warns(NotConvergedWarning, match="max_epochs=2 before its schedule's stop"):
        make("kcal", **fast).fit(cal[0], cal[1], train=train)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # min_lr above lr: the schedule stops after the first epoch, no warning
        model = make("kcal", min_lr=2e-3, **fast).fit(cal[0], cal[1], train=train)
    assert model.fitted_summary()["epochs"] == 1


def test_kcal_projection_in_numpy_matches_torch():
    torch = pytest.importorskip("torch", reason=NEEDS_TORCH)
    from calbench.models.projection import SkipELU, export

    torch.manual_seed(0)
    module = SkipELU(6, 3).double()
    module.train()
    module(torch.randn(50, 6, dtype=torch.float64) * 3 + 1)  # move the BatchNorm running statistics
    module.eval()
    x = np.random.default_rng(0).normal(size=(8, 6))
    np.testing.assert_allclose(project(export(module), x), module(torch.tensor(x)).detach().numpy(), rtol=1e-10)


def test_kcal_logits_uses_logits_and_dimension_min_h_32():
    pytest.importorskip("torch", reason=NEEDS_TORCH)
    rng = np.random.default_rng(1)
    train, cal, test = (_clusters(n, rng) for n in (300, 200, 100))
    strip = lambda s: Scores(s[0].logits)  # noqa: E731  (no embeddings)
    model = make("kcal_logits", **FAST).fit(strip(cal), cal[1], train=(strip(train), train[1]))
    assert model.support_.shape == (200, 4)  # d = min(K = 4, 32)
    with pytest.raises(ValueError, match="needs embeddings"):
        make("kcal", **FAST).fit(strip(cal), cal[1], train=(strip(train), train[1]))
    with pytest.raises(ValueError, match="learns from the training split"):
        make("kcal", **FAST).fit(cal[0], cal[1])
    small = (Scores(train[0].logits[:60], train[0].embeddings[:60]), train[1][:60])
    with pytest.raises(ValueError, match="training split has 60 rows, no more than batch_size=64"):
        make("kcal", **FAST).fit(cal[0], cal[1], train=small)


def test_bad_settings_are_named():  # checked before torch is needed
    rng = np.random.default_rng(2)
    train, cal = _clusters(100, rng), _clusters(50, rng)
    with pytest.raises(ValueError, match="^keep: 'first' is not allowed; expected one of 'last', 'best'"):
        make("kcal", keep="first", **FAST).fit(cal[0], cal[1], train=train)


@pytest.mark.workflow
def test_importing_the_methods_does_not_import_torch():
    code = "import sys, calbench.methods as m; m.available(); assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_learning_curve_benchmark_reports_every_size_method_and_metric(monkeypatch):
    """``make bench``'s ``kcal.curve`` (calbench.perf.kcal), at a tiny size."""
    pytest.importorskip("torch", reason=NEEDS_TORCH)
    from calbench.perf import kcal as perf_kcal

    for name, value in {"CURVE_TRAIN": 400, "CURVE_TEST": 300, "CURVE_SIZES": (100,), "CURVE_SEEDS": (0,)}.items():
        monkeypatch.setattr(perf_kcal, name, value)
    monkeypatch.setattr(perf_kcal, "make", lambda method: make(method, **(FAST if method == "kcal" else {})))
    result = perf_kcal.kcal_curve(1)
    for method in perf_kcal.CURVE_METHODS:
        for metric in perf_kcal.CURVE_METRICS:
            assert np.isfinite(result[f"n100.{method}.{metric}"])
    assert result["n100.kcal.acc"] > 0.5
