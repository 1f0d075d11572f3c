"""Data are inputs: every file a source names is an input of the rules that read it, so that changing its content
reruns what depends on it, and only that (docs/operations.md); a source's own files enter by content digest (rule
source_digest), so that a replacement with the old modification time (``cp -p``, ``touch -r``) reruns the same
and a touch without a change nothing. One run of an import source with a shifted set, then each file changed in
turn and the job list of ``snakemake -n`` read."""

from __future__ import annotations

import os

import numpy as np
import pytest

from calbench.data.inputs import shift_files, source_files
from conftest import run_snakemake
from workflow_helpers import planned_jobs

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("data_inputs")]


def _arrays(folder, name, rows, seed):
    rng = np.random.default_rng(seed)
    np.save(folder / f"{name}_logits.npy", rng.normal(size=(rows, 3)).astype(np.float32))
    np.save(folder / f"{name}_labels.npy", rng.integers(0, 3, rows))
    return {"logits": f"{name}_logits.npy", "labels": f"{name}_labels.npy"}


#: The calibration rows: enough that their logits file is over 1 MB, above which Snakemake no longer compares the
#: checksum of an input newer than its outputs (``--max-checksum-file-size``), so that a touch would rerun its dump
#: by modification time; the digest rule makes it rerun nothing.
LARGE_ROWS = 90_000


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    work = tmp_path_factory.mktemp("data_inputs")
    entry = {"type": "import", "format": "npy",
             "files": {"cal": _arrays(work, "cal", LARGE_ROWS, 0), "test": _arrays(work, "test", 200, 1)},
             "shifts": {"noise": [{"severity": 1, "files": _arrays(work, "noise", 100, 2)}]}}
    run_snakemake(work, {"seeds": [0], "sources": {"mine": entry}, "methods": ["uncal", "ts"],
                         "metrics": ["acc", "nll"]})
    return work


def _planned_after_changing(work, name, keep_time=False):
    """The jobs planned after ``name``'s labels change (``keep_time``: its modification time set back to the old
    one after, as ``cp -p`` or ``touch -r`` leave it)."""
    path = work / name
    original, times = path.read_bytes(), path.stat()
    labels = np.load(path)
    np.save(path, (labels + 1) % 3)
    if keep_time:
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    try:
        return planned_jobs(work)
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


def test_the_rules_inputs_are_the_files_the_entry_names():
    entry = {"type": "import", "format": "npy", "files": {"cal": {"logits": "a.npy", "labels": "b.npy"},
                                                          "test": {"logits": "c.npy", "labels": "d.npy"}},
             "shifts": {"noise": [{"severity": 1, "files": {"logits": "e.npy", "labels": "f.npy"}}]}}
    assert source_files(entry) == ["a.npy", "b.npy", "c.npy", "d.npy"]
    assert shift_files(entry) == ["e.npy", "f.npy"]
    download = {"type": "download", "format": "npz",
                "files": {"archive": {"url": "https://x/y.npz", "sha256": "0" * 64}}}
    assert source_files(download) == []  # pinned by its sha256, a param of the dump
    assert source_files({"type": "pretrained", "weights": "w.pth"}) == ["w.pth"]


#: What a changed split file reruns: its digest, the dump and everything after it.
AFTER_SPLIT = {"source_digest", "dump_source", "dump_shifts_source", "calibrate", "evaluate", "aggregate",
               "runtime_table", "shift_report", "reliability_diagram"}


def test_a_changed_split_file_reruns_the_dump_and_everything_after_it(done):
    assert {rule for rule, _ in _planned_after_changing(done, "cal_labels.npy")} == AFTER_SPLIT


def test_a_content_change_with_the_old_modification_time_reruns_the_same(done):
    assert {rule for rule, _ in _planned_after_changing(done, "cal_labels.npy", keep_time=True)} == AFTER_SPLIT


def test_a_touch_without_a_change_reruns_nothing(done):
    path = done / "cal_logits.npy"
    times = path.stat()
    assert times.st_size > 1_000_000  # tracked by modification time, a touch of it would rerun its dump
    os.utime(path)
    try:
        assert planned_jobs(done) == set()
    finally:
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


def _planned_with(work, **changes):
    """The jobs planned after the source's entry is updated with ``changes`` (``downloads_dir``: the config's key);
    the config is restored after."""
    import yaml

    text = (work / "config.yaml").read_text()
    config = yaml.safe_load(text)
    if "downloads_dir" in changes:
        config["downloads_dir"] = changes.pop("downloads_dir")
    config["sources"]["mine"].update(changes)
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    try:
        return planned_jobs(work)
    finally:
        (work / "config.yaml").write_text(text)


def test_class_names_rerun_only_the_figures_that_name_classes(done):
    """Only the reliability diagrams name classes (``class_names``): no dump, calibration or table reruns."""
    assert _planned_with(done, class_names=["cat", "dog", "owl"]) == {("reliability_diagram", "mine/conf"),
                                                                     ("reliability_diagram", "mine/cw")}


def test_another_downloads_dir_reruns_nothing_of_an_import(done):
    assert _planned_with(done, downloads_dir="elsewhere") == set()


def test_a_changed_shift_file_reruns_the_shift_dump_and_evaluations_only(done):
    planned = _planned_after_changing(done, "noise_labels.npy")
    assert {rule for rule, _ in planned} == {"dump_shifts_source", "evaluate", "aggregate", "runtime_table",
                                             "shift_report"}


def test_an_unchanged_run_plans_nothing(done):
    assert planned_jobs(done) == set()
