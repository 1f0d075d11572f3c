"""docs/shift.md's measured blocks are what scripts/shift_page.py writes from its recorded summary (the run of
config/shift.yaml is not repeated here), the summary covers that run, and its corruption constants are the ones
calbench.corruptions uses now (a change to a family's constants makes the page's numbers stale)."""

from __future__ import annotations

import json

import pytest

from calbench.config import load
from calbench.corruptions import severity_constant
from calbench.perf.docs_blocks import block_names
from conftest import load_script

shift_page = load_script("shift_page")


@pytest.fixture(scope="module")
def summary():
    return json.loads(shift_page.SUMMARY.read_text())


def test_committed_page_is_the_generated_one(summary):
    page = shift_page.PAGE.read_text()
    assert page == shift_page.render(summary, page), \
        "docs/shift.md is out of date: run python scripts/shift_page.py render"
    assert set(block_names(page)) == set(shift_page.blocks(summary)), "a block of docs/shift.md has no renderer"
    assert len(page.splitlines()) <= 400


def test_summary_covers_the_run(summary):
    config = load(shift_page.CONFIG)
    assert summary["methods"] == config["methods"]
    for source, entry in summary["sources"].items():
        families = list(config["sources"][source]["shifts"])
        sets = {"clean", *(f"{f}/{k}" for f in families for k in config["sources"][source]["shifts"][f])}
        for metric in shift_page.SET_METRICS:
            for method in config["methods"]:
                values = entry["sets"][metric][method]
                assert set(values) == sets, (source, metric, method)
                assert all(len(v) == len(config["seeds"]) and None not in v for v in values.values())
        for metric in shift_page.CELL_METRICS:
            for method in config["methods"]:
                assert set(entry["cells"][metric][method]) == {"0", "1", "2", "3", "4", "5", shift_page.UNDER_SHIFT}
        assert [level["seed"] for level in entry["perturbed"]] == config["seeds"]


def test_recorded_constants_are_the_current_ones(summary):
    # the page's numbers were measured with these constants: a family whose constants change needs the run again
    for entry in summary["sources"].values():
        for family, recorded in entry["constants"].items():
            now = [severity_constant(family, k, "imagenet_c_grey", entry["side"]) for k in range(1, 6)]
            assert json.loads(json.dumps(now)) == recorded, (family, entry["side"])


def test_counts_and_ranks_follow_the_seed_means():
    # two shifted sets: ts is below uncal on one (0.2 < 0.3), above on the other; on the clean split ts ranks first
    entry = {"sets": {"nll": {"uncal": {"clean": [0.5, 0.5], "a/1": [0.3, 0.3], "b/1": [0.1, 0.1]},
                              "ts": {"clean": [0.4, 0.4], "a/1": [0.1, 0.3], "b/1": [0.2, 0.2]}}},
             "cells": {"nll": {m: {c: [v, v - 0.1, v + 0.1, "", ""] for c, v in (("0", base), ("1", base + 0.1),
                                                                               (shift_page.UNDER_SHIFT, base + 0.2))}
                               for m, base in (("uncal", 0.5), ("ts", 0.4))}}}
    assert shift_page._below(entry, "nll", "ts") == "1 of 2"
    assert shift_page._ranks(entry, "nll", "0", ["uncal", "ts"]) == {"uncal": 2, "ts": 1}
    table = shift_page.severity_table(entry, "nll", ["uncal", "ts"])
    assert table[-1].endswith("| 1 of 2 | 1 → 1 |")
