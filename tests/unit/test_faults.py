"""Bad input and faults: each error names the file or config key, the field, what was expected and the fix,
and no partial output is left behind."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest

from calbench.config import ConfigError, complete_source, load
from calbench.data import download, sources
from calbench.jobs.calibrate import CalibrateSpec, calibrate_job
from calbench.methods import Calibrator, make
from calbench.methods.base import MissingClass, MissingClassWarning
from conftest import DOWNLOADS, run_snakemake
from workflow_helpers import tiny_config

RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(40, 4))
LABELS = np.arange(40) % 4
PROBS = np.exp(LOGITS) / np.exp(LOGITS).sum(axis=1, keepdims=True)


def dump_of(name: str, entry: dict, seeds, path) -> None:
    """Write the dump of a source entry, filled as calbench.config.load fills it."""
    sources.make_dump(name, complete_source(entry), seeds, path, DOWNLOADS)


def _with(arr, index, value):
    arr = arr.astype(np.float64)
    arr[index] = value
    return arr


def _import_entry(tmp_path, logits, labels, scores="logits") -> dict:
    np.save(tmp_path / "logits.npy", logits)
    np.save(tmp_path / "labels.npy", labels)
    return {"type": "import", "format": "npy", "scores": scores, "split": {"cal_fraction": 0.5},
            "files": {"logits": str(tmp_path / "logits.npy"), "labels": str(tmp_path / "labels.npy")}}


BAD_IMPORTS = {
    # case: (logits, labels, declared scores, file named, words the message must hold)
    "nan logits": (_with(LOGITS, (3, 1), np.nan), LABELS, "logits", "logits.npy",
                   r"all/logits: contains NaN or infinite values \(first at row 3, column 1\); clean"),
    "infinite logits": (_with(LOGITS, (5, 2), -np.inf), LABELS, "logits", "logits.npy",
                        r"contains NaN or infinite values \(first at row 5, column 2\)"),
    "1-D logits": (LOGITS[:, 0], LABELS, "logits", "logits.npy", r"expected a 2-D array \[n_samples, n_classes\]"),
    "3-D logits": (LOGITS[:, :, None], LABELS, "logits", "logits.npy", r"got shape \(40, 4, 1\)"),
    "text logits": (LOGITS.astype(str), LABELS, "logits", "logits.npy",
                    r"expected a numeric array, got dtype <U\d+; save the scores as float32/float64"),
    "too few labels": (LOGITS, LABELS[:30], "logits", "labels.npy", r"labels: has 30 entries but the scores have 40"),
    "fractional labels": (LOGITS, LABELS + 0.5, "logits", "labels.npy",
                          r"expected integer class indices, got dtype float64; store labels as integers"),
    "negative label": (LOGITS, np.r_[LABELS[:-1], -1], "logits", "labels.npy",
                       r"values must lie in \[0, 4\) .* min -1 .*re-map the labels to class indices 0..3"),
    "label = C": (LOGITS, np.r_[LABELS[:-1], 4], "logits", "labels.npy", r"values must lie in \[0, 4\) .* max 4"),
    "probs declared logits": (PROBS, LABELS, "logits", "logits.npy",
                              r"declared `scores: logits` but every row is a probability vector; "
                              r"declare `scores: probs`"),
    "logits declared probs": (LOGITS, LABELS, "probs", "logits.npy",
                              r"declared `scores: probs` but rows are not probability vectors.*"
                              r"declare `scores: logits`"),
}


@pytest.mark.parametrize("case", sorted(BAD_IMPORTS))
def test_bad_imported_scores_are_refused_with_file_field_and_fix(case, tmp_path):
    logits, labels, declared, named, message = BAD_IMPORTS[case]
    entry = _import_entry(tmp_path, logits, labels, declared)
    out = tmp_path / "results" / "dumps" / "bad.h5"
    with pytest.raises(ValueError, match=message) as err:
        dump_of("bad", entry, [0], out)
    assert str(err.value).startswith(f"sources.bad: {tmp_path / named}:")
    assert not out.parent.exists() or not any(out.parent.iterdir())  # no dump, no temporary file


def test_good_import_passes_the_same_checks(tmp_path):
    out = tmp_path / "good.h5"
    dump_of("good", _import_entry(tmp_path, LOGITS, LABELS), [0], out)
    assert out.exists()


class _PerClass(Calibrator):
    """A calibrator that fits one thing per class (stands in for one-vs-rest and per-class methods)."""

    on_missing_class = MissingClass.REFUSE

    def _fit(self, scores, y):
        self.means_ = np.stack([scores.logits[y == k].mean(axis=0) for k in range(scores.num_classes)])

    def _predict_proba(self, scores):
        return scores.probs


def test_a_method_that_needs_every_class_refuses_a_calibration_set_missing_one():
    labels = np.where(LABELS == 2, 1, LABELS)
    with pytest.raises(ValueError, match=r"_PerClass needs calibration examples of every class, but 1 of 4 classes "
                                         r"have none among the 40 calibration labels \(classes 2\); use a larger or "
                                         r"stratified calibration split"):
        _PerClass().fit(LOGITS, labels)
    _PerClass().fit(LOGITS, LABELS)
    with pytest.warns(MissingClassWarning, match=r"ts was fitted without .*\(classes 2\)"):
        make("ts").fit(LOGITS, labels)  # methods without the need still fit, with a warning


@pytest.fixture()
def dump(tmp_path):
    path = tmp_path / "dump.h5"
    entry = {"type": "synthetic", "task": "planted_temperature", "num_classes": 4, "temperature": 2.0,
             "n_cal": 200, "n_test": 300}
    dump_of("tiny", entry, [0], path)
    return path


def _truncate(path):
    os.truncate(path, path.stat().st_size // 2)


def _garble(path):
    path.write_bytes(b"this is not an HDF5 file " * 20)


def _flip_bytes(path):
    """Bit rot inside the stored data of seed0/cal/logits (found by its chunk's byte offset)."""
    with h5py.File(path, "r") as f:
        chunk = f["seed0/cal/logits"].id.get_chunk_info(0)
    data = bytearray(path.read_bytes())
    start = chunk.byte_offset + chunk.size // 2
    data[start:start + 8] = bytes(b ^ 0x5A for b in data[start:start + 8])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, message", [
    (_truncate, r"not a readable HDF5 file \(.*truncated file.*\); it is truncated or corrupted: delete it and rerun"),
    (_garble, r"not a readable HDF5 file \(.*signature not found.*\); it is truncated or corrupted: delete it"),
    (_flip_bytes, r"cannot read \(.*\); the file is corrupted: delete it and rerun"),
])
def test_a_damaged_dump_is_named_and_nothing_is_written(dump, damage, message, tmp_path):
    damage(dump)
    out = tmp_path / "calibrated.h5"
    with pytest.raises(ValueError, match=message) as err:
        calibrate_job(spec=CalibrateSpec(source="d", method="ts", seed=0, method_settings={"ts": {}},
                                         input_kind="logits", dump=dump, calibrated=out))
    assert str(dump) in str(err.value)
    assert not out.exists() and os.listdir(tmp_path) == ["dump.h5"]


def test_a_dump_written_elsewhere_with_nan_is_refused_on_reading(dump, tmp_path):
    with h5py.File(dump, "r+") as f:
        logits = f["seed0/cal/logits"][()]
        logits[7, 0] = np.nan
        f["seed0/cal/logits"][...] = logits
    with pytest.raises(ValueError, match=rf"{dump}:seed0/cal/logits: contains NaN or infinite values \(first at row 7"):
        calibrate_job(spec=CalibrateSpec(source="d", method="ts", seed=0, method_settings={"ts": {}},
                                         input_kind="logits", dump=dump, calibrated=tmp_path / "calibrated.h5"))
    assert not (tmp_path / "calibrated.h5").exists()


def test_a_download_whose_checksum_does_not_match_is_not_cached(tmp_path):
    payload = tmp_path / "scores.npz"
    payload.write_bytes(b"payload")
    cache = tmp_path / "cache"
    wrong = "0" * 64
    with pytest.raises(ValueError, match=rf"{payload.as_uri()}: sha256 mismatch: expected {wrong}, got [0-9a-f]{{64}}; "
                                         r"the file changed upstream or the config's sha256 is wrong\. "
                                         r"Nothing was cached"):
        download.fetch(payload.as_uri(), wrong, cache)
    assert not cache.exists() or not any(cache.iterdir())
    right = download.sha256_of(payload)
    assert download.fetch(payload.as_uri(), right, cache).read_bytes() == b"payload"


@pytest.mark.parametrize("change, message", [
    ({"methods": ["ts", "nosuch"]}, r"config key methods: unknown method 'nosuch' in 'nosuch'; allowed: .*ts.*uncal"),
    ({"methods": ["ts+nosuch"]}, r"config key methods: unknown method 'nosuch' in 'ts\+nosuch'"),
    ({"metrics": ["acc", "ece.bogus"]}, r"config key metrics: unknown metric id 'ece.bogus'; closest known ids: ece"),
    ({"method_settings": {"ts": {"bogus": 1}}},
     r"config key method_settings.ts: method 'ts': unknown setting\(s\) \['bogus'\]; "
     r"allowed settings: \['grid', 'cv'\]"),
    ({"methods": []}, r"config key methods: \[\] should be non-empty"),
])
def test_a_config_naming_unknown_things_is_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        load({**tiny_config(), **change})


@pytest.mark.workflow
def test_the_workflow_reports_bad_input_and_leaves_no_partial_output(tmp_path):
    bad_config = run_snakemake(tmp_path / "config", {**tiny_config(), "methods": ["nosuch"]}, "-n", check=False)
    assert bad_config.returncode != 0
    expected = "calbench: invalid config: config key methods: unknown method 'nosuch'"
    assert expected in bad_config.stdout + bad_config.stderr

    work = tmp_path / "nan"
    work.mkdir()
    config = {**tiny_config(), "sources": {"bad": _import_entry(work, _with(LOGITS, (3, 1), np.nan), LABELS)}}
    result = run_snakemake(work, config, check=False)
    assert result.returncode != 0
    expected = f"sources.bad: {work / 'logits.npy'}:all/logits: contains NaN or infinite values"
    assert expected in result.stdout + result.stderr
    # nothing of the failed dump or after it; the source's digest table (rule source_digest) is a finished stage
    written = [p for p in (work / "results").rglob("*") if p.is_file()] if (work / "results").exists() else []
    assert [p.relative_to(work).as_posix() for p in written] in ([], ["results/digests/bad.tsv"])
