"""Venn-Abers (methods/venn_abers.py) against its definition: isotonic regression refitted with the test score
appended labelled 0 and 1 (Vovk & Petej 2014), here by scikit-learn per test point."""

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from calbench.methods import make
from calbench.methods.venn_abers import ivap_predict, ivap_table, merge


def brute_force(cal, hits, s):
    """(p₀, p₁) by definition: one isotonic fit per label with (s, label) appended."""
    return tuple(IsotonicRegression().fit(np.append(cal, s), np.append(hits, label)).predict([s])[0]
                 for label in (0, 1))


def test_hand_checked_example():
    # (0.1, 0), (0.2, 1), (0.3, 0) and s = 0.25: with label 0 PAV pools {1, 0, 0} → 1/3; with label 1 it
    # pools {1, 1, 0} → 2/3; merged p = (2/3) / (1 − 1/3 + 2/3) = 1/2.
    p0, p1 = ivap_predict(*ivap_table(np.array([0.1, 0.2, 0.3]), np.array([0.0, 1.0, 0.0])), np.array([0.25]))
    assert p0[0] == pytest.approx(1 / 3, abs=1e-15) and p1[0] == pytest.approx(2 / 3, abs=1e-15)
    assert merge(p0, p1)[0] == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize("ties", [False, True])
def test_equals_refitting_isotonic_regression_per_test_point(ties):
    rng = np.random.default_rng(1 + ties)
    for _ in range(25):
        n = int(rng.integers(1, 14))
        cal = rng.integers(0, 5, n) / 4.0 if ties else rng.random(n)
        hits = (rng.random(n) < cal).astype(np.float64)
        test = np.concatenate([cal, rng.random(4), rng.integers(0, 5, 3) / 4.0, [-0.5, 1.5]])
        p0, p1 = ivap_predict(*ivap_table(cal, hits), test)
        expected = np.array([brute_force(cal, hits, s) for s in test])
        np.testing.assert_allclose(p0, expected[:, 0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(p1, expected[:, 1], rtol=0, atol=1e-12)
        assert np.all(p0 <= p1)


def test_multiclass_rows_are_the_normalised_merged_one_vs_rest_probabilities():
    rng = np.random.default_rng(3)
    z_cal, z_test = rng.normal(size=(40, 3)) * 2, rng.normal(size=(7, 3)) * 2
    y = np.concatenate([np.arange(3), rng.integers(0, 3, 37)])
    cal = make("venn_abers").fit(z_cal, y)
    out = cal.predict_proba(z_test)
    p_cal = np.exp(z_cal) / np.exp(z_cal).sum(1, keepdims=True)
    p_test = np.exp(z_test) / np.exp(z_test).sum(1, keepdims=True)
    expected = np.array([[merge(*map(np.array, brute_force(p_cal[:, j], (y == j).astype(float), p_test[i, j])))
                          for j in range(3)] for i in range(7)])
    np.testing.assert_allclose(out, expected / expected.sum(1, keepdims=True), rtol=0, atol=1e-12)
    assert np.all(out > 0) and np.allclose(out.sum(1), 1.0, rtol=0, atol=1e-12)


def test_chains_and_refuses_a_missing_class():
    rng = np.random.default_rng(4)
    z, y = rng.normal(size=(30, 3)), rng.integers(0, 2, 30)
    with pytest.raises(ValueError, match="every class"):
        make("venn_abers").fit(z, y)
    y[:3] = [0, 1, 2]
    out = make("ts+venn_abers").fit(z, y).predict_proba(z)
    assert np.allclose(out.sum(1), 1.0)
