"""The shift tables' intervals and marks (docs/shift.md, "How to read the tables"): the paired bootstrap of
calbench.stats over the rows of each cell, differences from uncal paired, and the statements of
over- and under-confidence from the signed calibration error sce.conf where its interval excludes 0."""

import numpy as np
import pandas as pd
import pytest

from calbench.metrics import evaluate
from calbench.report.shift import UNDER_SHIFT, severity_markdown, shift_cells
from calbench.stats.draws import mean_over_sets, source_draws
from calbench.stats.paired import against_reference

METRICS = ["nll", "sce.conf", "ece.conf.em15.l1", "ks.conf"]
SETS = ("clean", "rotate/1", "gaussian_noise/1", "rotate/2")


def _outputs(n=600):
    """(set, method, seed) → outputs: ``ts`` the true probabilities (calibrated), ``uncal`` them sharpened (cubed
    and renormalised: over-confident), ``soft`` them flattened (square root: under-confident); a shifted set
    flattens the true probabilities more at each severity."""
    outputs = {}
    for seed in (0, 1):
        for k, name in enumerate(SETS):
            rng = np.random.default_rng([seed, k])
            logits = rng.normal(0, 3.0 / (1 + int(name[-1]) if name != "clean" else 1.0), (n, 3))
            true = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            labels = (rng.random(n)[:, None] > np.cumsum(true, axis=1)).sum(axis=1)
            for method, power in (("uncal", 3.0), ("ts", 1.0), ("soft", 0.5)):
                probs = true**power / (true**power).sum(axis=1, keepdims=True)
                outputs[name, method, seed] = {"probs": probs, "labels": labels, "index": np.arange(n)}
    return outputs


def _long(outputs):
    rows = [("src", method, seed, name, metric, value) for (name, method, seed), out in outputs.items()
            for metric, value in evaluate(out["probs"], out["labels"], METRICS, seed=seed).items()]
    return pd.DataFrame(rows, columns=["source", "method", "seed", "test_set", "metric", "value"])


@pytest.fixture(scope="module")
def cells():
    outputs = _outputs()
    return _long(outputs), shift_cells(_long(outputs), METRICS, lambda source, name, method, seed: outputs.get(
        (name, method, seed)), resamples=200)


def test_each_cell_is_the_tables_mean_with_an_interval_around_it(cells):
    long, cells = cells
    nll = cells[(cells["metric"] == "nll")].set_index(["method", "column"])
    shifted = long[(long["metric"] == "nll") & (long["test_set"] != "clean")]
    assert nll.at[("ts", UNDER_SHIFT), "estimate"] == pytest.approx(shifted[shifted["method"] == "ts"]["value"].mean())
    severity2 = long[(long["metric"] == "nll") & (long["test_set"] == "rotate/2") & (long["method"] == "ts")]
    assert nll.at[("ts", 2), "estimate"] == pytest.approx(severity2["value"].mean())
    assert (nll["low"] < nll["estimate"]).all() and (nll["estimate"] < nll["high"]).all()
    assert set(nll.index.get_level_values("column")) == {0, 1, 2, UNDER_SHIFT}
    assert cells.loc[cells["metric"] == "ece.conf.em15.l1", "low"].notna().all()  # bins' row-weighted form
    assert cells.loc[cells["metric"] == "ks.conf", "low"].notna().all()  # KS's row-weighted form


def test_a_cell_without_an_interval_is_marked_and_the_table_says_why():
    """MMCE has no row-weighted form (recomputed on every resample only on request): no interval, marked †."""
    outputs = _outputs(200)
    long = _long(outputs)
    long = long[long["metric"] == "nll"].assign(metric="mmce.conf", value=0.01)
    cells = shift_cells(long, ["mmce.conf"], lambda source, name, method, seed: outputs.get((name, method, seed)),
                        resamples=20)
    assert cells["low"].isna().all() and cells["note"].str.contains("--recompute").all()
    table = severity_markdown(long, "mmce.conf", cells)
    assert "no intervals or marks" in table and table.split("| uncal |")[1].splitlines()[0].count("†") == 4
    assert "† uncal, ts, soft (clean, severity 1, severity 2, under shift): no row-weighted form" in table


def test_differences_from_uncal_are_paired_and_marked(cells):
    """The calibrated outputs beat the over-confident uncal in NLL in every column; paired (the same rows drawn for
    both), the difference's interval is narrower than that of independent draws, √(w_ts² + w_uncal²)."""
    long, cells = cells
    nll = cells[cells["metric"] == "nll"].set_index(["method", "column"])
    ts = nll.xs("ts", level="method")
    assert (ts["difference_high"] < 0).all() and (ts["p_value"] < 0.05).all()
    assert np.isnan(nll.xs("uncal", level="method")["difference"]).all()
    width = ts["difference_high"] - ts["difference_low"]
    uncal = nll.xs("uncal", level="method")
    assert (width < 0.9 * np.hypot(ts["high"] - ts["low"], uncal["high"] - uncal["low"])).all()
    table = severity_markdown(long, "nll", cells, ["uncal", "ts", "soft"])
    ts_line = next(line for line in table.splitlines() if line.startswith("| ts |"))
    assert ts_line.count(" +") == 4 and "−" not in ts_line


def test_over_and_under_confidence_come_from_the_signed_error_where_its_interval_excludes_zero(cells):
    long, cells = cells
    sce = cells[cells["metric"] == "sce.conf"].set_index(["method", "column"])
    assert (sce.xs("uncal", level="method")["low"] > 0).all()
    assert (sce.xs("soft", level="method")["high"] < 0).all()
    assert sce["difference"].isna().all()  # a signed metric is not compared with uncal
    table = severity_markdown(long, "sce.conf", cells, ["uncal", "ts", "soft"])
    assert "- uncal: over-confident at clean, severity 1, severity 2, under shift" in table
    assert "- soft: under-confident at clean, severity 1, severity 2, under shift" in table
    ts = sce.xs("ts", level="method")
    statement = table.split("- ts: ")[1].splitlines()[0]  # calibrated: a statement only where the interval says so
    assert ("over-confident" in statement) == (ts["low"] > 0).any()
    assert ("under-confident" in statement) == (ts["high"] < 0).any()
    unresampled = cells.assign(low=np.nan, high=np.nan)  # no interval: no claim either way
    assert "- uncal: no interval, so neither" in severity_markdown(long, "sce.conf", unresampled, ["uncal"])


def test_the_mean_over_sets_averages_estimates_and_resamples():
    outputs = _outputs(200)
    parts = [source_draws("src", [0, 1], ["uncal", "ts"], ["nll"], lambda m, s, name=name: outputs[name, m, s], 50)
             for name in SETS[1:3]]
    mean = mean_over_sets(parts, "src")
    np.testing.assert_allclose(mean.estimates["nll"], (parts[0].estimates["nll"] + parts[1].estimates["nll"]) / 2)
    np.testing.assert_allclose(mean.draws["nll"], (parts[0].draws["nll"] + parts[1].draws["nll"]) / 2)
    same = against_reference(parts[0], "nll", reference="uncal").set_index("method")
    assert same.at["ts", "difference"] < 0 and same.at["uncal", "estimate"] == pytest.approx(
        parts[0].estimates["nll"][0].mean())
    with pytest.raises(ValueError, match="differ in their methods or seeds"):
        mean_over_sets([parts[0], source_draws("src", [0], ["uncal", "ts"], ["nll"],
                                               lambda m, s: outputs["clean", m, s], 50)], "src")
