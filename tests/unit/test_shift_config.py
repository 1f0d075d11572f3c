"""Shift configs (docs/shift.md): `validate` refuses bad ones naming the field, and checks shift files."""

import re

import numpy as np
import pytest
import yaml

from calbench.__main__ import main
from calbench.config import ConfigError, load, load_schema, shift_sets
from calbench.corruptions import FAMILIES
from conftest import user_config

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
    (_config(mnistc_frost=[1]), r"config key sources.m.shifts: 'mnistc_frost' is not allowed"),
    (_config(mnistc_shear=[2]), r"config key sources.m.shifts.mnistc_shear: severities \[2\] are not among "
                                r"mnistc_shear's 1-1 \(MNIST-C publishes one severity\)$"),
    (_config(rotate=[2, 2]), r"config key sources.m.shifts.rotate: severities \[2, 2\] repeat one"),
    ({"sources": {"m": {"type": "import", "format": "npy", "files": {"logits": "a.npy", "labels": "b.npy"},
                        "split": {"cal_size": 5}, "shifts": {"n": [{"severity": 1, "files": {"logits": "x.npy"},
                                                                    "rows": "r.npy", "aligned": True}]}}},
      "methods": ["ts"], "metrics": ["acc"]},
     r"config key sources.m.shifts.n.0: give `rows` \(the pool row of each row\) or `aligned: true`"),
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
    assert re.search(message, capsys.readouterr().err)


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
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), lines


def test_validate_passes_an_import_source_with_good_shift_files(tmp_path, capsys):
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(_import_with_shift(tmp_path, (50, 5))))
    assert main(["validate", str(path)]) == 0, capsys.readouterr().out


def _pooled_with_shift(folder, take=None, rows=None, **alignment):
    """The 400-row pooled import with one shifted set of the pool rows ``take`` (all by default), its labels those
    rows' labels; ``rows``: saved as shift_rows.npy (the declared pool row of each row)."""
    config = user_config(folder, rows=400)
    labels = np.load(folder / "labels.npy")[np.arange(400) if take is None else take]
    np.save(folder / "shift_logits.npy", np.random.default_rng(1).normal(size=(labels.size, 5)).astype(np.float32))
    np.save(folder / "shift_labels.npy", labels)
    if rows is not None:
        np.save(folder / "shift_rows.npy", rows)
        alignment = {"rows": str(folder / "shift_rows.npy"), **alignment}
    files = {"logits": str(folder / "shift_logits.npy"), "labels": str(folder / "shift_labels.npy")}
    config["sources"]["my_model"]["shifts"] = {"noise": [{"severity": 3, "files": files, **alignment}]}
    return config


REVERSED = np.arange(399, -1, -1)


@pytest.mark.parametrize("setup, message", [
    ({}, r"sources.my_model.shifts.noise.0: has the pool's 400 rows, so it may hold shifted copies of every "
         r"seed's calibration rows among its test rows; say how its rows align with the pool: `aligned: true`"),
    ({"take": REVERSED, "aligned": True}, r"shifts.noise.0.aligned: \d+ of 400 rows carry other labels than the pool"),
    ({"take": np.arange(300), "aligned": True}, r"shifts.noise.0.aligned: the set has 300 rows and the pool 400"),
    ({"take": np.arange(20), "rows": np.arange(390, 410)},
     r"shifts.noise.0.rows: pool rows must lie in \[0, 400\), found 390..409"),
    ({"take": np.arange(20), "rows": np.arange(10)}, r"shifts.noise.0.rows: expected 20 integers"),
])
def test_validate_refuses_a_pooled_sources_shift_that_may_hold_calibration_rows(setup, message, tmp_path, capsys):
    """A shifted copy of a pooled source's pool (e.g. CIFAR-10-C for CIFAR-10's test set) evaluated in full would
    put corrupted copies of each seed's calibration rows among its test rows."""
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(_pooled_with_shift(tmp_path, **setup)))
    assert main(["validate", str(path)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), lines


def test_an_aligned_shift_is_evaluated_on_each_seeds_test_rows_only(tmp_path, capsys):
    """``rows`` (the pool row of each shifted row) and ``aligned: true`` pass validate; the shift dump keeps the
    pool rows, and each seed's evaluation takes exactly the shifted rows of its own test rows."""
    from calbench import save
    from calbench.data import sources, splits, store
    from calbench.jobs.evaluate import shifted_predictions
    from calbench.jobs.sources import ShiftsSpec, dump_source_shifts_job
    from calbench.methods import make
    from calbench.scores import Scores

    rows = np.random.default_rng(2).permutation(400)[:250]
    for setup, expected in (({"take": rows, "rows": rows}, rows), ({"aligned": True}, None)):
        config = _pooled_with_shift(tmp_path, **setup)
        path = tmp_path / "my.yaml"
        path.write_text(yaml.safe_dump(config))
        assert main(["validate", str(path)]) == 0, capsys.readouterr().out
        entry = load(config)["sources"]["my_model"]
        sources.make_dump("my_model", entry, [0], tmp_path / "dump.h5", tmp_path)
        dump_source_shifts_job(spec=ShiftsSpec(source="my_model", entry=entry, cache_dir=tmp_path,
                                               dump=tmp_path / "dump.h5", shifts=tmp_path / "shifts.h5"))
        pool_rows = np.arange(400) if expected is None else expected
        np.testing.assert_array_equal(store.read_group(tmp_path / "shifts.h5", "shift/noise/3")["pool_rows"], pool_rows)
        part = splits.load_split(tmp_path / "dump.h5", 0, entry["split"])
        save(make("ts").fit(Scores(part["cal"]["logits"]), part["cal"]["labels"]), tmp_path / "ts.safetensors",
             input_kind="logits")
        [(name, probs, labels, _)] = shifted_predictions(tmp_path / "shifts.h5", tmp_path / "ts.safetensors",
                                                          part["test_index"])
        mine = np.isin(pool_rows, part["test_index"])
        assert name == "noise/3" and probs.shape[0] == mine.sum() < pool_rows.size
        np.testing.assert_array_equal(labels, np.load(tmp_path / "labels.npy")[pool_rows[mine]])
        assert not np.isin(pool_rows[mine], part["cal_index"]).any()


def test_alignment_of_a_source_with_fixed_parts_is_refused(tmp_path):
    from calbench.data.sources import shift_pool_rows

    with pytest.raises(ValueError, match=r"x.aligned: aligns rows with a pool, but the source has fixed cal and test"):
        shift_pool_rows({"aligned": True}, np.zeros(5, dtype=int), None, "x")
