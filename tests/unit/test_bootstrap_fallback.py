"""Tied scores and the paired bootstrap's fallback (calbench.stats.draws, module docstring). Equal-mass bins of tied
scores with different outcomes have a row-count form: a resample's values equal the metric recomputed on the rows it
drew. An estimator without such a form on some outputs (CV-chosen bins) is recomputed on the same row counts as every
other method's resamples, so that the pairing (Efron & Tibshirani 1993, §16.4) and the percentile intervals (§13.3)
are those of ``recompute``; beyond the budget, left out for the methods that lack the form, with the reason in the
verdicts and the tables."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax

from calbench.metrics import evaluate
from calbench.metrics.binned import equal_mass_stats_resampled
from calbench.report.tables import markdown_table
from calbench.stats.draws import source_draws
from calbench.stats.paired import compare, frame
from calbench.stats.resampling import Resampler, row_counts, seed_rows

ECE = "ece.conf.em15.l1"
CV_ECE = "ece.conf.cv.l1"  # CV-chosen bins: no row-count form on any outputs
METRICS = [ECE, CV_ECE, "ks.conf", "nll"]
N, RESAMPLES = 600, 60


def _outputs():
    """Seed → method → outputs on 600 rows of 3 classes. ``saturated`` and ``rounded`` give half the rows the
    confidence 1 (and 0.9), right on most of them but not all: the equal-mass bins' edges fall inside the ties of
    different outcomes, where no row-count form is exact; ``smooth`` has distinct confidences."""
    outputs = {}
    for seed in (0, 1):
        rng = np.random.default_rng([11, seed])
        z = rng.normal(size=(N, 3)) * 2
        labels = (softmax(z, axis=1).cumsum(axis=1) > rng.random((N, 1))).argmax(axis=1)
        smooth = softmax(1.3 * z, axis=1)
        saturated, rounded = smooth.copy(), smooth.copy()
        tied = np.arange(N) % 2 == 0
        top = smooth.argmax(axis=1)
        saturated[tied] = np.eye(3)[top[tied]]
        rounded[tied] = 0.05 + 0.85 * np.eye(3)[top[tied]]
        outputs[seed] = {name: {"probs": p, "labels": labels, "index": np.arange(N)}
                         for name, p in (("smooth", smooth), ("saturated", saturated), ("rounded", rounded))}
    return outputs


OUTPUTS = _outputs()
METHODS = ["smooth", "saturated", "rounded"]


def _draws(recompute=False, **options):
    return source_draws("tied", [0, 1], METHODS, METRICS, lambda m, seed: OUTPUTS[seed][m], RESAMPLES,
                        recompute=recompute, **options)


def test_tied_outputs_have_a_row_count_form_equal_to_binning_the_rows_drawn():
    """Equal-mass bins (LECE paper §4.2.3) whose edges fall inside ties of different outcomes: the resample's bin
    statistics from its row counts are those of ``bin_stats`` on the rows it drew (row i counts[r, i] times, tied
    rows in row order), for the confidence and for classwise columns."""
    from calbench.metrics.binned import bin_stats

    counts = row_counts(N, 5, (0,))[0]
    for m in METHODS:
        probs, labels = OUTPUTS[0][m]["probs"], OUTPUTS[0][m]["labels"]
        columns = [(probs.max(axis=1)[:, None], (probs.argmax(axis=1) == labels)[:, None] * 1.0),
                   (probs, np.eye(3)[labels])]
        for scores, hits in columns:
            stats = equal_mass_stats_resampled(scores, hits, 15, counts)
            for r in range(5):
                drawn = np.repeat(np.arange(N), counts[r])
                for got, expected in zip(stats, bin_stats(scores[drawn], hits[drawn], 15, "em")):
                    np.testing.assert_allclose(got[r], expected, rtol=0, atol=1e-12)


def test_every_method_gets_the_intervals_and_tests_of_recompute_exactly():
    """By default (within the budget) the draws, intervals and Holm-adjusted p-values of a tied-score source equal
    those of ``recompute`` bit for bit: the same row counts for every method (§16.4), so the fallback changes
    nothing but which methods are recomputed. Every method has an interval (§13.3) around its estimate."""
    default, everything = _draws(), _draws(recompute=True)
    assert default.omitted == {}
    for metric in (ECE, CV_ECE, "ks.conf"):  # ECE, KS: their row-count forms (against recomputing: below)
        np.testing.assert_array_equal(default.draws[metric], everything.draws[metric])
        pd.testing.assert_frame_equal(frame(compare(default, metric)), frame(compare(everything, metric)))
        for verdict in compare(default, metric):
            assert verdict.low <= verdict.estimate <= verdict.high and verdict.note == ""
            assert verdict.tied_with_best is not None


def test_a_recomputed_resample_is_the_metric_of_the_rows_that_resample_drew():
    """Resample r of seed s is the metric (as ``evaluate`` computes it) of the test rows drawn, row i taken
    counts[r, i] times: the row counts every method shares (the pairing of §16.4). The CV-bins ECE is recomputed; the
    equal-mass ECE and KS (Gupta et al. 2021, §4: C_k at the last row of each group of tied scores) come from their
    row-count forms, which ties do not break."""
    draws = _draws()
    counts = np.concatenate(Resampler([seed_rows(OUTPUTS[1]["smooth"], 1)], RESAMPLES).counts(0))
    for r in (0, 17):
        rows = np.repeat(np.arange(N), counts[r])
        out = OUTPUTS[1]["saturated"]
        expected = evaluate(out["probs"][rows], out["labels"][rows], [ECE, CV_ECE, "ks.conf"], seed=1)
        for metric in (ECE, CV_ECE, "ks.conf"):
            assert draws.draws[metric][1, 1, r] == pytest.approx(expected[metric], abs=1e-12)


def test_beyond_the_budget_the_methods_without_the_form_have_no_interval_and_the_table_says_why():
    draws = _draws(budget=0.0)
    assert set(draws.omitted) == {CV_ECE} and "beyond the 0 s budget" in draws.omitted[CV_ECE]
    for m in METHODS:
        verdict = {v.method: v for v in compare(draws, CV_ECE)}[m]
        assert np.isnan(verdict.low) and verdict.note == draws.omitted[CV_ECE]
        assert verdict.tied_with_best is None or verdict.best == m  # untested, not "worse"
    assert all(np.isfinite(v.low) for metric in (ECE, "ks.conf") for v in compare(draws, metric))  # ties: forms
    long = pd.DataFrame([("tied", m, s, metric, draws.estimates[metric][i, j]) for metric in METRICS
                         for i, m in enumerate(METHODS) for j, s in enumerate(draws.seeds)],
                        columns=["source", "method", "seed", "metric", "value"]).assign(test_set="clean")
    table = markdown_table(long, CV_ECE, METHODS, frame([v for m in METRICS for v in compare(draws, m)]))
    assert "no marks: not tested here" in table and "beyond the budget of recomputing it" in table  # no cell has one
