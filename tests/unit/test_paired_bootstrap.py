"""The paired bootstrap of recommend, the tables and the critical-difference marks (calbench.stats):
coverage on sources with a known answer, one seed and several, range-respecting intervals, Holm's ties."""

import numpy as np
import pytest
from scipy.special import softmax

from calbench.stats.draws import source_draws
from calbench.stats.paired import bootstrap_p_values, compare, format_p, holm, pooled

CLASSES = 4


def _sample(rng, n, sharpen=1.5):
    """Rows of a 4-class task: true probabilities softmax(z), an overconfident model softmax(1.5 z), labels."""
    z = rng.normal(size=(n, CLASSES)) * 1.5
    truth = softmax(z, axis=1)
    labels = (truth.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return softmax(sharpen * z, axis=1), truth, labels


@pytest.fixture(scope="module")
def population():
    """The model's population NLL and accuracy (400,000 rows: their error is far below the intervals' width)."""
    model, truth, _ = _sample(np.random.default_rng(2024), 400_000)
    nll = float(-(truth * np.log(model)).sum(axis=1).mean())
    acc = float(truth[np.arange(len(truth)), model.argmax(axis=1)].mean())
    return {"nll": nll, "acc": acc}


def _draws(rep, seeds, n, metrics, resamples):
    data = {}
    for s in range(seeds):
        model, truth, labels = _sample(np.random.default_rng([rep, s, seeds]), n)
        data["model", s] = {"probs": model, "labels": labels, "index": np.arange(n)}
        data["truth", s] = {"probs": truth, "labels": labels, "index": np.arange(n)}
    return source_draws("synthetic", list(range(seeds)), ["model", "truth"], metrics,
                        lambda method, seed: data[method, seed], resamples)


@pytest.mark.parametrize("seeds", [1, 3])
def test_the_95_percent_intervals_cover_the_population_value_about_95_percent_of_the_time(population, seeds):
    """Nominal 95 % percentile intervals (Efron & Tibshirani §13.3) of NLL and accuracy of a fixed model on fresh
    test rows: over 300 repetitions the coverage lies within [92, 98] % (a binomial standard error of 1.3 %),
    pooled over 1 seed and over 3 seeds (whose spread is row noise only: the seed stage must not count it twice)."""
    reps, covered = 300, {"nll": 0, "acc": 0}
    for rep in range(reps):
        draws = _draws(rep, seeds, 240 if seeds == 1 else 80, ["nll", "acc"], 300)
        for metric in covered:
            (verdict,) = [v for v in compare(draws, metric) if v.method == "model"]
            covered[metric] += verdict.low <= population[metric] <= verdict.high
    rates = {m: c / reps for m, c in covered.items()}
    assert all(0.92 <= r <= 0.98 for r in rates.values()), rates


@pytest.mark.parametrize("seeds", [1, 2, 3])
def test_ece_intervals_never_go_below_zero_and_hold_the_estimate(seeds):
    """A calibrated model on 100 rows per seed, whose ECE estimates lie near 0: every interval bound is ≥ 0, and
    the bias-shifted intervals hold the estimate (unshifted percentiles of binned ECE lie above it)."""
    draws = _draws(0, seeds, 100, ["ece.conf.em15.l1", "ece.cw.ew15.l1", "ece.conf.em15.l1.debiased"], 200)
    for metric in draws.estimates:
        for verdict in compare(draws, metric):
            assert 0 <= verdict.low <= verdict.estimate <= verdict.high, (metric, verdict)


def test_pooling_seeds_adds_the_between_seed_spread_that_row_noise_does_not_explain():
    """Two seeds 1.0 apart with row noise of sd 0.01: the pooled resamples' spread is the seeds'; seeds that differ
    by row noise only keep the row bootstrap's spread of a mean over 2 seeds."""
    rng = np.random.default_rng(0)
    row_noise = rng.normal(0, 0.01, size=(2, 2000))
    picks = rng.integers(2, size=(2000, 2))
    far = pooled(np.array([1.0, 2.0]), np.array([1.0, 2.0])[:, None] + row_noise, picks)
    assert 0.3 < far.std() < 0.6
    near = pooled(np.array([1.0, 1.005]), np.array([1.0, 1.005])[:, None] + row_noise, picks)
    assert near.std() == pytest.approx(0.01 / np.sqrt(2), rel=0.1)


def test_p_values_count_the_resamples_and_never_go_below_their_resolution():
    """Davison & Hinkley 1997 eq. 4.11: p = (1 + #{|d* − mean d*| ≥ |d|}) / (R + 1), two-sided; identical outputs
    are tied (p = 1), and a difference no resample reaches gets 1/(R + 1), printed "p < 1/R", never 0 or 1e-279."""
    spread = np.random.default_rng(0).normal(size=4000)
    assert bootstrap_p_values(np.float64(0.0), np.zeros(99)) == 1.0
    assert bootstrap_p_values(np.float64(0.1), np.zeros(999)) == pytest.approx(1 / 1000)
    assert bootstrap_p_values(np.float64(1.96), 1.96 + spread) == pytest.approx(0.05, abs=0.01)
    assert bootstrap_p_values(np.float64(-1.96), spread) == bootstrap_p_values(np.float64(1.96), spread)
    assert bootstrap_p_values(np.float64(50.0), spread) == 1 / 4001
    assert format_p(1 / 1001, 1000) == "p < 0.001" and format_p(0.0123, 1000) == "p = 0.012"
    assert format_p(holm(np.array([1 / 1001]))[0], 1000) == "p < 0.001"


def test_holm_adjusts_step_down_and_keeps_the_order():
    """Holm (1979): the i-th smallest of k p-values times k − i + 1, made monotone."""
    np.testing.assert_allclose(holm(np.array([0.04, 0.01, 0.03, 0.5])), [0.09, 0.04, 0.09, 0.5])


def test_the_tied_set_never_contradicts_the_p_values_and_the_same_resamples_pair_the_methods():
    """Methods whose outputs differ by little, much, or not at all from the best: every tied method has an adjusted
    p ≥ α and every other one p < α; a copy of the best is tied with p = 1 (identical resamples, so its
    differences are all 0)."""
    rng = np.random.default_rng(5)
    model, truth, labels = _sample(rng, 600)
    outputs = {"truth": truth, "copy": truth.copy(), "model": model, "uniform": np.full_like(truth, 1 / CLASSES),
               "slightly": softmax(1.05 * np.log(truth), axis=1)}
    draws = source_draws("s", [0], list(outputs), ["nll"],
                         lambda m, seed: {"probs": outputs[m], "labels": labels, "index": np.arange(600)}, 500)
    verdicts = {v.method: v for v in compare(draws, "nll", alpha=0.05)}
    assert verdicts["truth"].best == "truth" and verdicts["copy"].p_value == 1.0 and verdicts["copy"].tied_with_best
    assert not verdicts["uniform"].tied_with_best and not verdicts["model"].tied_with_best
    for verdict in list(verdicts.values())[1:]:
        assert verdict.tied_with_best == (verdict.p_value >= 0.05)


def test_a_test_row_set_that_differs_between_methods_is_an_error():
    probs = np.full((10, 2), 0.5)
    outputs = {"a": {"probs": probs, "labels": np.zeros(10, int), "index": np.arange(10)},
               "b": {"probs": probs, "labels": np.zeros(10, int), "index": np.arange(10, 20)}}
    with pytest.raises(ValueError, match="the test rows of b differ from those of a"):
        source_draws("s", [0], ["a", "b"], ["nll"], lambda m, seed: outputs[m], 20)


def test_critical_difference_labels_count_the_sources_tied_with_the_best():
    import pandas as pd

    from calbench.stats.ranks import best_group

    verdicts = pd.DataFrame({"source": ["a", "a", "b", "b"], "metric": "nll", "method": ["ts", "vs", "ts", "vs"],
                             "tied_with_best": [True, True, True, False], "p_value": [np.nan, 0.3, np.nan, 0.01]})
    assert best_group(verdicts, "nll") == {"ts": "2/2", "vs": "1/2"}
    only_a = verdicts.drop(index=3)  # vs ran on source a only (a method that needs embeddings runs on fewer)
    assert best_group(only_a, "nll") == {"ts": "2/2", "vs": "1/1"}
    assert best_group(verdicts.assign(p_value=np.nan), "nll") is None and best_group(verdicts, "acc") is None


def test_estimators_without_a_row_weighted_form_are_resampled_only_when_asked():
    """skce.ul has no row-weighted form for any outputs: left unresampled (no interval, no test, a note saying
    why) unless ``recompute``, whatever the budget."""
    model, _, labels = _sample(np.random.default_rng(3), 200)
    for recompute in (False, True):
        draws = source_draws("s", [0], ["a", "b"], ["skce.ul", "nll"],
                             lambda m, seed: {"probs": model, "labels": labels, "index": np.arange(200)}, 30,
                             recompute=recompute, budget=1e6)
        assert ("skce.ul" in draws.draws) == recompute and "nll" in draws.draws
        best, other = compare(draws, "skce.ul")
        assert np.isnan(best.low) != recompute and best.tied_with_best
        assert other.tied_with_best if recompute else other.tied_with_best is None  # untested, not "worse"
        assert ("--recompute" in other.note) != recompute
