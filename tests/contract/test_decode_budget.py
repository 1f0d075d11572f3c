"""Bounded memory and time, distributions out (docs/saved_calibrators.md, "A file is data"): forged calibrator files
that ask the decoder for memory or work beyond their size (widened references, chains of stages sharing one
neighbour pool, wide chains of many classes) are refused naming the decode budget, within the documented
tracemalloc bound (32 MiB + 40 × the file's size) and 2 CPU-seconds; fitted values outside their declared
ranges are refused at loading; a loaded calibrator refuses rows that are not probability distributions."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import pytest
from safetensors.numpy import save_file

import calbench
from calbench.methods import make
from calbench.methods.chain import Chain
from calbench.persist import CalibratorFileError
from calbench.persist.budget import BUDGET_BASE, BUDGET_PER_BYTE, PEAK_BASE, PEAK_PER_BYTE
from calbench.persist.encode import Encoder
from calbench.persist.format import checksum
from calbench.scores import NotDistributionsError
from test_calibrator_files import _watched
from test_persist import CAL, fitted

#: CPU-seconds any forged file may take to load or be refused (measured without tracemalloc).
SECONDS = 2.0


def _unchecked_save(cal, path, monkeypatch):
    """Save ``cal`` as a forger would: without the saver's check of the fitted state against its declaration."""
    with monkeypatch.context() as patch:
        patch.setattr(Encoder, "check_declared", lambda self, obj, where: None)
        return calbench.save(cal, path)


@pytest.fixture(autouse=True, scope="module")
def _warm(tmp_path_factory):
    """Imports and compiled kernels (numba's cache is unpickled) loaded before any load is watched."""
    where = tmp_path_factory.mktemp("warm")
    calbench.load(calbench.save(fitted("ts+lece"), where / "tl.safetensors"))
    ts = make("ts")
    ts.temperature_, ts.num_classes_ = 1.5, 1000
    chain = Chain([ts, ts])
    chain.num_classes_ = 1000
    calbench.load(calbench.save(chain, where / "wide.safetensors"))


def _cpu_seconds(path) -> float:
    """CPU-seconds of loading (or refusing) ``path``, outside tracemalloc (which slows allocation several-fold)."""
    start = time.process_time()
    try:
        calbench.load(path)
    except (CalibratorFileError, NotDistributionsError):
        pass
    return time.process_time() - start


def load_cost(path) -> tuple[object, list, int, float]:
    """:func:`_watched`'s (result, audit events, peak traced bytes) of loading ``path``, and the CPU seconds of the
    load: the traced load's where they are within :data:`SECONDS` (tracemalloc only slows it), else an untraced
    load's (:func:`_cpu_seconds`)."""
    start = time.process_time()
    result, events, peak = _watched(path)
    seconds = time.process_time() - start
    return result, events, peak, seconds if seconds <= SECONDS else _cpu_seconds(path)


def _bounded(path):
    """(the loaded calibrator or the exception) of loading ``path``, checked against the documented bounds."""
    result, events, peak, seconds = load_cost(path)
    size = path.stat().st_size
    assert not events, f"{path.name}: audit events {events}"
    assert peak <= PEAK_BASE + PEAK_PER_BYTE * size, f"{path.name}: {peak / 2**20:.0f} MiB traced ({size:,} bytes)"
    assert seconds <= SECONDS, f"{path.name}: {seconds:.1f} CPU-s to load"
    return result


def widened_references(tmp_path, references: int = 64, entries: int = 2**20):
    """A ``ts`` file whose temperature is a list naming one 4 MB float32 tensor ``references`` times, each widened
    to float64 (``"as": "<f8"``)."""
    path = calbench.save(make("ts").fit(CAL[0], CAL[1]), tmp_path / "ts.safetensors")
    from calbench.persist import read_header

    header = read_header(path)
    node = {"$array": "a0", "as": "<f8"}
    pairs = header["calibrator"]["state"]["$dict"]
    header["calibrator"]["state"]["$dict"] = [[k, [node] * references if k == "temperature_" else v]
                                              for k, v in pairs]
    arrays = {"a0": np.random.default_rng(0).normal(size=entries).astype(np.float32)}
    header["checksum"] = checksum(header, arrays)
    forged = tmp_path / "widened.safetensors"
    save_file(arrays, str(forged), metadata={"calbench": json.dumps(header)})
    return forged


def shared_pool_chain(tmp_path, monkeypatch, stages: int = 300):
    """A chain of ``stages`` LECE stages that all name the same neighbour-pool tensors (each stage rebuilds it)."""
    lece = make("lece", q=0.1, t=0.0).fit(CAL[0], CAL[1])
    chain = Chain([lece] * stages)
    chain.num_classes_ = lece.num_classes_
    return _unchecked_save(chain, tmp_path / "pool_chain.safetensors", monkeypatch)


def wide_chain(tmp_path, monkeypatch, stages: int = 200, classes: int = 2**20):
    """A chain of ``stages`` temperature scalings of ``classes`` classes: a 40 KB file whose probe would run
    ``stages`` times over 4 × ``classes`` logits."""
    ts = make("ts")
    ts.temperature_, ts.num_classes_ = 1.5, classes
    chain = Chain([ts] * stages)
    chain.num_classes_ = classes
    return _unchecked_save(chain, tmp_path / "wide_chain.safetensors", monkeypatch)


def test_references_to_one_tensor_share_one_widened_copy(tmp_path):
    result = _bounded(widened_references(tmp_path))
    assert isinstance(result, CalibratorFileError) and "temperature_" in str(result)


def test_a_chain_of_stages_sharing_one_pool_is_refused_naming_the_budget(tmp_path, monkeypatch):
    path = shared_pool_chain(tmp_path, monkeypatch)
    result = _bounded(path)
    limit = BUDGET_BASE + BUDGET_PER_BYTE * path.stat().st_size
    assert isinstance(result, CalibratorFileError), result
    assert "decode budget" in str(result) and f"{limit:,} bytes" in str(result) and "rebuilding the LECE" in str(result)


def test_a_wide_chain_is_refused_before_its_probe(tmp_path, monkeypatch):
    path = wide_chain(tmp_path, monkeypatch)
    result = _bounded(path)
    assert isinstance(result, CalibratorFileError) and "decode budget" in str(result) and "the probe" in str(result)


def test_short_chains_and_pools_load_within_the_bound(tmp_path, monkeypatch):
    """The budget refuses the forgeries above, not what calbench saves: a chain of a few pools, a chain of a few
    stages, a ts+lece chain."""
    assert not isinstance(_bounded(shared_pool_chain(tmp_path, monkeypatch, stages=3)), Exception)
    assert not isinstance(_bounded(wide_chain(tmp_path, monkeypatch, stages=3, classes=1000)), Exception)
    assert not isinstance(_bounded(calbench.save(fitted("ts+lece"), tmp_path / "tl.safetensors")), Exception)


@pytest.mark.parametrize("name, edit, field", [
    ("tlhb", lambda cal: next(iter(cal.maps_.values()))[1]["y_mean"].__setitem__(0, 5.0),
     r"maps_\[\d+\]\[1\]\['y_mean'\]"),
    ("sms", lambda cal: setattr(cal, "mix_", -0.5), "mix_"),
    ("svs", lambda cal: setattr(cal, "mix_", 1.5), "mix_"),
    ("lece", lambda cal: setattr(cal.estimators_[0], "k_", 0), r"estimators_\[0\]\.state\.k_"),
    ("ts", lambda cal: setattr(cal, "temperature_", -1.0), "temperature_"),
    ("hist", lambda cal: cal.binary_maps_[0]["p_mean"].__setitem__(0, -0.1), r"binary_maps_\[0\]\['p_mean'\]"),
])
def test_fitted_values_outside_their_declared_range_are_refused(name, edit, field, tmp_path, monkeypatch):
    import copy

    cal = copy.deepcopy(fitted(name))
    edit(cal)
    path = _unchecked_save(cal, tmp_path / f"{name}.safetensors", monkeypatch)
    with pytest.raises(CalibratorFileError, match=rf"{name}.safetensors: calibrator.state.{field}: expected values"):
        calbench.load(path)


def test_a_loaded_calibrator_refuses_rows_that_are_not_distributions(tmp_path, monkeypatch):
    """Every value a file holds is checked against its declared kind and range at loading, so the forged files
    above never reach a prediction; the check on the way out stands behind that for what a declaration misses. A
    computation returning non-distributions (simulated here by negating seven rows) is refused by the loaded
    calibrator's predict_proba and by its torch module, naming the file and the count; an in-memory fit is not
    checked (its class computes it)."""
    import torch

    import calbench.torch
    from calbench.methods.temperature import TemperatureScaling

    path = calbench.save(make("ts").fit(CAL[0], CAL[1]), tmp_path / "t.safetensors")
    loaded = calbench.load(path)
    logits = np.random.default_rng(0).normal(size=(50, 4))
    original = TemperatureScaling._predict_proba

    def negated(self, scores):
        probs = original(self, scores)
        probs[:7] *= -1.0
        return probs

    monkeypatch.setattr(TemperatureScaling, "_predict_proba", negated)
    with pytest.raises(NotDistributionsError, match=r"t.safetensors: the loaded ts computed 7 of 50 rows that are not"):
        loaded.predict_proba(logits)
    make("ts").fit(CAL[0], CAL[1]).predict_proba(logits)  # not loaded: not checked

    class Negated(torch.nn.Module):
        def proba(self, z):
            probs = torch.softmax(z, dim=1)
            return torch.cat([-probs[:7], probs[7:]])

    head = calbench.torch.calibration_module(loaded)
    head.stage = Negated()
    with pytest.raises(NotDistributionsError, match=r"t.safetensors: the calibration head computed 7 of 50 rows"):
        head(torch.tensor(logits))


def _forged(name, edit, tmp_path, monkeypatch):
    import copy

    cal = copy.deepcopy(fitted(name))
    edit(cal)
    with monkeypatch.context() as patch:
        patch.setattr(Encoder, "check_map", lambda self, value, where: None)
        return _unchecked_save(cal, tmp_path / f"{name}.safetensors", monkeypatch)


def _one_uncal(cal):
    cal.estimators_ = [make("uncal").fit(CAL[0], CAL[1])]


def _drop_setting(name):
    def edit(cal):
        del cal.binary_maps_[0].__dict__[name]
    return edit


@pytest.mark.parametrize("name, edit, message", [
    ("dir_l2", _one_uncal, r"estimators_: expected length of list to be models = 5, found 1"),
    ("dir_l2", lambda cal: setattr(cal, "estimators_", [make("uncal").fit(CAL[0], CAL[1])] * 5),
     r"estimators_\[0\]: expected a .* \(the class of estimator\), found a Uncalibrated"),
    ("ts+vs", lambda cal: cal.steps.__setitem__(0, make("uncal").fit(CAL[0].logits[:, :3], CAL[1] % 3)),
     r"steps\[0\]\.num_classes_: expected count C to be C = 4, found 3"),
    ("ts+vs", lambda cal: cal.steps.clear(), r"steps: expected length of list to be S\+1 with S >= 0, found 0"),
    ("tva_hist", lambda cal: setattr(cal, "binary_", make("irova")), r"binary_: expected a HistogramBinning"),
    ("pl3_ovr", _drop_setting("logit_space"), r"binary_maps_\[0\]: a PiecewiseLinearCV takes the settings .* lacks "
                                              r"\['logit_space'\]"),
    ("pl3_ovr", lambda cal: setattr(cal.binary_maps_[0], "n_folds", "3"), r"binary_maps_\[0\]\.n_folds: expected an "
                                                                          "integer, found a str '3'"),
    ("pl_ovr", lambda cal: setattr(cal.binary_maps_[1], "loss", "hinge"), r"binary_maps_\[1\]\.loss: expected one of"),
    ("irova", lambda cal: setattr(cal.binary_maps_[0], "knots_y_", cal.binary_maps_[0].knots_y_.astype(bool)),
     r"binary_maps_\[0\]: the saved Isotonic cannot be built \(ValueError: saved isotonic knots: x and y must be"),
    ("lece", lambda cal: setattr(cal.estimators_[0].pool_, "logits", cal.estimators_[0].pool_.logits.astype(int)),
     r"estimators_\[0\]: the saved LECE cannot be built \(ValueError: pool logits: expected a float array, got int64"),
])
def test_nested_calibrators_chain_steps_wrappers_and_map_settings_are_declared(name, edit, message, tmp_path,
                                                                                monkeypatch):
    """A grid search's fold models are its estimator's class, ``folds`` of them with ``ensemble`` (else one); a
    chain's steps are at least one fitted calibrator of its classes; a TvA wrapper's binary calibrator is its
    class's; a 1-D map gives every setting, each of its declared kind and range; dtypes are checked before any
    cast."""
    path = _forged(name, edit, tmp_path, monkeypatch)
    prefix = rf"{re.escape(name)}.safetensors: calibrator\.(state|params)\."
    with pytest.raises(CalibratorFileError, match=prefix + f".*{message}"):
        calbench.load(path)
