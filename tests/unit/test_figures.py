"""Figures and studies: per-bin numbers of reliability diagrams, simplex maps, Friedman/CD, learning curves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax

from calbench.data import store
from calbench.data.synthetic import generate
from calbench.jobs.reliability import ReliabilitySpec, reliability_job
from calbench.jobs.simplex import SimplexSpec, simplex_job
from calbench.jobs.studies import SummarySpec, learning_curve_summary_job
from calbench.metrics.ece import classwise_ece, confidence_ece
from calbench.report.critical_difference import _cliques, cd_figure
from calbench.report.learning_curve import learning_curve
from calbench.report.reliability import binned_ece, reliability_bins
from calbench.report.simplex import error_colours, lattice_points, to_plane
from calbench.report.tables import summary
from calbench.stats.ranks import (
    MIN_SOURCES,
    comparable_ranks,
    critical_difference,
    critical_value,
    friedman,
    rank_test,
)

PNG = b"\x89PNG"

# Four instances, two classes: confidences 0.9, 0.6, 0.7, 0.8; predictions 0, 0, 1, 1; labels 0, 1, 1, 1.
PROBS = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8]])
LABELS = np.array([0, 1, 1, 1])


def test_confidence_bins_by_hand():
    table = reliability_bins(PROBS, LABELS, "conf", n_bins=4, scheme="ew")
    assert table["count"].tolist() == [0, 0, 2, 2]
    assert table["lower"].tolist() == [0, 0.25, 0.5, 0.75] and table["upper"].tolist() == [0.25, 0.5, 0.75, 1]
    full = table[table["count"] > 0]
    np.testing.assert_allclose(full["mean_score"], [0.65, 0.85])  # (0.6 + 0.7)/2, (0.8 + 0.9)/2
    np.testing.assert_allclose(full["frequency"], [0.5, 1.0])  # hits 0, 1 | 1, 1
    np.testing.assert_allclose(full["gap"], [-0.15, 0.15])
    assert table.loc[table["count"] == 0, "mean_score"].isna().all()
    assert binned_ece(table) == pytest.approx(0.15)  # ½·0.15 + ½·0.15


def test_equal_mass_edges_and_classwise_rows_by_hand():
    table = reliability_bins(PROBS, LABELS, "conf", n_bins=2, scheme="em")
    np.testing.assert_allclose(table["lower"], [0, 0.75])  # midpoint of 0.7 and 0.8
    np.testing.assert_allclose(table["upper"], [0.75, 1])
    np.testing.assert_allclose(table["mean_score"], [0.65, 0.85])
    cw = reliability_bins(PROBS, LABELS, "cw", n_bins=4, scheme="ew")
    class1 = cw[cw["target"] == "class1"]
    assert class1["count"].tolist() == [1, 1, 1, 1]  # p̂_1 = 0.1, 0.4, 0.7, 0.8
    np.testing.assert_allclose(class1["frequency"], [0, 1, 1, 1])
    np.testing.assert_allclose(class1["gap"], [-0.1, 0.6, 0.3, 0.2])


@pytest.mark.parametrize("scheme", ["ew", "em"])
def test_bin_tables_give_the_metric_ece(scheme):
    data = generate("planted_temperature", 3, 10, 3000, num_classes=4, temperature=2.0)["test"]
    probs = softmax(data["logits"], axis=1)
    conf = reliability_bins(probs, data["labels"], "conf", 15, scheme)
    assert binned_ece(conf) == pytest.approx(confidence_ece(probs, data["labels"], 15, scheme))
    cw = reliability_bins(probs, data["labels"], "cw", 15, scheme)
    per_class = cw.groupby("target").apply(binned_ece, include_groups=False)
    assert per_class.mean() == pytest.approx(classwise_ece(probs, data["labels"], 15, scheme))


def test_reliability_bins_reject_bad_input():
    with pytest.raises(ValueError, match="target"):
        reliability_bins(PROBS, LABELS, "top")
    with pytest.raises(ValueError, match="n_bins"):
        reliability_bins(PROBS, LABELS, "conf", n_bins=0)


def _calibrated(path, probs, labels, index=None):
    index = np.arange(len(labels)) if index is None else index
    store.write_calibrated(path, probs[:2], probs, index[:2], index, labels, {"method": "x"})
    return str(path)


def test_reliability_job_writes_figure_and_csv(tmp_path):
    files = {m: [_calibrated(tmp_path / f"{m}.h5", PROBS, LABELS)] for m in ("a", "b+c")}
    reliability_job(spec=ReliabilitySpec(source="toy", target="conf", seeds=[0], n_bins=4, scheme="ew", max_classes=3,
                                         calibrated=files, figure=tmp_path / "conf.png", table=tmp_path / "conf.csv"))
    assert (tmp_path / "conf.png").read_bytes()[:4] == PNG
    table = pd.read_csv(tmp_path / "conf.csv")
    assert sorted(set(table["method"])) == ["a", "b+c"] and set(table["kind"]) == {"bin", "smooth"}
    row = table[(table["method"] == "a") & (table["kind"] == "bin") & (table["bin"] == 3)].iloc[0]
    assert (row["count"], row["mean_score"], row["frequency"]) == (2, pytest.approx(0.85), pytest.approx(1.0))
    # consistency bars of Binomial(2, 0.85)/2: P(0 hits) = 0.0225 < 0.025 ≤ P(≤ 1 hit) = 0.2775
    assert (row["band_low"], row["band_high"]) == (0.5, 1.0)


@pytest.mark.parametrize("power", [0.5, 1.0, 2.0])
def test_smooth_curve_bandwidth_is_the_smece_fixed_point(power):
    """Błasiok & Nakkiran 2023 §4: σ* = smECE_σ*; relplot's smECE (the authors' package) on the same pairs, within
    the rounding of the instances to the grid."""
    relplot = pytest.importorskip("relplot")
    from calbench.report.smooth_reliability import GriddedPairs

    rng = np.random.default_rng(0)
    scores = rng.beta(5, 1.2, size=20000)
    hits = (rng.random(20000) < scores**power).astype(np.float64)
    sigma = GriddedPairs(scores, hits, False, (0.0, 1.0)).bandwidth()
    assert sigma == pytest.approx(relplot.smECE(scores, hits), rel=0.03, abs=1e-3)


def test_smooth_curve_bandwidth_solves_its_fixed_point_equation():
    """Błasiok & Nakkiran 2023 §4: the bisection stops at σ with smECE_σ = σ (to its tolerance), computed here with
    the dense kernel over every cell of the grid."""
    from calbench.report.smooth_reliability import GriddedPairs, _gaussian

    rng = np.random.default_rng(1)
    scores = rng.beta(2, 1, size=5000)
    pairs = GriddedPairs(scores, (rng.random(5000) < scores**1.5).astype(np.float64), False, (0.0, 1.0))
    sigma, mesh = pairs.bandwidth(), pairs.mesh()
    residual_mass = (pairs.counts * pairs.residuals).sum(axis=0)
    smece = np.trapezoid(np.abs(_gaussian(mesh, pairs.centres, sigma, True) @ residual_mass), mesh) / pairs.n
    assert smece == pytest.approx(sigma, rel=1e-5)


def test_consistency_bar_quantiles_are_the_binomial_quantiles():
    """Bröcker & Smith 2007: the bars are quantiles of Binomial(n_k, p̄_k); scipy.stats.binom.ppf's values at the
    levels drawn and near 0 and 1, for n from 1 to 5,000 and p at, near and between 0 and 1."""
    from scipy.stats import binom

    from calbench.report.smooth_reliability import binomial_quantile

    rng = np.random.default_rng(2)
    n = np.concatenate([np.ones(600), rng.integers(1, 5001, 20000)])
    near = rng.random(100) * 1e-7
    p = np.concatenate([rng.random(20000), np.zeros(200), np.ones(200), near, 1 - near])
    for q in (0.025, 0.975, 0.5, 1e-9, 1 - 1e-9):
        np.testing.assert_array_equal(binomial_quantile(q, n, p), binom.ppf(q, n, p))


def test_smooth_curve_band_covers_a_calibrated_truth_and_figure_is_readable(tmp_path):
    from PIL import Image

    from calbench.report.reliability import CSV_COLUMNS

    data = generate("planted_temperature", 0, 10, 4000, num_classes=10, temperature=1.0)["test"]
    probs = softmax(data["logits"], axis=1)  # calibrated by construction (temperature 1)
    files = {m: [_calibrated(tmp_path / f"{m}{s}.h5", probs, data["labels"]) for s in (0, 1)]
             for m in ("m1", "m2", "m3", "m4", "m5")}
    for target in ("conf", "cw"):
        reliability_job(spec=ReliabilitySpec(source="toy", target=target, seeds=[0, 1], n_bins=15, scheme="em",
                                             max_classes=3, calibrated=files, figure=tmp_path / f"{target}.png",
                                             table=tmp_path / f"{target}.csv"))
        width, height = Image.open(tmp_path / f"{target}.png").size
        assert max(width, height) / min(width, height) <= 3 and width * height <= 8e6
        table = pd.read_csv(tmp_path / f"{target}.csv")
        assert list(table.columns) == CSV_COLUMNS
        smooth = table[(table["kind"] == "smooth") & table["frequency"].notna()]
        assert smooth["band_low"].le(smooth["band_high"]).all()
        pooled = smooth[~smooth["target"].str.startswith("class")]
        truth = pooled["mean_score"]
        covered = (pooled["band_low"] - 0.02 <= truth) & (truth <= pooled["band_high"] + 0.02)
        assert covered.mean() > 0.9  # the diagonal (the truth) lies within the band almost everywhere
    assert set(table.loc[table["kind"] == "smooth", "target"]) >= {"all classes pooled"}
    assert table["target"].str.startswith("class").any()  # the worst classes' own curves


def test_simplex_geometry_and_colours():
    np.testing.assert_allclose(to_plane(np.eye(3)), [[0, 0], [1, 0], [0.5, np.sqrt(3) / 2]])
    p = np.array([[0.2, 0.3, 0.5]])
    np.testing.assert_allclose(error_colours(p, p, 0.1), [[0.5, 0.5, 0.5]])  # no change: grey
    np.testing.assert_allclose(error_colours(p, p + [[0.1, -0.05, -0.05]], 0.1), [[1.0, 0.25, 0.25]])
    grid = np.random.default_rng(0).dirichlet([1, 1, 1], size=5000)
    assert 40 <= lattice_points(to_plane(grid), 8).size <= 45  # 45 lattice nodes, one point each at most


def test_simplex_job_draws_and_checks_row_alignment(tmp_path):
    parts = generate("lece3", 0, 50, 400)
    dump = tmp_path / "lece.h5"
    store.write_dump(dump, {"seed0/cal": parts["cal"], "seed0/test": parts["test"]}, {"source": "lece"})
    p_hat = softmax(parts["test"]["logits"], axis=1)
    good = _calibrated(tmp_path / "ok.h5", parts["test"]["true_probs"], parts["test"]["labels"])
    simplex_job(spec=SimplexSpec(source="lece", seed=0, divisions=6, calibrated={"oracle": good}, dump=dump,
                                 figure=tmp_path / "map.png"))
    assert (tmp_path / "map.png").read_bytes()[:4] == PNG
    shifted = _calibrated(tmp_path / "bad.h5", p_hat, parts["test"]["labels"], np.arange(400) + 1)
    with pytest.raises(ValueError, match="test rows are not those"):
        simplex_job(spec=SimplexSpec(source="lece", seed=0, divisions=15, calibrated={"bad": shifted}, dump=dump,
                                     figure=tmp_path / "bad.png"))


# Dirichlet paper Supp. Table 4 (naive Bayes, log-loss): ranks of DirL2, Beta, FreqB, Isot, WidB, TempS, Uncal.
SUPP_TABLE_4 = np.array([
    [1, 4, 2, 5, 6, 3, 7], [1, 2, 5, 3, 4, 6, 7], [1, 4, 2, 3, 5, 6.5, 6.5], [1, 4, 2, 5, 3, 6, 7],
    [1, 5, 2, 3, 4, 7, 6], [1, 4, 3, 5, 2, 6.5, 6.5], [1, 5, 6, 7, 4, 3, 2], [1, 2, 4, 3, 5, 6.5, 6.5],
    [1, 2, 4, 5, 3, 6.5, 6.5], [1, 2, 6, 5, 4, 3, 7], [1, 5, 2, 3, 4, 6.5, 6.5], [1, 2, 4, 6, 5, 3, 7],
    [2, 4, 3, 1, 5, 6, 7], [1, 4, 3, 2, 5, 6.5, 6.5], [1, 3, 4, 2, 5, 6.5, 6.5], [1, 5, 3, 2, 4, 6.5, 6.5],
    [1, 3, 2, 5, 4, 6, 7], [1, 2, 6, 7, 5, 4, 3], [1, 2, 3, 4, 6, 5, 7], [1, 4, 2, 3, 5, 6.5, 6.5],
])


def test_friedman_reproduces_dirichlet_supp_table_4():
    np.testing.assert_allclose(SUPP_TABLE_4.mean(axis=0), [1.05, 3.40, 3.40, 3.95, 4.40, 5.53, 6.28], atol=0.005)
    statistic, p_value = friedman(SUPP_TABLE_4)
    assert statistic == pytest.approx(73.8, abs=0.05)  # caption: "Friedman statistic test = 73.8"
    assert p_value == pytest.approx(6.71e-14, rel=0.005)  # caption: "p-value = 6.71E-14"
    # Demšar's formula without the tie correction, from the spec: 12N/(k(k+1))·[ΣR² − k(k+1)²/4].
    avg = SUPP_TABLE_4.mean(axis=0)
    assert friedman(SUPP_TABLE_4, tie_correction=False)[0] == pytest.approx(240 / 56 * (np.sum(avg**2) - 112))


def test_critical_values_and_difference_match_demsar():
    assert critical_value(7, 0.05, "bonferroni-dunn") == pytest.approx(2.638, abs=5e-4)  # spec §2.10; Demšar T5b
    assert critical_value(7, 0.05, "nemenyi") == pytest.approx(2.949, abs=1e-3)  # Demšar T5a (2.9483 exact)
    assert critical_value(2, 0.05, "nemenyi") == pytest.approx(1.960, abs=5e-4)
    assert critical_value(10, 0.10, "bonferroni-dunn") == pytest.approx(2.539, abs=5e-4)
    assert critical_difference(7, 20, 0.05, "bonferroni-dunn") == pytest.approx(2.638 * np.sqrt(56 / 120), abs=1e-3)
    with pytest.raises(ValueError, match="nemenyi"):
        critical_value(3, 0.05, "tukey")


def test_rank_test_on_a_long_table_and_its_figure(tmp_path):
    rows = [{"source": f"s{i}", "method": m, "seed": 0, "metric": "nll", "value": v + 0.01 * i}
            for i in range(6) for m, v in (("a", 0.1), ("b", 0.2), ("c", 0.3))]
    rows += [{"source": "s6", "method": "a", "seed": 0, "metric": "nll", "value": 0.5}]  # incomplete: dropped
    ranks, left_out = comparable_ranks(summary(pd.DataFrame(rows), "nll", ties="average")[2])
    result = rank_test(ranks, "nll", test="nemenyi")
    assert result.n == 6 and list(result.average_ranks.index) == ["a", "b", "c"] and left_out == []
    assert result.statistic == pytest.approx(12.0)  # perfect agreement: χ²_F = N(k − 1)
    assert result.significant
    assert result.verdict().startswith(f"Friedman p = {result.p_value:.3g}: significant at α = 0.005; nemenyi CD = ")
    cd_figure(result, tmp_path / "cd.png", left_out=["kcal"])
    assert (tmp_path / "cd.png").read_bytes()[:4] == PNG


def test_methods_that_ran_on_fewer_sources_are_left_out_and_too_few_sources_give_no_test():
    """Demšar 2006 §3.2.2: the Friedman test ranks methods on the data sets they all ran on; calbench runs it on
    MIN_SOURCES (5) sources or more only (the default run's 2-source diagrams said nothing)."""
    values = {"a": 0.1, "b": 0.2, "kcal": 0.05}
    rows = [{"source": f"s{i}", "method": m, "seed": 0, "metric": "nll", "value": v + 0.01 * i}
            for i in range(5) for m, v in values.items() if m != "kcal" or i < 2]
    ranks, left_out = comparable_ranks(summary(pd.DataFrame(rows), "nll", ties="average")[2])
    assert left_out == ["kcal"] and list(ranks.columns) == ["a", "b"] and len(ranks) == MIN_SOURCES
    assert rank_test(ranks, "nll").n == 5
    assert rank_test(ranks.iloc[:4], "nll") is None


def test_verdict_says_when_the_methods_are_not_ranked_apart():
    # 6 sources that disagree: a wins on s0, s2, s4, b on the others → average ranks tie, χ²_F = 0, p = 1
    rows = [{"source": f"s{i}", "method": m, "seed": 0, "metric": "nll", "value": v}
            for i in range(6) for m, v in zip("ab", (0.1, 0.2) if i % 2 == 0 else (0.2, 0.1))]
    result = rank_test(comparable_ranks(summary(pd.DataFrame(rows), "nll", ties="average")[2])[0], "nll")
    assert not result.significant
    assert result.verdict() == "Friedman p = 1: not significant at α = 0.005, the methods are not ranked apart"


def test_nemenyi_cliques_are_maximal_runs_within_the_cd():
    assert _cliques(np.array([1.0, 1.5, 2.2, 4.0, 4.3]), cd=1.3) == [(0, 2), (3, 4)]
    assert _cliques(np.array([1.0, 3.0, 5.0]), cd=1.0) == []


def test_learning_curve_draws_and_summary(tmp_path):
    parts = generate("planted_temperature", 0, 400, 1000, num_classes=3, temperature=2.5)
    dump = tmp_path / "p.h5"
    store.write_dump(dump, {"seed0/cal": parts["cal"], "seed0/test": parts["test"]}, {"source": "p"})
    curve = learning_curve(dump, "ts", {"ts": {}}, [128, 400], 2, ["ece.conf.em15.l1", "acc"], source="p")
    assert len(curve) == 2 * 2 * 2
    ece = curve[curve["metric"] == "ece.conf.em15.l1"].set_index(["size", "repeat"])["value"]
    assert ece.loc[(400, 0)] == pytest.approx(ece.loc[(400, 1)])  # the full pool: every draw is the same
    assert ece.loc[(128, 0)] != pytest.approx(ece.loc[(128, 1)])
    acc = curve[curve["metric"] == "acc"]["value"]
    assert acc.nunique() == 1  # TS keeps the argmax
    with pytest.raises(ValueError, match="exceeds the 400 calibration rows"):
        learning_curve(dump, "ts", {"ts": {}}, [500], 1, ["acc"])
    curve.to_csv(tmp_path / "ts.csv", index=False)
    learning_curve_summary_job(spec=SummarySpec(
        sources=["p"], methods=["ts"], metrics=["ece.conf.em15.l1", "acc"], curves=[tmp_path / "ts.csv"],
        csv=tmp_path / "s.csv", table=tmp_path / "s.md", figures={"p": tmp_path / "p.png"}))
    summary = pd.read_csv(tmp_path / "s.csv")
    mean = summary[(summary["metric"] == "acc") & (summary["size"] == 128)]["mean"].iloc[0]
    assert mean == pytest.approx(acc.iloc[0]) and (tmp_path / "p.png").read_bytes()[:4] == PNG
    assert "| 400 |" in (tmp_path / "s.md").read_text()
