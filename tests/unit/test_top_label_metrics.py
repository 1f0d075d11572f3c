"""The vectorised top-label ECE (metrics/top_label.py) equals the per-predicted-class loop it replaces
(Gupta & Ramdas 2022 Eq. 3: Σ_l (n_l / n)·ECE within the rows predicted l)."""

import numpy as np
import pytest

from calbench.metrics import evaluate
from calbench.metrics.binned import binned_ece
from calbench.metrics.smooth_ece import top_label_average
from calbench.metrics.top_label import top_label_binned_ece


@pytest.mark.parametrize("scheme", ["ew", "em"])
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_equals_the_loop_over_predicted_classes(scheme, norm):
    rng = np.random.default_rng(7)
    for trial in range(40):
        n, k, n_bins = int(rng.integers(1, 60)), int(rng.integers(2, 6)), int(rng.integers(1, 8))
        z = rng.normal(size=(n, k)) * 2
        z = np.round(z) if trial % 3 == 0 else z  # tied confidences
        probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        labels = rng.integers(0, k, n)
        loop = top_label_average(probs, labels, lambda c, h, b=n_bins: float(binned_ece(c[:, None], h[:, None], b,
                                                                                   scheme, norm)[0]))
        assert top_label_binned_ece(probs, labels, n_bins, scheme, norm) == pytest.approx(loop, abs=1e-14)


def test_hand_checked_value_and_metric_id():
    # class 0 predicted on rows 0-1 (conf 0.9, 0.7, hits 1, 0) and class 1 on row 2 (conf 0.6, hit 1); one bin:
    # class 0 |0.5 − 0.8| = 0.3, class 1 |1 − 0.6| = 0.4; weighted (2·0.3 + 1·0.4) / 3 = 1/3.
    probs = np.array([[0.9, 0.1], [0.7, 0.3], [0.4, 0.6]])
    labels = np.array([0, 1, 1])
    assert top_label_binned_ece(probs, labels, 1, "em", "l1") == pytest.approx(1 / 3, abs=1e-15)
    assert evaluate(probs, labels, ["ece.tl.em1.l1"])["ece.tl.em1.l1"] == pytest.approx(1 / 3, abs=1e-15)
