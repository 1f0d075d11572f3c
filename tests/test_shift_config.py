"""Shift configs (docs/shift.md): `validate` refuses bad ones naming the field, and checks shift files."""

import re

import numpy as np
import pytest
import yaml

from calbench.__main__ import main
from calbench.config import ConfigError, load, load_schema, shift_sets
from calbench.corruptions import FAMILIES
from test_config_load import user_config

MODEL = {"type": "train", "dataset": "digits", "model": "timm:vit_tiny_r_s16_p8_224",
         "sizes": {"train": 100, "cal": 50, "test": 50}}


def _config(**shifts):
    return {"sources": {"m": {**MODEL, "shifts": shifts}}, "methods": ["ts"], "metrics": ["acc"]}


def test_the_schema_lists_exactly_the_implemented_corruption_families():
    enum = load_schema()["$defs"]["model_shifts"]["propertyNames"]["enum"]
    assert enum == list(FAMILIES)


def test_a_model_source_names_its_shifted_test_sets_family_slash_severity():
    entry = load(_config(rotate=[1, 3], gaussian_noise=[5]))["sources"]["m"]
    assert shift_sets(entry) == ["rotate/1", "rotate/3", "gaussian_noise/5"]


@pytest.mark.parametrize("config, message", [
    (_config(fog=[1]), r"config key sources.m.shifts: 'fog' is not allowed; allowed values: rotate, translate"),
    (_config(rotate=[6]), r"config key sources.m.shifts.rotate: severities \[6\] are not among rotate's 1-5 "
                          r"\(Ovadia et al.'s full grids: rotate_full 1-12, translate_full 1-13\)"),
    (_config(rotate_full=[13]), r"config key sources.m.shifts.rotate_full: severities \[13\] are not among "
                                r"rotate_full's 1-12$"),
    (_config(rotate=[0]), r"config key sources.m.shifts.rotate: severities \[0\] are not among rotate's 1-5"),
    (_config(rotate=[2, 2]), r"config key sources.m.shifts.rotate: severities \[2, 2\] repeat one"),
    ({"sources": {"m": {"type": "synthetic", "task": "lece3", "n_cal": 10, "n_test": 10, "shifts": {"rotate": [1]}}},
      "methods": ["ts"], "metrics": ["acc"]},
     r"config key sources.m.shifts: a synthetic source has neither images to corrupt nor files"),
])
def test_bad_shift_configs_are_refused_naming_the_field(config, message, tmp_path, capsys):
    with pytest.raises(ConfigError, match=message):
        load(config)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["validate", str(path)]) == 1
    assert re.search(message, capsys.readouterr().out)


def _import_with_shift(folder, logits_shape, severity=2):
    config = user_config(folder, rows=400)
    np.save(folder / "shift_logits.npy", np.random.default_rng(1).normal(size=logits_shape).astype(np.float32))
    np.save(folder / "shift_labels.npy", np.zeros(logits_shape[0], dtype=np.int64))
    config["sources"]["my_model"]["shifts"] = {"noise": [
        {"severity": severity, "files": {"logits": str(folder / "shift_logits.npy"),
                                         "labels": str(folder / "shift_labels.npy")}}]}
    return config


def _without_labels(config, path):
    config["sources"]["my_model"]["shifts"]["noise"][0]["files"]["labels"] = str(path)
    return config


@pytest.mark.parametrize("change, message", [
    (lambda f: _import_with_shift(f, (50, 5), severity=9), r"sources.my_model.shifts.noise.0.severity: 9 is greater"),
    (lambda f: _import_with_shift(f, (50, 7)), r"sources.my_model.shifts.noise.0.files: 7 classes, but the "
                                               r"source's other files have \[5\]"),
    (lambda f: _without_labels(_import_with_shift(f, (50, 5)), f / "gone.npy"),
     r"sources.my_model.shifts.noise.0.files: .*gone.npy does not exist"),
])
def test_validate_checks_the_files_of_an_import_sources_shifts(change, message, tmp_path, capsys):
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(change(tmp_path)))
    assert main(["validate", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), lines


def test_validate_passes_an_import_source_with_good_shift_files(tmp_path, capsys):
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(_import_with_shift(tmp_path, (50, 5))))
    assert main(["validate", str(path)]) == 0, capsys.readouterr().out
