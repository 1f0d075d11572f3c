"""The docs' blocks derived from the code are what scripts/code_blocks.py writes (the package map of
docs/developing.md from the layer list, the local and cluster rules of docs/operations.md, the rule table of
docs/architecture.md), and every rule keeps the habits that table shows: a log, a benchmark and a conda env."""

from __future__ import annotations

import importlib.util

from calbench.jobs.spec import SPECS
from calbench.perf.docs_blocks import block_names
from conftest import REPO

spec = importlib.util.spec_from_file_location("code_blocks", REPO / "scripts" / "code_blocks.py")
code_blocks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(code_blocks)


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
    scripted = {r["name"] for r in code_blocks.rules() if "script" in r["directives"]}
    assert scripted == set(SPECS), (scripted ^ set(SPECS))


def test_the_layer_table_names_every_module_of_the_layer_list():
    table = code_blocks.layer_table()
    for names in code_blocks.layers():
        for name in names:
            assert f"`{name}`" in table or f"`{name}/`" in table, name
