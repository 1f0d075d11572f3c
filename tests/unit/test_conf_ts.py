"""ConfTS (Xi et al., TMLR 2025, §5): its loss against the paper's definition, its fit, and the paper's finding that
it gives smaller adaptive sets than log-loss temperature scaling; and the conformal metrics in the tables'
paired bootstrap."""

import numpy as np
import pytest

from calbench.methods import conf_ts as module
from calbench.methods import make
from calbench.metrics import evaluate
from conftest import shared_data


def test_loss_is_the_mean_squared_efficiency_gap():
    # part A's APS scores (mass up to and including the true label) give τ; part B's gaps τ − S(x, y) are squared
    logits = np.log(np.array([[0.6, 0.3, 0.1], [0.5, 0.4, 0.1], [0.2, 0.7, 0.1], [0.7, 0.2, 0.1],
                              [0.1, 0.1, 0.8]]))
    labels = np.array([0, 1, 0, 0, 2])
    part_a, part_b = np.array([0, 1, 2]), np.array([3, 4])
    # part A scores: 0.6, 0.9, 0.9; n = 3, α = 0.5 → ⌈4 · 0.5⌉ = 2nd smallest = 0.9; part B: 0.7 and 0.8
    expected = np.mean([(0.9 - 0.7) ** 2, (0.9 - 0.8) ** 2])
    assert module.efficiency_loss(logits, labels, 1.0, part_a, part_b, 0.5) == pytest.approx(expected)


def _task(n=3000, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, classes)) * 4.0
    probs = np.exp(logits / 2.0) / np.exp(logits / 2.0).sum(1, keepdims=True)
    labels = (probs.cumsum(1) > rng.random(n)[:, None]).argmax(1)
    return logits, np.minimum(labels, classes - 1)


@pytest.mark.filterwarnings("ignore:conf_ts was fitted without")
def test_fit_is_seeded_and_keeps_the_argmax():
    logits, labels = _task()
    first = make("conf_ts", seed=3).fit(logits, labels)
    assert make("conf_ts", seed=3).fit(logits, labels).temperature_ == first.temperature_
    assert np.array_equal(first.predict_proba(logits).argmax(1), logits.argmax(1))
    with pytest.raises(ValueError, match="at least 4 calibration rows"):
        make("conf_ts").fit(logits[:3], labels[:3])


def test_descent_stops_where_the_authors_rule_stops_it():
    # gradient descent on log T from log 1.5, step 0.8, stopped when a step moves log T by less than 0.05
    logits, labels = _task()
    fitted = make("conf_ts", seed=1).fit(logits, labels)
    order = np.random.default_rng([1, 1309]).permutation(labels.size)
    part_a, part_b = order[:1500], order[1500:]
    log_t = np.log(fitted.temperature_)

    def loss(x):
        return module.efficiency_loss(logits, labels, np.exp(x), part_a, part_b, 0.1)

    gradient = (loss(log_t + module.H) - loss(log_t - module.H)) / (2 * module.H)
    assert fitted.temperature_ != pytest.approx(module.START_T)
    # the last step was shorter than the threshold, so the point before it is within STOP of the fitted one
    previous = log_t + module.STEP * gradient  # a first-order estimate of the step that ended the descent
    assert abs(previous - log_t) < 2 * module.STOP


@pytest.mark.parametrize("network", ["cifar100_resnet-20", "cifar100_vgg19_bn"])
def test_conf_ts_gives_smaller_aps_sets_than_ts(network):
    # Xi et al. 2025, Table 2: ConfTS lowers APS's mean set size below TS's at α = 0.1 (ImageNet in the paper)
    folder = shared_data("logits", network)
    logits = np.load(folder / "scores.npy").astype(np.float64)
    labels = np.load(folder / "targets.npy")
    order = np.random.default_rng(0).permutation(labels.size)
    cal, test = order[:5000], order[5000:]
    sizes = {}
    for method in ("ts", "conf_ts"):
        probs = make(method).fit(logits[cal], labels[cal]).predict_proba(logits[test])
        sizes[method] = evaluate(probs, labels[test], ["set_size.aps.a10"], seed=0)["set_size.aps.a10"]
    assert sizes["conf_ts"] < sizes["ts"]


def test_conformal_metrics_get_paired_bootstrap_draws():
    from calbench.stats.draws import source_draws

    logits, labels = _task(n=800)
    test = np.arange(400, 800)
    outputs = {m: make(m).fit(logits[:400], labels[:400]).predict_proba(logits[test]) for m in ("ts", "conf_ts")}

    def load(method, seed):
        return {"probs": outputs[method], "labels": labels[test], "index": test}

    draws = source_draws("toy", [0], ["ts", "conf_ts"], ["set_size.aps.a10", "cc_gap.raps.a10"], load, resamples=50,
                         recompute=False)
    for metric in ("set_size.aps.a10", "cc_gap.raps.a10"):
        assert draws.draws[metric].shape == (2, 1, 50)
        assert np.all(np.isfinite(draws.draws[metric]))
