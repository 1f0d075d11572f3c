"""Configs that make the tables claim what the data do not support are refused or flagged by ``validate`` (and the
split keeps copies of a row together): each test starts from a config that passed before."""

import numpy as np
import pytest
import yaml

from calbench.cli import main
from calbench.config import ConfigError, load
from calbench.data.copies import copies
from calbench.data.splits import split_pool
from calbench.methods.registry import resolved


def _logits(rows, seed=0, classes=3):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(rows, classes)) * 2
    return z.astype(np.float32), (z + rng.gumbel(size=z.shape)).argmax(axis=1)


def _config(tmp_path, sources, methods=("uncal", "ts")) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"seeds": [0], "sources": sources, "methods": list(methods),
                                    "metrics": ["nll", "acc"]}))
    return str(path)


def _files(tmp_path, name, logits, labels) -> dict:
    np.save(tmp_path / f"{name}_z.npy", logits)
    np.save(tmp_path / f"{name}_y.npy", labels)
    return {"logits": str(tmp_path / f"{name}_z.npy"), "labels": str(tmp_path / f"{name}_y.npy")}


def _import(files, split=None) -> dict:
    entry = {"type": "import", "format": "npy", "scores": "logits", "files": files}
    return {**entry, "split": split} if split else entry


def test_method_names_that_fit_the_same_calibrator_are_refused_naming_both(tmp_path):
    """ts, ts+uncal and ts+ts are one calibrator (uncal is the identity; temperatures compose to a temperature)."""
    assert resolved("ts+uncal") == resolved("uncal+ts") == resolved("ts+ts") == "ts"
    assert resolved("ts+lece") == "ts+lece" and resolved("uncal") == "uncal" and resolved("lece+lece") == "lece+lece"
    sources = {"s": {"type": "synthetic", "task": "planted_temperature", "num_classes": 3, "n_cal": 100,
                     "n_test": 100}}
    load(_config(tmp_path, sources, ["uncal", "ts", "ts+lece"]))  # distinct: passes
    for twin in ("ts+uncal", "ts+ts"):
        with pytest.raises(ConfigError, match=rf"'ts' and '{twin.replace('+', '[+]')}' fit the same calibrator"):
            load(_config(tmp_path, sources, ["uncal", "ts", twin]))


def test_a_test_part_that_repeats_calibration_rows_is_refused(tmp_path, capsys):
    z, y = _logits(400)
    cal = _files(tmp_path, "cal", z[:200], y[:200])
    assert main(["validate", _config(tmp_path, {"m": _import({"cal": cal, "test": _files(
        tmp_path, "test", z[200:], y[200:])})})]) == 0
    same = main(["validate", _config(tmp_path, {"m": _import({"cal": cal, "test": cal})})])
    out = capsys.readouterr().err
    assert same == 1 and "sources.m.files.test: 200 of its 200 rows are also calibration rows" in out
    partly = _files(tmp_path, "partly", z[150:350], y[150:350])  # 50 rows copied from the calibration file
    assert main(["validate", _config(tmp_path, {"m": _import({"cal": cal, "test": partly})})]) == 1
    assert "50 of its 200 rows are also calibration rows" in capsys.readouterr().err


def test_two_sources_on_the_same_data_are_refused(tmp_path, capsys):
    z, y = _logits(400)
    pool = _files(tmp_path, "pool", z, y)
    other = _files(tmp_path, "other", *_logits(400, seed=1))
    assert main(["validate", _config(tmp_path, {"a": _import(pool, {"cal_size": 200}),
                                                "b": _import(other, {"cal_size": 200})})]) == 0
    copy = _files(tmp_path, "copy", z, y)  # another path, the same bytes
    assert main(["validate", _config(tmp_path, {"a": _import(pool, {"cal_size": 200}),
                                                "b": _import(copy, {"cal_size": 100})})]) == 1
    assert "sources.b: holds the same data as sources.a (equal file digests)" in capsys.readouterr().err


@pytest.mark.workflow
def test_a_run_of_eight_sources_on_one_data_file_stops_before_any_job(tmp_path):
    """Eight source names on one data file ran, and the Friedman test then found eight sources "significantly"
    different where one data set was measured: the run itself (the Snakefile's config check, from the content
    digests the DAG reads) refuses it before any job, naming both sources and the fix; the same config with one of
    them runs (its dry run plans jobs)."""
    from conftest import run_snakemake

    pool = _files(tmp_path, "pool", *_logits(400))
    names = [f"model_{i}" for i in range(8)]
    config = {"seeds": [0], "sources": {n: _import(pool, {"cal_size": 200}) for n in names},
              "methods": ["uncal", "ts"], "metrics": ["nll", "acc"]}
    refused = run_snakemake(tmp_path / "eight", config, "-n", check=False)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0, out
    assert ("sources.model_1: holds the same data as sources.model_0 (equal file digests); a source counted twice "
            "doubles its weight in the k/N columns, average ranks and Friedman test: keep one of sources.model_0 and "
            "sources.model_1 (delete the other's entry)") in out
    assert sum(f"sources.{n}: holds the same data as sources.model_0" in out for n in names[1:]) == 7
    assert "calibrate" not in out  # no job planned
    one = run_snakemake(tmp_path / "one", {**config, "sources": {"model_0": config["sources"]["model_0"]}}, "-n")
    assert "calibrate" in one.stdout + one.stderr


def test_a_pool_with_copied_rows_is_flagged_and_its_split_keeps_the_copies_together(tmp_path, capsys):
    z, y = _logits(300)
    doubled = _files(tmp_path, "doubled", np.concatenate([z, z]), np.concatenate([y, y]))
    assert main(["validate", _config(tmp_path, {"m": _import(doubled, {"cal_size": 300})})]) == 0
    assert "300 of the pool's 600 rows repeat another row" in capsys.readouterr().err
    logits, labels = np.concatenate([z, z]), np.concatenate([y, y])
    group, repeated = copies(logits, labels)
    assert repeated == 300
    cal, test = split_pool(labels, 0, cal_size=300, logits=logits)
    assert not set(group[cal]) & set(group[test]) and len(cal) == 300 and len(cal) + len(test) == 600
    plain = split_pool(y, 0, cal_size=150)  # no copies: the split is the one without logits
    np.testing.assert_array_equal(split_pool(y, 0, cal_size=150, logits=z)[1], plain[1])
