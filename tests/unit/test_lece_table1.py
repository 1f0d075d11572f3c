"""LECE paper Table 1 (synthetic task, §4.1): H-LECD, H-LECE, TS, LECE (k = 500, t = 0) and the true map.

The paper reports mean ± std over 100 seeds with 100 000 test points each. Here: 5 seeds with 20 000
test points, to stay fast. Tolerance, per metric and method:

    |our mean − paper mean| ≤ 2·paper_sd + 2·our_sd/√5 + 0.0005

* 2·paper_sd is the issue's criterion for the full reproduction (config/lece_table1.yaml);
* our 5-seed mean is itself uncertain, with standard error our_sd/√5 (our_sd is larger than the
  paper's because our test sets are 5× smaller), so we allow two of those on top;
* the paper prints 3 decimals, so its means are known to ± 0.0005.
Our generator draws from the same distributions as the authors' but with a different random stream,
so seed-by-seed agreement is not expected — only agreement of the means.
"""

import numpy as np
import pandas as pd
import pytest
import yaml

from calbench.data.synthetic import generate
from calbench.methods import make
from calbench.metrics import evaluate
from calbench.report.paper_comparison import comparison_markdown
from calbench.report.paper_values import LECE_TABLE1, LECE_TABLE1_ROUNDING
from conftest import REPO, run_snakemake

SEEDS = range(5)
N_TEST = 20_000
TABLE1_SETTINGS = {"hist_lecd": {"n_bins": 5}, "hist_lece": {"n_bins": 5}, "ts": {},
                   "lece": {"q": 0.1, "t": 0.0, "grid": None}}


@pytest.fixture(scope="module")
def long_results() -> pd.DataFrame:
    metric_ids = list(LECE_TABLE1)
    rows = []
    for seed in SEEDS:
        data = generate("lece3", seed, 5000, N_TEST)
        cal, test = data["cal"], data["test"]
        outputs = {"true": test["true_probs"]}
        for name, settings in TABLE1_SETTINGS.items():
            outputs[name] = make(name, **settings).fit(cal["logits"], cal["labels"]).predict_proba(test["logits"])
        for method, probs in outputs.items():
            values = evaluate(probs, test["labels"], metric_ids, true_probs=test["true_probs"])
            rows += [{"source": "lece3", "method": method, "seed": seed, "metric": m, "value": v}
                     for m, v in values.items()]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("method", ["hist_lecd", "hist_lece", "ts", "lece", "true"])
@pytest.mark.parametrize("metric", list(LECE_TABLE1))
def test_table1_means_within_two_paper_sds(long_results, metric, method):
    values = long_results.query("metric == @metric and method == @method")["value"].to_numpy()
    paper_mean, paper_sd = LECE_TABLE1[metric][method]
    tolerance = 2 * paper_sd + 2 * values.std() / np.sqrt(values.size) + LECE_TABLE1_ROUNDING
    assert abs(values.mean() - paper_mean) <= tolerance, (metric, method, values.mean(), paper_mean, tolerance)


def test_lece_beats_the_baselines_as_in_table1(long_results):
    """The table's ordering on the calibration errors: LECE < H-LECE < TS < H-LECD."""
    means = long_results.groupby(["metric", "method"])["value"].mean()
    for metric in ("true_ce.conf.l1", "true_ce.cw.l1"):
        assert means[metric, "lece"] < means[metric, "ts"] < means[metric, "hist_lecd"]
        assert means[metric, "hist_lece"] < means[metric, "ts"]


def test_comparison_table_marks_each_cell(long_results):
    text = comparison_markdown(long_results, "lece3", "lece_table1")
    assert "| confidence CE |" in text and text.count(" ✓ |") == 25
    assert "– / 0.022 ± 0.004" in text  # DIR: paper value shown, no result of ours yet


@pytest.mark.workflow
def test_config_regenerates_the_comparison_table(tmp_path):
    config = yaml.safe_load((REPO / "config" / "lece_table1.yaml").read_text())
    config["seeds"] = [0, 1]
    config["sources"]["lece3_paper"]["n_test"] = 3000
    config["figures"] = None  # the table is the point: no reliability diagrams
    run_snakemake(tmp_path, config)
    text = (tmp_path / "results" / "tables" / "paper_comparison.md").read_text()
    assert "2 seeds" in text and "| log-loss |" in text
    assert text.count("/") >= 30 and "H-LECE" in text
