"""``calbench validate`` reports what the run would refuse of the data, so that a config that validates runs: a
fixed calibration part without some class (for a method that fits per class), more CV folds than calibration
rows, ``venn_abers_ovo`` with more classes than its ``max_classes``, and more metric bins than test rows."""

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
