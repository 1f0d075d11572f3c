"""The row-weighted forms of the metrics (calbench.metrics.bootstrap.values_from_counts) give the values they gave
before their work was shared across metrics, methods and resamples (one float and lane form of the counts per
count matrix, the conformal sets' sums and KS in compiled passes): ``tests/golden/resampled_forms.json`` holds the
values of every id below on three small cases, written by the implementation of commit 7d017d0, and each value
must agree to 1e-12 (relative; integer row counts gave them bit for bit when measured, float weights to 2e-13,
from the order of summation).

The conformal ids are the Angelopoulos et al. 2021 (§3, SSCV Eq. 6) and Dabah & Tirer 2025 (§2) metrics on the
divisions of docs/conformal.md; the binned ones the LECE paper's (§4.2.3) and the KCal paper's (§4.3) ECEs,
Nixon et al. 2019's ACE and Gupta et al. 2021's KS (§4)."""

import json
from pathlib import Path

import numpy as np
import pytest

from calbench.metrics import lookup
from calbench.metrics.bootstrap import values_from_counts
from calbench.metrics.registry import MetricContext

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "resampled_forms.json"
IDS = ["acc", "nll", "brier", "ece.conf.em15.l1", "ece.conf.ew15.l1", "ece.cw.em15.l1", "ece.cw.ew15.l1",
       "ece.cw.em15.l2.debiased", "mce.conf.ew15", "ece.cw.em20.l1.kcal", "ace.cw.em15", "ace.conf.em15", "ks.conf",
       "ks.cw", "sce.cw.em15.over", "sce.conf.em15.under",
       *[f"{kind}.{construction}.a10.div5" for construction in ("lac", "lac_cc", "aps", "aps_nr", "raps", "raps_nr")
         for kind in ("coverage", "coverage_gap", "set_size", "set_size_median", "sscv", "cc_gap", "cc_gap_top")]]
#: name → (seed, rows, classes, resamples, float weights instead of row counts)
CASES = {"ints_7": (0, 300, 7, 40, False), "ints_12": (1, 500, 12, 30, False), "weights_7": (2, 300, 7, 40, True)}


def case_inputs(seed, rows, classes, resamples, weights):
    """Softmax probabilities of Gaussian logits, labels drawn from them, and multinomial row counts (times uniform
    weights in [0.5, 1.5] per row for ``weights``, as a label-shifted set's)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(rows, classes)) * 2.0
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = (probs.cumsum(1) > rng.random((rows, 1))).argmax(1)
    counts = rng.multinomial(rows, np.full(rows, 1 / rows), size=resamples)
    return probs, labels, counts * rng.uniform(0.5, 1.5, size=rows) if weights else counts


def case_values(name: str) -> dict[str, np.ndarray]:
    """``values_from_counts`` of every id of :data:`IDS` on case ``name`` (metric seed 3)."""
    probs, labels, counts = case_inputs(*CASES[name])
    return values_from_counts(MetricContext(probs, labels, seed=3), [(m, *lookup(m)) for m in IDS], counts,
                              recompute=False)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_row_weighted_form_gives_the_values_it_gave_before(name):
    golden = json.loads(GOLDEN.read_text())[name]
    found = case_values(name)
    assert sorted(found) == sorted(IDS) == sorted(golden)
    for metric_id in IDS:
        np.testing.assert_allclose(found[metric_id], golden[metric_id], rtol=1e-12, atol=1e-15, err_msg=metric_id)


def test_noise_floors_of_several_estimators_at_once_equal_each_alone():
    """The noise floor (the estimator on labels drawn from the model's own probabilities; Kumar et al. 2019, §5)
    of estimators evaluated on one context per label draw, sharing their sorted columns and bin statistics, equals
    each estimator's floor computed alone, bit for bit."""
    from calbench.stats.noise_floor import noise_floor, noise_floors

    probs = [case_inputs(4, 400, 6, 1, False)[0], case_inputs(5, 300, 6, 1, False)[0]]
    ids = ["ece.cw.em15.l1", "ace.cw.em15", "ece.conf.em15.l1", "sce.conf.em15.over", "ece.cw.em20.l1.kcal"]
    together = noise_floors(ids, probs)
    assert together == {metric_id: noise_floor(metric_id, probs) for metric_id in ids}
