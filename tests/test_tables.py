"""Ranked Markdown tables (calbench.report.tables): mean ± std over seeds, no ± where one seed."""

import pandas as pd
import pytest

from calbench.report.tables import markdown_table, summary


def _long(values: dict) -> pd.DataFrame:
    return pd.DataFrame([{"source": s, "method": m, "seed": seed, "metric": "nll", "value": v}
                         for (s, m), seeds in values.items() for seed, v in enumerate(seeds)])


def test_a_cell_of_one_seed_shows_no_spread_and_two_seeds_show_their_std():
    long = _long({("a", "ts"): [0.1, 0.3], ("a", "uncal"): [0.5, 0.7], ("b", "ts"): [0.2], ("b", "uncal"): [0.4]})
    _, std, _ = summary(long, "nll")
    assert std.at["a", "ts"] == pytest.approx(0.1) and std.isna().at["b", "ts"]  # ddof = 0 over 2 seeds; none for 1
    rows = {line.split(" | ")[0].strip("| "): line for line in markdown_table(long, "nll").splitlines()}
    assert "0.200 ± 0.100 (1)" in rows["a"] and "0.600 ± 0.100 (2)" in rows["a"]
    assert "±" not in rows["b"] and "0.200 (1)" in rows["b"] and "0.400 (2)" in rows["b"]
