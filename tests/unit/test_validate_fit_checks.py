"""``calbench validate`` reports what the run would refuse of the data, so that a config that validates runs: a
calibration part without some class (for a method that fits per class: a fixed part, or a pooled source's split of
a seed), more CV folds than calibration rows, ``venn_abers_ovo`` with more classes than its ``max_classes``, and
more metric bins than test rows."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from calbench.cli import validate


def _import_config(tmp_path, cal_labels, methods, metrics=("nll",), settings=None, classes=4):
    rng = np.random.default_rng(0)
    files = {}
    for split, labels in (("cal", np.asarray(cal_labels)), ("test", np.arange(40) % classes)):
        np.save(tmp_path / f"{split}_logits.npy", rng.normal(size=(labels.size, classes)))
        np.save(tmp_path / f"{split}_labels.npy", labels)
        files[split] = {"logits": str(tmp_path / f"{split}_logits.npy"),
                        "labels": str(tmp_path / f"{split}_labels.npy")}
    config = {"sources": {"s": {"type": "import", "format": "npy", "files": files}}, "methods": list(methods),
              "metrics": list(metrics), "method_settings": settings or {}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("cal_labels, methods, settings, metrics, problem", [
    (np.arange(30) % 3, ["irova"], None, ["nll"],
     r"sources.s: method irova needs calibration examples of every class, but 1 of 4 classes have none"),
    (np.arange(8) % 4, ["ts", "lece"], None, ["nll"],
     r"sources.s: method lece: cv.folds = 10, more than the 8 calibration rows; lower cv.folds"),
    (np.arange(40) % 4, ["venn_abers_ovo"], {"venn_abers_ovo": {"max_classes": 3}}, ["nll"],
     r"sources.s: method venn_abers_ovo: 4 classes, over max_classes = 3"),
    (np.arange(40) % 4, ["ts"], None, ["ece.conf.em100.l1"],
     r"sources.s: metric ece.conf.em100.l1: 100 bins for 40 test rows"),
])
def test_validate_reports_what_fit_and_the_metrics_would_refuse(tmp_path, capsys, cal_labels, methods, settings,
                                                                 metrics, problem):
    path = _import_config(tmp_path, cal_labels, methods, metrics, settings)
    assert validate.run(SimpleNamespace(config=str(path), json=False)) == 1
    out = capsys.readouterr().err
    assert any(re.search(problem, line) for line in out.splitlines()), out


def test_a_config_whose_data_fit_validates(tmp_path, capsys):
    path = _import_config(tmp_path, np.arange(40) % 4, ["ts", "irova"], ["ece.conf.em15.l1"])
    assert validate.run(SimpleNamespace(config=str(path), json=False)) == 0, capsys.readouterr().out


def _pooled_config(tmp_path, labels, split, seeds, methods=("irova",)):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "logits.npy", rng.normal(size=(labels.size, 4)))
    np.save(tmp_path / "labels.npy", labels)
    config = {"seeds": list(seeds), "methods": list(methods), "metrics": ["nll"],
              "sources": {"pool": {"type": "import", "format": "npy", "split": split,
                                   "files": {"logits": str(tmp_path / "logits.npy"),
                                             "labels": str(tmp_path / "labels.npy")}}}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("stratify, fix", [
    (False, "set split.stratify: true or a larger split.cal_size (or cal_fraction)"),
    (True, "set a larger split.cal_size (or cal_fraction)")])
def test_validate_names_each_seed_whose_split_misses_a_class(tmp_path, capsys, stratify, fix):
    """A pooled source is split per seed (the split job's draw): class 3 has 5 of the 200 rows, so some seeds' 20
    calibration rows have none of it (stratified: 0.5 rows expected), and irova (one map per class) refuses to fit
    there; validate names exactly those seeds, found by fitting on each seed's calibration part as the calibrate job
    does."""
    from calbench.data.splits import split_pool
    from calbench.methods.registry import make

    labels = np.r_[np.arange(195) % 3, [3] * 5]
    path = _pooled_config(tmp_path, labels, {"cal_size": 20, "stratify": stratify}, seeds=range(8))
    assert validate.run(SimpleNamespace(config=str(path), json=False)) == 1
    lines = capsys.readouterr().err.splitlines()
    logits, refused = np.load(tmp_path / "logits.npy"), set()
    for seed in range(8):
        cal = split_pool(labels, seed, cal_size=20, stratify=stratify, logits=logits)[0]
        try:
            make("irova").fit(logits[cal], labels[cal])
        except ValueError:
            refused.add(seed)
    assert refused and len(refused) < 8  # the case tells seeds apart
    named = {int(m.group(1)) for line in lines if (m := re.search(r"the split of seed (\d+) ", line))}
    assert named == refused
    for line in lines:
        assert line.startswith(f"{path}: sources.pool: method irova needs calibration examples of every class")
        assert "(cal_size: 20) draws a calibration part where 1 of 4 classes have none among the 20 calibration " \
               "labels (classes 3)" in line and line.endswith(fix), line


def test_validate_passes_a_pooled_source_whose_every_split_has_every_class(tmp_path, capsys):
    path = _pooled_config(tmp_path, np.arange(200) % 4, {"cal_size": 20}, seeds=range(8))
    assert validate.run(SimpleNamespace(config=str(path), json=False)) == 0, capsys.readouterr().err


def test_validate_refuses_more_cv_folds_than_a_pooled_split_has_rows(tmp_path, capsys):
    path = _pooled_config(tmp_path, np.arange(200) % 4, {"cal_size": 8}, seeds=[0], methods=["lece"])
    assert validate.run(SimpleNamespace(config=str(path), json=False)) == 1
    assert "sources.pool: method lece: cv.folds = 10, more than the 8 calibration rows" in capsys.readouterr().err
