"""config/label_shift_paper.yaml is the protocol of Alexandari, Kundaje & Shrikumar (ICML 2020, §5, Tables 1-2), and
docs/label_shift.md's paper block is what scripts/label_shift_paper.py writes from its recorded summary (the run is
not repeated here)."""

from __future__ import annotations

import json

import pytest

from calbench.config import load
from calbench.perf.docs_blocks import replace_blocks
from conftest import REPO, load_script

paper_script = load_script("label_shift_paper")
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
            assert spec["tweak_class"] == 3  # labelshiftexperiments (cifarandmnist.py) tweaks class 3 in every set
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


def _long(rows):
    import pandas as pd

    return pd.DataFrame(rows, columns=["source", "method", "seed", "test_set", "metric", "value"])


def test_summarise_takes_the_papers_medians_and_the_own_change_over_the_sets(config):
    # Alexandari et al. report medians over trials of Δacc against the uncalibrated model (Tables 1-2): three sets
    # of one seed where EM on TS gains 1, 2 and 6 points over uncal's accuracy and 0.5, 1, 3 over TS's own
    rows = []
    for i, (uncal, ts, em) in enumerate([(0.80, 0.805, 0.81), (0.70, 0.71, 0.72), (0.60, 0.63, 0.66)]):
        name = f"prior/dirichlet0.1/{i}"
        rows += [("cifar10_resnet-20_n2000", "uncal", 0, name, "acc", uncal),
                 ("cifar10_resnet-20_n2000", "ts", 0, name, "acc", ts),
                 ("cifar10_resnet-20_n2000", "ts", 0, name, "acc.em", em),
                 ("cifar10_resnet-20_n2000", "ts", 0, name, "weight_mse.em", [0.3, 0.1, 0.2][i]),
                 ("cifar10_resnet-20_n2000", "ts", 0, name, "collapse.em", 0.0)]
    summary = paper_script.summarise(_long(rows), config)
    [record] = summary["records"]
    assert (record["estimator"], record["method"], record["kind"], record["strength"]) == ("em", "ts", "dirichlet", 0.1)
    assert record["delta_acc"] == pytest.approx(0.02) and record["weight_mse"] == pytest.approx(0.2)
    mean, low, high = record["own"]
    assert mean == pytest.approx(0.015) and 0.005 <= low <= mean <= high <= 0.03
    assert record["verdict"] == "adapt" and record["collapsed"] == 0
    assert summary["ran"]["cifar10_resnet-20_n2000"] == {"seeds": [0], "draws": 10, "sets": 3, "cpu_s": None}


def test_run_reproduces_the_committed_numbers(config, tmp_path):
    # the committed page's CIFAR-10 ResNet-20 n = 2,000 cells (40 sets: 3 seeds × 10 draws × 4 strengths) are what
    # run_source computes from the shared logits (about 10 CPU-s)
    from conftest import shared_data

    source = "cifar10_resnet-20_n2000"
    folder = shared_data("logits", "cifar10_resnet-20")
    one = {**config, "sources": {source: dict(config["sources"][source])}}
    files = one["sources"][source]["files"]
    one["sources"][source]["files"] = {k: {**files[k], "url": (folder / f"{name}.npy").as_uri()}
                                       for k, name in (("logits", "scores"), ("labels", "targets"))}
    rows, _ = paper_script.run_source(one, source, tmp_path)
    found = paper_script.summarise(_long(rows), one)["records"]
    committed = [r for r in json.loads(paper_script.SUMMARY.read_text())["records"] if r["source"] == source]
    assert committed and found == committed
