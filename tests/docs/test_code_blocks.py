"""The docs' blocks derived from the code are what scripts/code_blocks.py writes (the package map of
docs/developing.md from the layer list, the local and cluster rules of docs/operations.md, the rule table of
docs/architecture.md, README.md's fields of ``recommend --json``), every rule keeps the habits that table shows (a
log, a benchmark and a conda env), and the records ``recommend --json`` prints have the fields that README lists."""

from __future__ import annotations

import json

import numpy as np

from calbench.__main__ import main
from calbench.jobs.recommendation import BEST_FIELDS, FIELDS
from calbench.jobs.spec import SPECS
from calbench.perf.docs_blocks import block_names
from calbench.stats.paired import Verdict
from conftest import REPO, load_script, write_finished_run

code_blocks = load_script("code_blocks")


def test_committed_blocks_are_the_generated_ones():
    stale = [str(path.relative_to(REPO)) for path, text in code_blocks.pages().items() if path.read_text() != text]
    assert not stale, f"generated blocks out of date in {', '.join(stale)}: run python scripts/code_blocks.py"


def test_every_block_is_in_its_page():
    for page, blocks in code_blocks.BLOCKS.items():
        assert set(blocks) <= set(block_names((REPO / page).read_text())), page


def test_every_rule_has_a_log_a_benchmark_and_a_conda_env():
    rules = code_blocks.rules()
    assert len(rules) >= 20
    lacking = [(r["name"], d) for r in rules for d in ("log", "benchmark", "conda") if d not in r["directives"]]
    assert not lacking, lacking


def test_every_rule_with_a_script_has_a_spec():
    scripted = {r["name"] for r in code_blocks.rules() if r["script"]}
    assert scripted == set(SPECS), (scripted ^ set(SPECS))


def test_the_layer_table_names_every_module_of_the_layer_list():
    table = code_blocks.layer_table()
    for names in code_blocks.layers():
        for name in names:
            assert f"`{name}`" in table or f"`{name}/`" in table, name


def test_recommend_json_records_have_the_fields_readme_lists(tmp_path, capsys):
    """Every record has exactly :data:`FIELDS` (a Verdict's first, in order) and the best's also
    :data:`BEST_FIELDS` (the noise floor's for an ECE), so that README's generated list is the records' own."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(600, 3)) * 3
    labels = (np.cumsum(np.exp(logits / 2) / np.exp(logits / 2).sum(1, keepdims=True), 1)
              > rng.random((600, 1))).argmax(1)
    outputs = {m: np.exp(logits / t) / np.exp(logits / t).sum(1, keepdims=True)
               for m, t in (("uncal", 1.0), ("ts", 2.0), ("ts_off", 2.5))}
    write_finished_run(tmp_path, outputs, labels, ["acc", "nll", "ece.conf.em15.l1"])
    assert list(FIELDS)[:len(Verdict.__dataclass_fields__)] == list(Verdict.__dataclass_fields__)
    for metric, best_only in (("nll", ["acc_flag", "uncal_in_best_group"]), ("ece.conf.em15.l1", list(BEST_FIELDS))):
        assert main(["recommend", str(tmp_path), "--metric", metric, "--json", "--resamples", "50"]) == 0
        best, *others = json.loads(capsys.readouterr().out)
        assert list(best) == [*FIELDS, *best_only], metric
        assert others and all(list(r) == list(FIELDS) for r in others), metric
