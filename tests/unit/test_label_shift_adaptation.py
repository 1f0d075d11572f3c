"""The adaptation's estimators and scores (docs/label_shift.md): BBSE-soft and RLLS (Alexandari, Kundaje & Shrikumar
2020 §4; Azizzadenesheli et al. 2019, Eq. 4), the weight floor, collapse, Δ metrics and their directions, and the
adapt-or-not verdict in the tables and ``calbench recommend --under-label-shift``."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax

from calbench.metrics import evaluate, lookup
from calbench.metrics import label_shift as ls
from calbench.metrics.label_shift import LabelShiftInputs, bbse_weights, collapsed, estimate
from calbench.metrics.rlls import regulariser, rlls_weights
from calbench.report.label_shift_adapt import ADAPT, DO_NOT, UNCLEAR, adapt_markdown, verdict
from conftest import write_label_shift_run

K = 4


def _task(priors, n, seed, sharpness=1.0):
    """Rows of K unit-variance Gaussian classes (means the unit vectors) drawn with ``priors``; the exact posteriors
    under uniform priors, their log-odds scaled by ``sharpness`` (< 1: under-confident)."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(K, size=n, p=priors)
    x = np.eye(K)[labels] + rng.normal(size=(n, K))
    return softmax(-0.5 * sharpness * ((x[:, None, :] - np.eye(K)[None]) ** 2).sum(-1), axis=1), labels


def _inputs(cal, labels, true_priors=None):
    return LabelShiftInputs.from_calibration(cal, labels, true_priors)


def test_bbse_soft_inverts_the_soft_confusion_matrix_exactly():
    # Alexandari et al. (2020) §4, BBSE-soft: C[i, j] = mean p_i·[y = j]; a target whose rows are the calibration
    # rows re-weighted by w[y] has mean probability C w, so w = C⁻¹ μ̂ recovers w exactly
    cal, labels = _task(np.full(K, 1 / K), 3000, 0)
    inputs = _inputs(cal, labels)
    w = np.array([2.0, 0.5, 1.2, 0.3])
    w /= inputs.label_frequencies @ w
    found = bbse_weights(cal, inputs.soft_confusion, weights=w[labels][None, :], soft=True)[0]
    np.testing.assert_allclose(found, w, atol=1e-10)


def test_rlls_is_zero_below_its_regulariser_and_bbse_without_it():
    # Azizzadenesheli et al. (2019) Eq. 4: θ = 0 (w = 1) while ‖Cᵀb‖/‖b‖ ≤ Δ_C; with a vanishing regulariser the
    # unconstrained minimiser is C⁻¹ b, i.e. BBSE's weights where they are all positive
    cal, labels = _task(np.full(K, 1 / K), 3000, 1)
    inputs = _inputs(cal, labels)
    mean = inputs.source_priors
    shifted = mean + 1e-3 * np.array([1, -1, 0, 0])
    b = shifted - mean
    ratio = np.linalg.norm(inputs.soft_confusion.T @ b) / np.linalg.norm(b)  # scale-free: the norms are not squared
    alpha = 1.01 * ratio / regulariser(K, inputs.cal_rows, alpha=1.0)
    np.testing.assert_array_equal(rlls_weights(inputs.soft_confusion, shifted, mean, inputs.cal_rows, alpha=alpha),
                                  np.ones((1, K)))
    below = rlls_weights(inputs.soft_confusion, shifted, mean, inputs.cal_rows, alpha=alpha / 2)[0] - 1
    objective = lambda t: np.linalg.norm(inputs.soft_confusion @ t - b) + regulariser(K, 3000, alpha / 2) * np.linalg.norm(t)  # noqa: E731,E501
    assert np.abs(below).max() > 0 and objective(below) < objective(np.zeros(K))
    np.testing.assert_array_equal(rlls_weights(inputs.soft_confusion, mean, mean, inputs.cal_rows), np.ones((1, K)))
    target, _ = _task(np.array([0.4, 0.3, 0.2, 0.1]), 4000, 2)
    predicted = target.mean(axis=0)
    bbse = bbse_weights(target, inputs.soft_confusion, soft=True)
    found = rlls_weights(inputs.soft_confusion, predicted, mean, inputs.cal_rows, alpha=1e-9)[0]
    np.testing.assert_allclose(found, bbse, atol=1e-6)
    # the authors' regulariser: δ = 0.05, α = 0.01, n the calibration rows
    log_term = 2 * np.log(2 * 10 / 0.05)
    assert regulariser(10, 5000) == pytest.approx(0.01 * 3 * (log_term / 15000 + np.sqrt(log_term / 5000)))


def test_a_class_estimated_absent_costs_a_floored_log_loss_not_the_clip():
    # BBSE's weights set to 0 sent every row of that class to the log-loss clip (34.5 nats); floored at
    # WEIGHT_FLOOR inside the adaptation the row keeps a finite cost, and floor_share says how many rows are there
    confusion = np.diag(np.full(K, 1 / K))  # a perfect classifier on the calibration split
    inputs = LabelShiftInputs(np.full(K, 1 / K), confusion, np.array([0.5, 0.3, 0.2, 0.0]), confusion, 1000)
    probs = np.array([[0.7, 0.1, 0.1, 0.1]] * 5 + [[0.1, 0.7, 0.1, 0.1]] * 3 + [[0.3, 0.3, 0.3, 0.1]] * 2)
    labels = np.array([0] * 5 + [1] * 3 + [2] * 2)  # class 2 present but never predicted: BBSE's w₂ = 0
    values = evaluate(probs, labels, ["nll.bbse", "floor_share.bbse", "acc.bbse"], label_shift=inputs)
    assert values["floor_share.bbse"] == pytest.approx(0.2)
    adapted = estimate(probs, inputs, "bbse")[1]
    # w = C⁻¹ μ̂ = K · (0.7, 0.3, 0, 0): rows 8-9 predict class 0 (the first maximum); classes 2 and 3 floored
    w = np.array([K * 0.7, K * 0.3, ls.WEIGHT_FLOOR, ls.WEIGHT_FLOOR])
    assert adapted[8, 2] == pytest.approx(0.3 * w[2] / (probs[8] @ w), rel=1e-9)
    assert values["nll.bbse"] == pytest.approx(-np.mean(np.log(adapted[np.arange(10), labels])))
    assert values["nll.bbse"] < 5  # the clip would give ≥ 0.2 · 34.5


def test_em_collapse_is_flagged():
    # the case: under-confident outputs under tweak-one ρ = 0.9 drive EM to put the whole prior on one class;
    # acc.em then reads 0.9 exactly, which the flag marks as a collapse rather than a clean number
    true = np.array([0.9, 0.1 / 3, 0.1 / 3, 0.1 / 3])
    cal, cal_labels = _task(np.full(K, 1 / K), 4000, 3, sharpness=0.3)
    probs, labels = _task(true, 4000, 4, sharpness=0.3)
    inputs = _inputs(cal, cal_labels, np.bincount(labels, minlength=K) / labels.size)
    values = evaluate(probs, labels, ["acc.em", "collapse.em", "prior_mse.em", "prior_mse.bbse_soft"],
                      label_shift=inputs)
    assert values["collapse.em"] == 1.0 and values["acc.em"] == pytest.approx(labels.tolist().count(0) / 4000)
    assert values["prior_mse.em"] > 5 * values["prior_mse.bbse_soft"]  # BBSE needs no calibration: not fooled
    # calibrated outputs: no collapse
    cal, cal_labels = _task(np.full(K, 1 / K), 4000, 3)
    probs, labels = _task(true, 4000, 4)
    inputs = _inputs(cal, cal_labels, np.bincount(labels, minlength=K) / labels.size)
    assert evaluate(probs, labels, ["collapse.em"], label_shift=inputs)["collapse.em"] == 0.0
    # the other criterion: most of the prior on classes the unadapted predictions rarely choose
    before = np.tile(np.eye(K)[0] * 0.6 + 0.1, (100, 1))
    assert collapsed(before, before, np.array([0.3, 0.7, 0.0, 0.0]))
    assert not collapsed(before, before, np.array([0.7, 0.1, 0.1, 0.1]))


def test_delta_metrics_and_adapted_metrics_keep_their_base_direction(capsys):
    from calbench.__main__ import main

    cal, cal_labels = _task(np.full(K, 1 / K), 3000, 5)
    probs, labels = _task(np.array([0.7, 0.1, 0.1, 0.1]), 3000, 6)
    inputs = _inputs(cal, cal_labels, np.bincount(labels, minlength=K) / labels.size)
    ids = ["acc", "nll", "acc.rlls", "nll.rlls", "delta.acc.rlls", "delta.nll.rlls", "weight_mse.rlls"]
    values = evaluate(probs, labels, ids, label_shift=inputs)
    # Alexandari et al. (2020) Tables 1–2: Δacc against the unadapted model, and the MSE of the weights
    assert values["delta.acc.rlls"] == pytest.approx(values["acc.rlls"] - values["acc"])
    assert values["delta.nll.rlls"] == pytest.approx(values["nll.rlls"] - values["nll"])
    assert values["delta.acc.rlls"] > 0 and values["weight_mse.rlls"] < 0.05
    assert lookup("acc.em")[0].higher_is_better and lookup("delta.acc.em")[0].higher_is_better
    assert not lookup("delta.nll.em")[0].higher_is_better and not lookup("weight_mse.em")[0].higher_is_better
    assert main(["metrics"]) == 0
    out = capsys.readouterr().out
    assert "(the direction of its base metric)" in out and "(lower is better)\n<metric>.{em" not in out
    assert main(["metrics", "--json"]) == 0  # the JSON listing too: acc.em is not "lower is better"
    listed = {m["id"].split()[0]: m["direction"] for m in json.loads(capsys.readouterr().out)}
    assert {listed[k] for k in listed if k.startswith(("<metric>.{em", "delta.<metric>"))} == \
        {"the direction of its base metric"}


@pytest.mark.parametrize("acc, nll, collapse, expected", [
    ((0.02, 0.01, 0.03), (-0.1, -0.2, -0.05), 0.0, ADAPT),
    ((0.02, -0.01, 0.03), (-0.1, -0.2, -0.05), 0.0, UNCLEAR),
    ((-0.02, -0.03, -0.01), (-0.1, -0.2, -0.05), 0.0, DO_NOT),
    ((0.02, 0.01, 0.03), (0.5, 0.2, 0.9), 0.0, DO_NOT),  # adaptation that costs log-loss (TS 1.112 → 4.309)
    ((0.02, 0.01, 0.03), (-0.1, -0.2, -0.05), 0.5, DO_NOT),
    ((0.02, np.nan, np.nan), (np.nan,) * 3, 0.0, UNCLEAR),
])
def test_adapt_or_not_verdict(acc, nll, collapse, expected):
    assert verdict(acc, nll, collapse) == expected


def _run_with_a_harmful_adaptation(tmp_path):
    """Two methods, three seeds, one strength: ``best`` has the lower nll.em but EM lowers its accuracy; ``other``
    gains from EM. Resamples with a shared row noise."""
    rng = np.random.default_rng(0)
    rows, resamples = [], {}
    for seed in range(3):
        shared = rng.normal(scale=0.002, size=200)
        for method, nll_em, gain in (("best", 0.30, -0.03), ("other", 0.40, 0.02)):
            values = {"nll.em": nll_em, "delta.acc.em": gain, "delta.nll.em": -0.05, "weight_mse.em": 0.01,
                      "collapse.em": 0.0}
            rows += [("src", method, seed, "prior/tweak_one0.9/0", m, v) for m, v in values.items()]
            resamples["src", method, seed] = {"rows_of": "all", "sets": {"tweak_one0.9": {
                m: list(v + shared + rng.normal(scale=0.001, size=200)) for m, v in values.items()
                if m != "collapse.em"}}}
    long = pd.DataFrame(rows, columns=["source", "method", "seed", "test_set", "metric", "value"])
    write_label_shift_run(tmp_path, long, resamples)
    return long, resamples


def test_adapt_table_and_recommend_warn_where_adaptation_hurts(tmp_path, capsys):
    from calbench.__main__ import main

    long, resamples = _run_with_a_harmful_adaptation(tmp_path)
    table = adapt_markdown(long, resamples, ["best", "other"])
    assert "| best | em | tweak-one ρ=0.9 | -3.00 [" in table and "| **do not adapt** |" in table
    assert "| other | em | tweak-one ρ=0.9 | +2.00 [" in table and "| **adapt** |" in table
    assert main(["recommend", str(tmp_path), "--under-label-shift"]) == 0
    out = capsys.readouterr().out
    assert "src: best 0.300" in out  # ranked first by NLL after EM ...
    assert "warning: em adaptation hurts best at tweak-one ρ=0.9 (Δacc -3.00 [" in out  # ... never without the warning
    assert re.search(r"other +tweak-one ρ=0.9: Δacc \+2.00 \[[0-9.+-]+, [0-9.+-]+\], .*: adapt\n", out), out
