"""Per-metric Markdown tables (calbench.report.tables): mean ± std over seeds, no ± where one seed; methods tied
with the best in bold (the paired bootstrap's verdicts); methods as rows when they outnumber the sources; the
noise floor of calibration-error estimators."""

import numpy as np
import pandas as pd
import pytest

from calbench.report.tables import markdown_table, summary
from calbench.stats.noise_floor import debiased_id, is_calibration_error, noise_floor


def _long(values: dict, metric="nll") -> pd.DataFrame:
    return pd.DataFrame([{"source": s, "method": m, "seed": seed, "metric": metric, "value": v}
                         for (s, m), seeds in values.items() for seed, v in enumerate(seeds)])


def _rows(text):
    return {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("|")}


def test_a_cell_of_one_seed_shows_no_spread_and_two_seeds_show_their_std():
    long = _long({("a", "ts"): [0.1, 0.3], ("a", "uncal"): [0.5, 0.7], ("b", "ts"): [0.2], ("b", "uncal"): [0.4]})
    _, std, _ = summary(long, "nll")
    assert std.at["a", "ts"] == pytest.approx(0.1) and std.isna().at["b", "ts"]  # ddof = 0 over 2 seeds; none for 1
    rows = _rows(markdown_table(long, "nll"))
    assert "0.200 ± 0.100" in rows["a"] and "0.600 ± 0.100" in rows["a"]
    assert "±" not in rows["b"] and "0.200" in rows["b"] and "0.400" in rows["b"]
    assert "(1)" not in rows["a"]  # no ranks of noise


def _verdicts(tied: set, metric="nll", p=0.5, methods=("ts", "uncal", "vs")):
    return pd.DataFrame([{"source": s, "metric": metric, "method": m, "estimate": 0, "low": 0, "high": 0,
                          "best": "", "tied_with_best": (s, m) in tied, "p_value": p}
                         for s in ("a", "b") for m in methods])


def test_the_best_group_is_bold_and_counted_and_methods_become_rows_when_they_outnumber_sources():
    long = _long({(s, m): [0.1 * i + j * 0.01] for i, s in enumerate("ab", 1) for j, m in
                  enumerate(("ts", "uncal", "vs"))})
    text = markdown_table(long, "nll", verdicts=_verdicts({("a", "ts"), ("a", "uncal"), ("b", "ts")}))
    rows = _rows(text)
    assert rows["method"] == "| method | a | b | in best group |"  # 3 methods > 2 sources: methods as rows
    assert rows["ts"] == "| ts | **0.100** | **0.200** | 2/2 |"
    assert rows["uncal"] == "| uncal | **0.110** | 0.210 | 1/2 |" and rows["vs"] == "| vs | 0.120 | 0.220 | 0/2 |"
    assert "Holm α = 0.05" in text.splitlines()[0]


def test_the_best_group_counts_only_the_sources_a_method_ran_on():
    """A method that needs embeddings (kcal) runs on fewer sources: its count is k/N of those."""
    long = _long({("a", "ts"): [0.1], ("a", "uncal"): [0.2], ("a", "kcal"): [0.15], ("b", "ts"): [0.3],
                  ("b", "uncal"): [0.4]})
    rows = _rows(markdown_table(long, "nll", verdicts=_verdicts({("a", "ts"), ("a", "kcal"), ("b", "ts")},
                                                                  methods=("ts", "uncal", "kcal"))))
    assert rows["kcal"] == "| kcal | **0.150** | – | 1/1 |" and rows["uncal"].endswith("| 0/2 |")


def test_without_resampled_verdicts_nothing_is_marked_and_the_table_says_why():
    long = _long({("a", "ts"): [0.1], ("a", "uncal"): [0.2], ("b", "ts"): [0.3], ("b", "uncal"): [0.1]})
    text = markdown_table(long, "nll", verdicts=_verdicts(set(), p=np.nan))
    assert "**" not in text.split("\n", 1)[1] and "no marks" in text.splitlines()[0]
    assert _rows(text)["source"] == "| source | ts | uncal |"  # 2 methods, 2 sources: sources as rows


def test_a_default_sized_table_fits_120_columns():
    """16 methods (the default run's) on 4 sources, with two seeds: every line within 120 characters."""
    methods = ["uncal", "ts", "ets", "lece", "ts+lece", "hist_lece", "ts+irova", "irm", "platt", "beta",
               "pl3_conf", "vs", "ms_odir", "dir_l2", "dir_odir", "kcal"]
    sources = ["lece_synthetic", "planted_t2.5", "digits_vit", "mnist5k_resnet18"]
    long = _long({(s, m): [0.1234, 0.1345] for s in sources for m in methods})
    tied = {(s, m) for s in sources for m in methods[:3]}
    verdicts = pd.DataFrame([{"source": s, "metric": "nll", "method": m, "p_value": 0.5,
                              "tied_with_best": (s, m) in tied} for s in sources for m in methods])
    lines = markdown_table(long, "nll", methods, verdicts).splitlines()
    assert max(len(line) for line in lines if line.startswith("|")) <= 120


def test_the_noise_floor_of_a_calibrated_model_is_stated_and_bias_dominated_estimators_point_to_debiasing():
    """At 400 test rows and 97 % accuracy, 15-bin equal-mass ECE of a perfectly calibrated model is about 2.6 ±
    0.6 % here (every confidence 0.97, so each bin's gap is noise): the order of the differences between methods.
    The table says so and offers the debiased estimator."""
    rng = np.random.default_rng(0)
    confident = np.full((400, 10), 0.03 / 9)
    confident[np.arange(400), rng.integers(10, size=400)] = 0.97
    assert is_calibration_error("ece.conf.em15.l1") and not is_calibration_error("nll")
    assert not is_calibration_error("acc") and debiased_id("ece.conf.em15.l1") == "ece.conf.em15.l1.debiased"
    assert debiased_id("ece.conf.em15.l1.debiased") is None and debiased_id("kde_ece.conf.l1") is None
    floor, spread = noise_floor("ece.conf.em15.l1", [confident], draws=40)
    assert 0.015 < floor < 0.04 and spread > 0
    long = _long({("s", "ts"): [0.03], ("s", "uncal"): [0.06]}, metric="ece.conf.em15.l1")
    text = markdown_table(long, "ece.conf.em15.l1", floors={"s": (floor, spread, 400)})
    assert _rows(text)["*noise floor*"] == f"| *noise floor* | {100 * floor:.2f} ± {100 * spread:.2f} |"
    assert "`ece.conf.em15.l1.debiased` removes most of that bias" in text


def test_wide_summary_tables_are_split_into_blocks_that_fit_120_columns():
    """The average-rank table of the default run's 21 metrics, as blocks of columns that each fit a page."""
    from calbench.report.tables import fitted_tables

    metrics = [f"ece.conf.em{b}.l1.debiased" for b in range(10, 31)]
    lines = fitted_tables(["uncal", "ts+lece"], metrics, lambda m, c: "12.50")
    assert max(map(len, lines)) <= 120 and sum(line.startswith("| method |") for line in lines) > 1
    assert {c for line in lines if line.startswith("| method |") for c in line.strip("| ").split(" | ")[1:]} == \
        set(metrics)
