"""What validates, runs, for slips too: a config that repeats a seed, a method or a YAML key, a source name that is
no folder name, a data file that is empty, has 0 rows or is a loop of links, and an HDF5 dump with links are
refused before any job, each with one line naming the key or the file."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest
import yaml

from calbench.config import ConfigError, load, read_config_file
from calbench.data import store
from conftest import run_snakemake

pytestmark = pytest.mark.xdist_group("slips")  # one set of bad files for validate and the dry run


def _config(**changes) -> dict:
    config = {"sources": {"s": {"type": "synthetic", "task": "planted_temperature", "num_classes": 3, "n_cal": 50,
                                "n_test": 50}},
              "methods": ["uncal", "ts"], "metrics": ["acc", "nll"]}
    return {**config, **changes}


@pytest.mark.parametrize(("changes", "key", "repeated"), [
    ({"seeds": [0, 0, 1]}, "seeds", "0"),
    ({"methods": ["uncal", "ts", "ts"]}, "methods", "'ts'"),
    ({"metrics": ["acc", "acc"]}, "metrics", "'acc'"),
    ({"sources": {"s": {**_config()["sources"]["s"], "seeds": [1, 1]}}}, "sources.s.seeds", "1"),
    ({"figures": {"reliability": {"methods": ["ts", "ts"]}}}, "figures.reliability.methods", "'ts'"),
])
def test_a_repeated_entry_is_refused(changes, key, repeated):
    with pytest.raises(ConfigError, match=f"^config key {key}: {repeated} given more than once"):
        load(_config(**changes))


@pytest.mark.parametrize("text", [
    "seeds: [0]\nseeds: [1]\n",  # top level
    "sources:\n  s: {type: synthetic}\n  s: {type: import}\n",  # a source given twice
    "method_settings:\n  lece:\n    q: 0.1\n    q: 0.2\n",  # a setting, two levels down
    "sources:\n  - {a: 1, a: 2}\n",  # inside a list
])
def test_a_yaml_key_given_twice_at_any_level_is_refused(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"is given twice in one mapping \(lines \d and \d\)"):
        read_config_file(path)


@pytest.mark.parametrize("name", [".", "..", "a/b", "a\\b", ""])
def test_a_source_name_that_is_no_folder_name_is_refused(name):
    with pytest.raises(ConfigError, match=f"^config key sources: {re.escape(repr(name))} is not a source name"):
        load(_config(sources={name: _config()["sources"]["s"]}))


def test_source_names_with_dots_are_allowed():
    assert list(load(_config(sources={"planted_t2.5": _config()["sources"]["s"]}))["sources"]) == ["planted_t2.5"]


@pytest.mark.parametrize("link", ["soft", "external"])
def test_a_dump_with_a_link_is_refused(tmp_path, link):
    """A dump holds its own arrays: a soft or external link (HDF5 follows it to another object or file, e.g. one
    outside results/) is refused by every reader."""
    path = tmp_path / "dump.h5"
    labels = np.arange(6) % 3
    store.write_dump(path, {"cal": {"logits": np.eye(3)[labels], "labels": labels}}, {})
    np.testing.assert_array_equal(store.read_group(path, "cal")["labels"], labels)
    other = tmp_path / "elsewhere.h5"
    with h5py.File(other, "w") as f:
        f["logits"] = np.zeros((6, 3))
    with h5py.File(path, "a") as f:
        f["test/logits"] = h5py.SoftLink("/cal/logits") if link == "soft" else h5py.ExternalLink(str(other), "/logits")
    for read, args in ((store.read_group, (path, "cal")), (store.list_groups, (path,)), (store.read_attrs, (path,))):
        with pytest.raises(ValueError, match="test/logits is a link"):
            read(*args)


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """One import source per kind of unusable file, and a config naming them all."""
    folder = tmp_path_factory.mktemp("slips")
    np.save(folder / "labels.npy", np.arange(40) % 3)
    np.save(folder / "logits.npy", np.random.default_rng(0).normal(size=(40, 3)))
    (folder / "empty.npy").write_bytes(b"")
    np.save(folder / "zero_logits.npy", np.zeros((0, 3)))
    np.save(folder / "zero_labels.npy", np.zeros(0, dtype=np.int64))
    (folder / "garbage.npy").write_bytes(b"\x93NUMPY not an array")
    os.symlink(folder / "loop_b.npy", folder / "loop_a.npy")
    os.symlink(folder / "loop_a.npy", folder / "loop_b.npy")
    files = {"empty": "empty.npy", "zero": "zero_logits.npy", "garbage": "garbage.npy", "loop": "loop_a.npy"}
    sources = {name: {"type": "import", "format": "npy", "split": {"cal_size": 20},
                      "files": {"logits": str(folder / logits),
                                "labels": str(folder / ("zero_labels.npy" if name == "zero" else "labels.npy"))}}
               for name, logits in files.items()}
    config = _config(sources=sources)
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder, files


def _expect_one_line_each(output: str, folder, files) -> None:
    for name, file in files.items():
        lines = [line for line in output.splitlines() if f"sources.{name}" in line]
        assert len(lines) == 1, (name, output)
        assert str(folder / file) in lines[0] or file in lines[0], (name, lines[0])
    assert "Traceback" not in output


@pytest.mark.workflow
def test_validate_says_one_line_per_unusable_file(bad_files):
    folder, files = bad_files
    result = subprocess.run([sys.executable, "-m", "calbench", "validate", str(folder / "config.yaml")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    _expect_one_line_each(result.stdout + result.stderr, folder, files)
    for what in ("0 rows", "loop of symbolic links", "empty (0 bytes)", "cannot read as .npy"):
        assert what in result.stderr, what  # problems on stderr (docs/command_line.md)


@pytest.mark.workflow
def test_a_dry_run_says_one_line_per_unusable_file(bad_files):
    folder, files = bad_files
    result = run_snakemake(folder, None, "-n", check=False)
    assert result.returncode != 0
    _expect_one_line_each(result.stdout + result.stderr, folder, files)


@pytest.mark.workflow
def test_a_dry_run_refuses_a_config_file_with_a_key_twice(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(_config(), sort_keys=False) + "seeds: [0]\nseeds: [1]\n")
    result = run_snakemake(tmp_path, None, "-n", check=False)
    assert result.returncode != 0
    assert "key 'seeds' is given twice in one mapping" in result.stdout + result.stderr
