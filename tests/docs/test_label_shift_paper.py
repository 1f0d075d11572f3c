"""config/label_shift_paper.yaml is the protocol of Alexandari, Kundaje & Shrikumar (ICML 2020, §5, Tables 1-2), and
docs/label_shift.md's paper block is what scripts/label_shift_paper.py writes from its recorded summary (the run is
not repeated here)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from calbench.config import load
from calbench.perf.docs_blocks import replace_blocks
from conftest import REPO

spec = importlib.util.spec_from_file_location("label_shift_paper", REPO / "scripts" / "label_shift_paper.py")
paper_script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paper_script)
CONFIG = REPO / "config" / "label_shift_paper.yaml"


@pytest.fixture(scope="module")
def config():
    return load(CONFIG)


def test_the_config_is_the_papers_protocol(config):
    # CIFAR-10: Dirichlet α ∈ {0.1, 1.0}, tweak-one ρ ∈ {0.01, 0.9}, n ∈ {2,000, 4,000, 8,000}; CIFAR-100: Dirichlet
    # α ∈ {10, 1, 0.1}, n ∈ {7,000, 8,500, 10,000}, no tweak-one; every CIFAR network of ../shared/data; ≥ 10 draws
    nets = {"cifar10_resnet-20", "cifar10_vgg19_bn", "cifar100_resnet-20", "cifar100_vgg19_bn"}
    found = {}
    for name, entry in config["sources"].items():
        dataset, net, n = paper_script._dataset_and_n(name)
        spec = entry["label_shift"]
        found.setdefault(f"{dataset}_{net}", set()).add(n)
        assert spec["size"] == n and spec["draws"] >= 10 and entry["split"]["cal_size"] == min(n, 5000)
        if dataset == "cifar10":
            assert sorted(spec["dirichlet"]) == [0.1, 1.0] and sorted(spec["tweak_one"]) == [0.01, 0.9]
        else:
            assert sorted(spec["dirichlet"]) == [0.1, 1.0, 10.0] and "tweak_one" not in spec
        assert {f"delta.acc.{e}" for e in ("em", "bbse_soft", "rlls", "bbse", "rlls_hard")} <= set(spec["metrics"])
        assert {f"weight_mse.{e}" for e in ("em", "bbse_soft", "rlls")} <= set(spec["metrics"])
    assert set(found) == nets
    assert all(found[n] == ({7000, 8500, 10000} if n.startswith("cifar100") else {2000, 4000, 8000}) for n in nets)
    assert config["methods"] == ["uncal", "ts", "nbvs", "bcts", "vs"] and len(config["seeds"]) >= 3


def test_the_papers_numbers_cover_the_protocol(config):
    # the authors' medians over 100 trials exist for every (dataset, shift, n) of the config and the paper's pairs
    numbers = json.loads(paper_script.PAPER.read_text())["numbers"]
    for name, entry in config["sources"].items():
        dataset, _, n = paper_script._dataset_and_n(name)
        for kind in ("dirichlet", "tweak_one"):
            for strength in entry["label_shift"].get(kind, []):
                for estimator, method in paper_script.PAIRS:
                    found = paper_script._paper(numbers, dataset, kind, strength, n, estimator, method)
                    assert found is not None and found["trials"] == 100, (name, kind, strength, estimator, method)


def test_committed_page_is_the_generated_one():
    summary = json.loads(paper_script.SUMMARY.read_text())
    paper = json.loads(paper_script.PAPER.read_text())
    page = paper_script.PAGE.read_text()
    assert page == replace_blocks(paper_script.PAGE, page, {paper_script.BLOCK: paper_script.block(summary, paper)}), \
        "docs/label_shift.md is out of date: run python scripts/label_shift_paper.py render"
    assert set(summary["ran"]) <= set(load(CONFIG)["sources"])
