"""Binned ECE, proper scores and true CE (the skeleton's metrics)."""

import numpy as np
import pandas as pd
import pytest

from calbench.metrics import evaluate, lookup
from calbench.metrics.binning import equal_mass_bins, equal_width_bins
from calbench.metrics.ece import classwise_ece, confidence_ece, top_label_ece
from conftest import shared_data

# LECE paper Table 3, "uncal" column: confidence ECE ×10², 15 equal-size bins, on the NN_calibration test logits.
LECE_TABLE3_UNCAL = {
    "probs_densenet40_c10_logits.csv": 5.49,
    "probs_resnet110_c10_logits.csv": 4.75,
    "probs_densenet40_c100_logits.csv": 21.16,
    "probs_resnet110_c100_logits.csv": 18.48,
}


@pytest.mark.parametrize("name, expected", LECE_TABLE3_UNCAL.items())
def test_confidence_ece_equal_mass_reproduces_lece_table3_uncal(name, expected):
    rows = pd.read_csv(shared_data("toplabel", name))
    value = top_label_ece(rows["confidence"], rows["true_label"] == rows["pred_label"], n_bins=15, scheme="em")
    assert round(100 * value, 2) == expected


def test_bin_edges_put_zero_and_one_in_the_outer_bins():
    assert equal_width_bins(np.array([0.0, 1.0, 0.5, 1 / 15]), 15).tolist() == [0, 14, 7, 1]


def test_equal_mass_bins_split_sorted_values_like_array_split():
    values = np.array([0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8])
    bins = equal_mass_bins(values, 3)  # sizes 3, 2, 2 over the sorted order
    order = np.argsort(values)
    assert bins[order].tolist() == [0, 0, 0, 1, 1, 2, 2]
    two_columns = equal_mass_bins(np.column_stack([values, -values]), 3)
    assert two_columns[:, 0].tolist() == bins.tolist()
    assert two_columns[np.argsort(-values), 1].tolist() == [0, 0, 0, 1, 1, 2, 2]


def test_one_bin_ece_is_the_gap_between_mean_confidence_and_accuracy():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), size=500)
    labels = rng.integers(4, size=500)
    gap = abs(probs.max(1).mean() - (probs.argmax(1) == labels).mean())
    for scheme in ("ew", "em"):
        assert confidence_ece(probs, labels, 1, scheme) == pytest.approx(gap)


def test_classwise_ece_hand_computed():
    # Two classes, one bin each: class 0 mean prob 0.6 vs frequency 0.5; class 1 mean 0.4 vs 0.5.
    probs = np.array([[0.8, 0.2], [0.4, 0.6]])
    labels = np.array([0, 1])
    assert classwise_ece(probs, labels, 1, "ew") == pytest.approx(0.1)
    # Dirichlet paper Eq. 4 with 2 equal-width bins: each class has one point per bin, gaps |1-.8|,|0-.4|
    # for class 0 ([0.4] in bin 0, [0.8] in bin 1) → (0.5·0.4 + 0.5·0.2) = 0.3; class 1 symmetric → 0.3.
    assert classwise_ece(probs, labels, 2, "ew") == pytest.approx(0.3)


def test_l2_norm_and_mce():
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.7, 0.3], [0.95, 0.05]])
    labels = np.array([0, 1, 0, 0])
    values = evaluate(probs, labels, ["ece.conf.ew2.l2", "mce.conf.ew2", "ece.conf.ew2.l1"])
    # Bin 1 (conf ≥ 0.5 → all four rows): conf mean 0.7875, accuracy 0.75 → gap 0.0375.
    assert values["ece.conf.ew2.l1"] == pytest.approx(0.0375)
    assert values["ece.conf.ew2.l2"] == pytest.approx(0.0375)
    assert values["mce.conf.ew2"] == pytest.approx(0.0375)


def test_proper_scores_and_accuracy():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    labels = np.array([0, 1])
    values = evaluate(probs, labels, ["acc", "nll", "brier", "brier.mean", "brier.top"])
    assert values["acc"] == 0.5
    assert values["nll"] == pytest.approx(-(np.log(0.7) + np.log(0.1)) / 2)
    brier = ((0.3**2 + 0.2**2 + 0.1**2) + (0.1**2 + 0.9**2 + 0.8**2)) / 2  # summed over classes (LECE paper)
    assert values["brier"] == pytest.approx(brier)
    assert values["brier.mean"] == pytest.approx(brier / 3)
    assert values["brier.top"] == pytest.approx(((0.7 - 1) ** 2 + (0.8 - 0) ** 2) / 2)


def test_true_calibration_errors_follow_the_lece_code_definition():
    probs = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]])
    true = np.array([[0.4, 0.4, 0.2], [0.1, 0.2, 0.7]])
    values = evaluate(probs, np.array([0, 2]), ["true_ce.conf.l1", "true_ce.cw.l1"], true_probs=true)
    assert values["true_ce.conf.l1"] == pytest.approx((0.1 + 0.1) / 2)
    assert values["true_ce.cw.l1"] == pytest.approx((0.1 + 0.1 + 0 + 0.1 + 0 + 0.1) / 6)


def test_unknown_metric_and_missing_true_probs_are_clear_errors():
    probs, labels = np.array([[0.6, 0.4]]), np.array([0])
    with pytest.raises(ValueError, match="unknown metric id 'ece.top.em15.l1'; closest known ids: ece.tl.em15.l1"):
        evaluate(probs, labels, ["ece.top.em15.l1"])
    with pytest.raises(ValueError, match="needs the true calibration map"):
        evaluate(probs, labels, ["true_ce.cw.l1"])
    with pytest.raises(ValueError, match=r"labels: values must lie in \[0, 2\)"):
        evaluate(probs, np.array([2]), ["acc"])


def test_metric_metadata_drives_table_display():
    family, groups = lookup("ece.cw.em15.l1")
    assert (family.scale, family.decimals) == (100.0, 2)
    assert (groups["target"], groups["binning"], groups["norm"]) == ("cw", "em15", "l1")
    assert lookup("acc")[0].higher_is_better


def test_a_mistyped_metric_id_gets_the_closest_known_ids():
    from calbench.metrics.registry import _FAMILIES, closest_ids, example_ids

    for family in _FAMILIES:  # every family spells out ids that its own pattern accepts
        assert example_ids(family) and all(lookup(i)[0].pattern is family.pattern for i in example_ids(family))
    with pytest.raises(ValueError, match=r"unknown metric id 'ece'; closest known ids: ece\.conf\.ew15\.l1"):
        lookup("ece")
    assert closest_ids("nl") == ["nll"]
    assert closest_ids("ece.conf.em15")[:2] == ["ece.conf.em15.l1", "ece.conf.em15.l1.debiased"]
    assert closest_ids("brier.avg")[0] == "brier.mean"
