"""ACE, MMCE, KS calibration error, signed calibration error, calibration tests, selective prediction and the
calibration/refinement split: each formula on small hand-computed cases (the paper's equation named), edge
cases (one row, one class present, all correct), ranges, and every registered metric id evaluating."""

import re

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import ndtr, softmax

from calbench.data.synthetic import sample_categorical
from calbench.metrics import conformal_eval, evaluate
from calbench.metrics.cumulative import (
    brownian_range_sf,
    cumulative_differences,
    ks_error,
    ks_test,
    kuiper_test,
    max_abs_brownian_sf,
    spiegelhalter_test,
)
from calbench.metrics.mmce import laplacian_quadratic_form, mmce
from calbench.metrics.refinement import recalibrated
from calbench.metrics.registry import described_ids
from calbench.metrics.selective import augrc, aurc, auroc, cumulative_errors

NEW_IDS = ["ace.cw.em15", "ace.conf.em15", "mmce.conf", "ks.conf", "ks.cw", "sce.conf", "sce.conf.em15.over",
           "sce.conf.ew15.under", "sce.cw.em15.over", "p_spiegelhalter.conf", "p_ks.conf", "p_kuiper.conf", "aurc",
           "augrc", "auroc.conf", "refinement.nll.ts.cv5", "calib_err.brier.ts.all", "refinement.nll.isotonic.cv5",
           "calib_err.brier.isotonic.all"]


def _sample(n=400, classes=4, scale=2.0, seed=0):
    rng = np.random.default_rng(seed)
    probs = softmax(scale * rng.normal(size=(n, classes)), axis=1)
    return probs, sample_categorical(softmax(0.5 * np.log(probs), axis=1), rng)


def test_ace_weights_every_range_equally():
    """Nixon et al. 2019 §4, ACE = (1/KR) Σ_k Σ_r |acc(r,k) − conf(r,k)|, by hand: 5 rows, 2 ranges (3 + 2 rows).
    Class 0 sorted scores .2 .3 .5 | .6 .9 with hits 0 0 1 | 0 1: gaps 0 and |.5 − .75|; class 1 the mirror
    image: gaps 0 and |1 − .75|. ACE = .125, where the mass-weighted ECE gives 2/5 · .25 = .1."""
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8], [0.5, 0.5]])
    labels = np.array([0, 1, 1, 1, 0])
    values = evaluate(probs, labels, ["ace.cw.em2", "ece.cw.em2.l1"])
    assert values["ace.cw.em2"] == pytest.approx(0.125)
    assert values["ece.cw.em2.l1"] == pytest.approx(0.1)
    # the confidence (.9 .6 .7 .8 .5, correct but the .6) in 10 ranges: 5 of one row, 5 empty and left out
    assert evaluate(probs, labels, ["ace.conf.em10"])["ace.conf.em10"] == pytest.approx(0.34)


def test_mmce_by_hand_and_exact_against_the_double_sum():
    """Kumar et al. 2018 §3: MMCE² = (1/n²) Σ_ij (c_i − r_i)(c_j − r_j) exp(−|r_i − r_j|/0.4). Two rows r = (.9, .6),
    c = (1, 0): (.01 + .36 − 2·.06·e^{−.75}) / 4."""
    assert mmce(np.array([0.9, 0.6]), np.array([1.0, 0.0])) == pytest.approx(
        np.sqrt(0.37 - 0.12 * np.exp(-0.75)) / 2, rel=1e-12)
    rng = np.random.default_rng(1)
    r, a = np.round(rng.random(300), 2), rng.normal(size=300)  # ties included
    for width in (0.4, 1e-3, 1e-5):  # the narrow widths need several spans (exp(r/w) would overflow)
        dense = a @ np.exp(-np.abs(r[:, None] - r[None, :]) / width) @ a
        assert laplacian_quadratic_form(r, a, width) == pytest.approx(dense, rel=1e-10)


def test_ks_error_by_hand_and_ties_grouped():
    """Gupta et al. 2021 §4: KS = max_i |h_i − h̃_i|. Scores (.9, .6), hits (1, 0): sorted .6, .9, cumulative
    differences −.3, −.25 → .3. Tied scores (.5, .5) with hits (1, 0): only the group's end counts → 0 in any order."""
    assert ks_error(np.array([0.9, 0.6]), np.array([1.0, 0.0])) == pytest.approx([0.3])
    assert ks_error(np.array([0.5, 0.5]), np.array([1.0, 0.0]))[0] == 0.0
    assert ks_error(np.array([0.5, 0.5]), np.array([0.0, 1.0]))[0] == 0.0
    scores = np.array([[0.2, 0.7], [0.2, 0.1], [0.9, 0.7]])
    hits = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    c, ends = cumulative_differences(scores, hits)
    assert c[0] == pytest.approx([0.8 / 3, 0.6 / 3, 0.7 / 3]) and list(ends[0]) == [False, True, True]
    assert ks_error(scores, hits) == pytest.approx([0.7 / 3, 0.9 / 3])  # .8/3 is inside the tied pair .2, .2


def test_signed_error_and_its_binned_parts():
    """sce.conf = mean confidence − accuracy; the over/under parts of the binned ECE (Naeini et al. 2015, LECE Eq. 1)
    add up to ece.*.l1 and their difference is sce.conf."""
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.3, 0.7]])
    labels = np.array([0, 1, 0, 1])
    ids = ["sce.conf", "sce.conf.ew10.over", "sce.conf.ew10.under", "ece.conf.ew10.l1", "acc"]
    v = evaluate(probs, labels, ids)
    # confidences .9 .8 .6 .7, correct but the .8 one; one row per bin: gaps −.1, +.8, −.4, −.3
    assert v["sce.conf"] == pytest.approx((0.9 + 0.8 + 0.6 + 0.7) / 4 - 0.75)
    assert v["sce.conf.ew10.over"] == pytest.approx(0.8 / 4)
    assert v["sce.conf.ew10.under"] == pytest.approx((0.1 + 0.4 + 0.3) / 4)
    probs, labels = _sample()
    v = evaluate(probs, labels, ["sce.conf", "sce.conf.em15.over", "sce.conf.em15.under", "ece.conf.em15.l1",
                                 "sce.cw.em15.over", "sce.cw.em15.under", "ece.cw.em15.l1"])
    assert v["sce.conf.em15.over"] + v["sce.conf.em15.under"] == pytest.approx(v["ece.conf.em15.l1"])
    assert v["sce.conf.em15.over"] - v["sce.conf.em15.under"] == pytest.approx(v["sce.conf"])
    assert v["sce.cw.em15.over"] + v["sce.cw.em15.under"] == pytest.approx(v["ece.cw.em15.l1"])
    assert v["sce.cw.em15.over"] == pytest.approx(v["sce.cw.em15.under"])  # classwise means cancel


def test_spiegelhalter_by_hand():
    """Spiegelhalter 1986 §3: p = (.8, .3), y = (1, 0): Z = (.2·(−.6) − .3·.4) / sqrt(.36·.16 + .16·.21)."""
    z, p_value = spiegelhalter_test(np.array([0.8, 0.3]), np.array([1.0, 0.0]))
    assert z == pytest.approx(-0.24 / np.sqrt(0.0912))
    assert p_value == pytest.approx(2 * ndtr(-abs(z)))


def test_tests_with_certain_scores():
    """Scores of 0, ½ or 1 leave no variance under calibration: a deviation is impossible (p = 0), none is no
    evidence (p = 1)."""
    certain, half = np.array([1.0, 0.0, 1.0]), np.array([0.5, 0.5])
    for test in (spiegelhalter_test, kuiper_test, ks_test):
        assert test(certain, np.array([1.0, 0.0, 1.0]))[1] == 1.0
        assert test(certain, np.array([1.0, 1.0, 1.0]))[1] == 0.0
    assert spiegelhalter_test(half, np.array([1.0, 0.0]))[1] == 1.0


def test_brownian_tails_against_independent_forms():
    """The KS tail (Darling & Siegert 1953) against the reflection series 4 Σ (−1)^k Φ(−(2k+1)x), and both tails'
    means against E max|B| = sqrt(π/2) and E range = 2 sqrt(2/π) (Feller 1951)."""
    for x in (0.5, 1.0, 2.0, 3.0):
        k = np.arange(60)
        assert max_abs_brownian_sf(x) == pytest.approx(4 * np.sum((-1.0) ** k * ndtr(-(2 * k + 1) * x)), abs=1e-14)
    assert quad(max_abs_brownian_sf, 0, 20)[0] == pytest.approx(np.sqrt(np.pi / 2), rel=1e-8)
    assert quad(brownian_range_sf, 0, 20)[0] == pytest.approx(2 * np.sqrt(2 / np.pi), rel=1e-8)
    assert max_abs_brownian_sf(0.0) == brownian_range_sf(0.0) == 1.0


def test_kuiper_range_includes_the_start():
    """Arrieta-Ibarra et al. 2022 §3: the range of C_0..C_n, C_0 = 0; all differences negative: max − min = |min|."""
    scores, hits = np.array([0.6, 0.7, 0.8]), np.zeros(3)
    sigma = np.sqrt(np.sum(scores * (1 - scores))) / 3
    assert kuiper_test(scores, hits)[0] == pytest.approx(2.1 / 3 / sigma)


def test_selective_areas_by_hand():
    """Geifman & El-Yaniv 2017 / Traub et al. 2024: confidences (.9, .8, .7), errors (0, 1, 0): E_k = 0, 1, 1;
    AURC = (0 + 1/2 + 1/3)/3, AUGRC = (0 + 1 + 1)/9. Tied (.5, .5) with errors (1, 0): E_1 = ½ in either order."""
    assert aurc(np.array([0.9, 0.8, 0.7]), np.array([0, 1, 0])) == pytest.approx(5 / 18)
    assert augrc(np.array([0.9, 0.8, 0.7]), np.array([0, 1, 0])) == pytest.approx(2 / 9)
    assert cumulative_errors(np.array([0.5, 0.5]), np.array([1, 0])) == pytest.approx([0.5, 1.0])
    assert aurc(np.array([0.5, 0.5]), np.array([0, 1])) == pytest.approx(0.5)


def test_aurc_curve_gives_torch_uncertainty_value_by_its_formula():
    """torch-uncertainty's test case (binary probs .9 .8 .7 .6 .8 on class 1, targets 1 1 0 0 1): its AURC, the
    trapezoid over coverages 1/n..1 divided by 1 − 1/n, is (0·.4 + .25·.2/2 + .25·.2 + .15·.2/2)/.8 on the same
    risk curve; calbench's mean over coverages is (0 + 0 + 0 + 1/4 + 2/5)/5."""
    probs = np.array([[0.1, 0.9], [0.2, 0.8], [0.3, 0.7], [0.4, 0.6], [0.2, 0.8]])
    labels = np.array([1, 1, 0, 0, 1])
    conf, errors = probs.max(axis=1), (probs.argmax(axis=1) != labels)
    risk = cumulative_errors(conf, errors) / np.arange(1, 6)
    assert (risk.sum() - (risk[0] + risk[-1]) / 2) / 4 == pytest.approx((0.25 * 0.2 / 2 + 0.25 * 0.2
                                                                          + 0.15 * 0.2 / 2) / 0.8)
    assert evaluate(probs, labels, ["aurc"])["aurc"] == pytest.approx(0.65 / 5)


def test_auroc_by_hand_and_against_sklearn():
    """Mann–Whitney: positives .9, .7 against negatives .8, .7: (1 + 1 + 0 + ½)/4."""
    assert auroc(np.array([0.9, 0.8, 0.7, 0.7]), np.array([1, 0, 1, 0], dtype=bool)) == pytest.approx(0.625)
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(2)
    scores, positive = rng.integers(0, 6, size=(80, 3)).astype(float), rng.random((80, 3)) < 0.4
    assert auroc(scores, positive) == pytest.approx([roc_auc_score(positive[:, j], scores[:, j]) for j in range(3)])
    assert np.isnan(auroc(np.array([0.3, 0.4]), np.array([True, True])))


def test_refinement_is_invariant_to_temperature_and_splits_the_loss():
    """Berta et al. 2025 §2: TS recalibration removes any temperature, so p and its tempered version have the same
    refinement (in-sample fit: to the solver's precision); calibration error + refinement = the loss."""
    probs, labels = _sample(600, 5)
    tempered = softmax(3.0 * np.log(probs), axis=1)
    a = evaluate(probs, labels, ["refinement.nll.ts.all", "calib_err.nll.ts.all", "nll"])
    b = evaluate(tempered, labels, ["refinement.nll.ts.all", "calib_err.nll.ts.all", "nll"])
    assert a["refinement.nll.ts.all"] == pytest.approx(b["refinement.nll.ts.all"], rel=1e-9)
    assert b["calib_err.nll.ts.all"] > 0.1
    assert a["calib_err.nll.ts.all"] + a["refinement.nll.ts.all"] == pytest.approx(a["nll"])
    rare = labels.copy()
    rare[:2] = 4
    rare[rare == 4] = 0
    rare[:2] = 4  # class 4 has 2 rows < 5 folds: unstratified folds
    assert np.all(np.isfinite(recalibrated(probs, rare, 5)))
    with pytest.raises(ValueError, match="needs at least 5 rows"):
        evaluate(probs[:3], labels[:3], ["refinement.nll.ts.cv5"])


@pytest.mark.parametrize("folds", [None, 5])
def test_isotonic_refinement_is_scikit_learns_isotonic_per_class_renormalised_and_mixed(folds):
    """The isotonic family of the split (probmetrics' ``isotonic-mix``): per fold and class, scikit-learn's
    ``IsotonicRegression(out_of_bounds="clip")`` of 1[y = j] on p_j fitted on the other folds, rows renormalised
    (uniform where every class maps to 0), mixed with the uniform at 1/(n_fit + 1). Rounded scores make ties."""
    from sklearn.isotonic import IsotonicRegression

    from calbench.metrics.refinement import _folds

    probs, labels = _sample(500, 6, seed=3)
    probs = np.round(probs, 2)
    probs[:, 0] = 1.0 - probs[:, 1:].sum(axis=1)  # sums to 1, with near-ties (0.15000000000000002) as well
    probs, labels = probs[probs[:, 0] >= 0], labels[probs[:, 0] >= 0]
    splits = [(np.arange(labels.size),) * 2] if folds is None else _folds(labels, folds, 0)
    expected = np.empty_like(probs)
    for fit, score in splits:
        maps = np.column_stack([IsotonicRegression(out_of_bounds="clip").fit(probs[fit, j], labels[fit] == j)
                                .predict(probs[score, j]) for j in range(6)])
        total = maps.sum(axis=1, keepdims=True)
        maps = np.where(total > 0, maps / np.where(total > 0, total, 1.0), 1 / 6)
        mix = 1 / (fit.size + 1)
        expected[score] = (1 - mix) * maps + mix / 6
    np.testing.assert_allclose(recalibrated(probs, labels, folds, family="isotonic"), expected, atol=1e-12)
    ids = [f"refinement.brier.isotonic.{'all' if folds is None else 'cv5'}", "brier"]
    values = evaluate(probs, labels, ids + [ids[0].replace("refinement", "calib_err")])
    assert values[ids[0]] == pytest.approx(np.sum((expected - np.eye(6)[labels]) ** 2, axis=1).mean())
    assert values[ids[0]] + values[ids[0].replace("refinement", "calib_err")] == pytest.approx(values["brier"])


@pytest.mark.parametrize("case", ["one row", "all correct", "one class present"])
def test_edge_cases(case):
    probs, labels = _sample(60, 3)
    if case == "one row":
        probs, labels = probs[:1], labels[:1]
    elif case == "all correct":
        labels = probs.argmax(axis=1)
    else:
        labels = np.zeros_like(labels)
    ids = [i for i in NEW_IDS if not (case == "one row" and i.endswith("cv5"))]
    values = evaluate(probs, labels, ids)
    ranged = [i for i in ids if not i.startswith(("sce.conf", "calib_err", "refinement"))]
    outside = [i for i in ranged if not (0 <= values[i] <= 1 or (np.isnan(values[i]) and i == "auroc.conf"))]
    assert not outside, {i: values[i] for i in outside}
    assert -1 <= values["sce.conf"] <= 1 and all(values[i] >= 0 for i in ids if i.startswith("refinement"))
    if case == "all correct":
        assert values["aurc"] == values["augrc"] == 0.0 and np.isnan(values["auroc.conf"])
        assert values["sce.conf"] < 0  # confidence below accuracy = 1: under-confident


def _examples():
    """(example id, family) of every registered family (its usage's "e.g.", or the plain id) that reads nothing
    beyond probabilities, labels, the true map and the uncalibrated outputs (other ``needs_*`` inputs are tested
    with their families)."""
    provided = {"needs_true_probs", "needs_uncal_probs"}
    for usage, _, family in described_ids():
        if any(value for name, value in vars(family).items() if name.startswith("needs_") and name not in provided):
            continue
        example = re.search(r"e\.g\. (\S+)", usage)
        yield (example.group(1) if example else usage), family


def test_every_registered_metric_id_evaluates():
    """The example id of every registered family evaluates to a number."""
    probs, labels = _sample(240, 4)
    true_probs = softmax(0.5 * np.log(probs), axis=1)
    for metric_id, family in _examples():
        assert family.pattern.match(metric_id), metric_id
        value = evaluate(probs, labels, [metric_id], true_probs=true_probs, uncal_probs=probs)[metric_id]
        assert np.isfinite(value), metric_id


def test_signed_metric_ranks_by_distance_from_zero():
    """sce.conf is signed: the tables rank methods by |value| (0 is best); the recommendation, whose paired tests
    compare in one direction, refuses it."""
    import pandas as pd

    from calbench.report.tables import summary
    from calbench.stats.draws import estimates_only
    from calbench.stats.paired import compare

    long = pd.DataFrame({"source": "s", "method": ["a", "b", "c"], "metric": "sce.conf", "seed": 0,
                         "value": [-0.01, 0.03, -0.05]})
    _, _, ranks = summary(long, "sce.conf")
    assert ranks.loc["s"].to_dict() == {"a": 1.0, "b": 2.0, "c": 3.0}
    with pytest.raises(ValueError, match="signed"):
        compare(estimates_only("s", long, ["sce.conf"]), "sce.conf")


def test_every_fast_bootstrap_equals_recomputing_each_resample():
    """Every registered family with a ``resampled`` form (its usage's example id) gives, from the resamples' row
    counts, the values of recomputing the metric on each resample."""
    from calbench.metrics.bootstrap import resample_indices
    from calbench.metrics.registry import MetricContext

    probs, labels = _sample(150, 4, seed=3)
    true_probs = softmax(0.5 * np.log(probs), axis=1)
    idx = resample_indices(150, 12, 4)
    counts = np.stack([np.bincount(i, minlength=150) for i in idx])
    ctx = MetricContext(probs, labels, true_probs, seed=0, uncal_probs=probs)
    for metric_id, family in _examples():
        if family.resampled is None or metric_id.split(".")[0] in conformal_eval.KINDS:
            continue  # conformal ids keep their divisions on a resample (tests/unit/test_conformal.py checks that form)
        groups = family.pattern.match(metric_id).groupdict()
        fast = family.resampled(ctx, counts, **groups)
        if fast is None:
            continue
        loop = [family.function(MetricContext(probs[i], labels[i], true_probs[i], uncal_probs=probs[i]), **groups)
                for i in idx]
        np.testing.assert_allclose(fast, loop, rtol=0, atol=1e-12, err_msg=metric_id)


def test_recommend_leaves_signed_metrics_unranked(tmp_path, capsys):
    """`calbench recommend --all-metrics` names the signed ids it does not rank; asked for one, it refuses."""
    import pandas as pd

    from calbench.cli import main

    rows = [("s", method, seed, metric, value + 0.01 * seed) for seed in range(3)
            for method, value in (("ts", 0.5), ("uncal", 0.9)) for metric in ("nll", "sce.conf")]
    (tmp_path / "tables").mkdir()
    pd.DataFrame(rows, columns=["source", "method", "seed", "metric", "value"]).to_csv(
        tmp_path / "tables/metrics_long.csv", index=False)
    assert main(["recommend", str(tmp_path), "--all-metrics"]) == 0
    out = capsys.readouterr().out
    assert "not ranked, signed (0 is best; docs/metrics.md): sce.conf" in out and "\nnll" in out
    assert main(["recommend", str(tmp_path), "--metric", "sce.conf"]) == 1
    assert "sce.conf is signed" in capsys.readouterr().err


def test_mapie_documented_examples():
    """MAPIE 1.6's docstring examples (scores .1 .9 .21 .9 .5, hits 0 1 0 1 0; the tied .9 share their hit, so the
    order of ties does not matter): KS statistic 0.978 and Spiegelhalter's Z −0.757 as printed; its Kuiper range
    0.857 leaves out C_0 = 0, calbench's (the paper's) is larger by |C_1|/σ = .02/σ. Second example
    (.8 .3 .5 .5 .7 .1, hits 1 0 1 0 1 0): the one-sided Spiegelhalter p 0.8486 from calbench's Z."""
    scores, hits = np.array([0.1, 0.9, 0.21, 0.9, 0.5]), np.array([0.0, 1, 0, 1, 0])
    sigma = np.sqrt(np.sum(scores * (1 - scores))) / 5
    assert round(ks_test(scores, hits)[0], 3) == 0.978
    assert round(spiegelhalter_test(scores, hits)[0], 3) == -0.757
    assert round(kuiper_test(scores, hits)[0] - 0.02 / sigma, 3) == 0.857
    z, _ = spiegelhalter_test(np.array([0.8, 0.3, 0.5, 0.5, 0.7, 0.1]), np.array([1.0, 0, 1, 0, 1, 0]))
    assert round(float(ndtr(-z)), 4) == 0.8486


@pytest.mark.workflow
def test_calbench_metrics_lists_every_family():
    """`calbench metrics`, in a fresh interpreter, prints every registered family's usage and direction."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "calbench", "metrics"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    for usage, _, _ in described_ids():
        assert usage in out, usage
    assert "sce.conf\n" in out and "signed, 0 is best" in out
