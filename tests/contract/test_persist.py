"""Saved calibrators: save/load round trip of every method and chains, and damaged files."""

import functools
import json

import numpy as np
import pytest

import calbench
from calbench.methods import available, make
from calbench.persist import CalibratorFileError, read_header
from calbench.scores import Scores

SMALL_GRID = {"lece": {"q": [0.1, 0.3], "t": [0.0, 0.05]}, "lecd": {"q": [0.1, 0.3], "t": [0.0]},
              "ms_odir": {"reg_lambda": [1e-3, 1e-1], "reg_mu": [1e-3]},
              "dir_odir": {"reg_lambda": [1e-3, 1e-1], "reg_mu": [1e-3]}}
KCAL_FAST = {"steps_per_epoch": 5, "max_epochs": 2, "n_folds": 3, "device": "cpu", "dim": 4}
TOL = 1e-12


def _data(n, seed, k=4, h=6):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    y[:k] = np.arange(k)  # every class present
    centres = np.random.default_rng(7).normal(size=(k, h))
    emb = centres[y] + rng.normal(size=(n, h))
    return Scores(3.0 * emb @ centres.T, emb), y


CAL, TEST, TRAIN = _data(240, 0), _data(60, 1), _data(200, 2)


def _make(name):
    settings = {}
    if name in SMALL_GRID:
        settings = {"grid": SMALL_GRID[name], "cv": {"folds": 3}}
    if name.startswith("kcal"):
        settings = dict(KCAL_FAST)
    if name.startswith(("pl_", "pl3_")):
        settings = {"n_folds": 3, "max_pieces": 3}
    return make(name, **settings)


@functools.cache
def fitted(name):
    """Registered method or chain ``name`` fitted on CAL (once per test session: tests/contract/test_calibrator_files.py
    too)."""
    from calbench.methods.chain import Chain

    stages = [_make(stage) for stage in name.split("+")]
    cal = stages[0] if len(stages) == 1 else Chain(stages)
    return cal.fit(CAL[0], CAL[1], train=TRAIN if "kcal" in name else None)


def _round_trip(cal, tmp_path, name):
    path = calbench.save(cal, tmp_path / f"{name}.safetensors")
    loaded = calbench.load(path)
    np.testing.assert_allclose(loaded.predict_proba(TEST[0]), cal.predict_proba(TEST[0]), rtol=0, atol=TOL)
    return loaded, path


@pytest.mark.parametrize("name", available())
def test_every_registered_method_survives_save_and_load(name, tmp_path):
    cal = fitted(name)
    loaded, path = _round_trip(cal, tmp_path, name)
    header = read_header(path)
    assert header["method"] == name and header["num_classes"] == 4 and header["input_kind"] == "logits"
    assert header["format_version"] == calbench.persist.FORMAT_VERSION
    assert loaded.get_params(deep=False).keys() == cal.get_params(deep=False).keys()


@pytest.mark.parametrize("chain", ["ts+lece", "ts+irova", "ts+dir_odir", "ms+hist"])
def test_chains_survive_save_and_load(chain, tmp_path):
    stages = chain.split("+")
    cal = make(chain, **{s: ({"grid": SMALL_GRID[s], "cv": {"folds": 3}} if s in SMALL_GRID else {})
                         for s in stages}).fit(CAL[0], CAL[1])
    loaded, path = _round_trip(cal, tmp_path, chain)
    header = read_header(path)
    assert header["method"] == chain
    if "lece" in stages:  # the grid point LECE chose, readable without loading
        assert header["chosen"]["1:lece"] == cal.steps[1].best_params_
    np.testing.assert_allclose(loaded.transform(TEST[0]).logits, cal.transform(TEST[0]).logits, rtol=0, atol=TOL)


def _tensors(path) -> dict:
    from safetensors.numpy import load_file

    return load_file(str(path))


@pytest.mark.parametrize("name", ["lece", "lecd"])
def test_a_saved_neighbour_pool_holds_its_logits_and_labels_only_and_is_rebuilt_identically(name, tmp_path,
                                                                                            monkeypatch):
    """The pool's derived arrays (float32 scores, targets, normalisers) are rebuilt on loading, not stored; the
    rebuilt pool's arrays equal the fitted one's bit for bit (float32-exact logits, as from a dump: stored as
    float32, loaded as the same float64)."""
    monkeypatch.setattr(calbench.persist.encode, "NARROW_MIN_SIZE", 1)  # the pool here is 240 × 4
    logits32 = CAL[0].logits.astype(np.float32).astype(np.float64)
    cal = make(name, q=0.2, t=0.0).fit(Scores(logits32), CAL[1])
    loaded, path = _round_trip(cal, tmp_path, name)
    stored = _tensors(path)
    assert sorted((a.dtype.str, a.shape) for a in stored.values()) == sorted(
        [("<f4", logits32.shape), ("<i8", CAL[1].shape)])
    for key, value in vars(cal.pool_).items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(loaded.pool_, key), value, err_msg=key)
    assert loaded.pool_.logits.dtype == np.float64 and loaded.pool_.targets is type(cal)._targets


def test_arrays_are_narrowed_only_where_float32_holds_them_exactly(tmp_path):
    """float64 arrays of NARROW_MIN_SIZE entries or more are stored as float32 when that is lossless, and come
    back float64 bit for bit; an array float32 would round stays float64."""
    from calbench.persist.encode import NARROW_MIN_SIZE, Encoder

    exact = np.arange(NARROW_MIN_SIZE, dtype=np.float64) / 8
    inexact = exact + 0.1
    encoder = Encoder()
    nodes = encoder.encode({"exact": exact, "inexact": inexact, "again": exact}, "test")["$dict"]
    (_, exact_node), (_, inexact_node), (_, again_node) = nodes
    assert exact_node == again_node == {"$array": "a0", "as": "<f8"} and inexact_node == {"$array": "a1"}
    assert encoder.arrays["a0"].dtype == np.float32 and encoder.arrays["a1"].dtype == np.float64
    decoded = calbench.persist.decode.Decoder(encoder.arrays, "test").value(exact_node, "test")
    assert decoded.dtype == np.float64 and np.array_equal(decoded, exact)


def test_a_chain_stores_each_array_once(tmp_path):
    """The header's `params` of a chain are its fitted steps, also encoded as its state: their arrays are
    written once (at 1,000 classes × 25,000 rows, ts+lece's file was twice lece's before)."""
    steps = {"lece": {"grid": SMALL_GRID["lece"], "cv": {"folds": 3}}}
    chain = make("ts+lece", **steps).fit(CAL[0], CAL[1])
    alone = make("lece", **steps["lece"]).fit(chain.steps[0].transform(CAL[0]), CAL[1])
    chain_path = calbench.save(chain, tmp_path / "chain.safetensors")
    alone_path = calbench.save(alone, tmp_path / "alone.safetensors")
    assert len(_tensors(chain_path)) == len(_tensors(alone_path))


def test_a_chained_pool_is_saved_as_the_chain_input_and_replayed(tmp_path, monkeypatch):
    """ts+lece's LECE pool is fitted on temperature-scaled logits, float64 that float32 cannot hold: it saves
    the chain's float32-exact input and the TS step instead, and replays them on loading to the same logits bit
    for bit (at 1,000 classes × 25,000 rows the file went from 200 to 100 MB, docs/saved_calibrators.md). Where
    the replay would not give the pool's logits exactly, the logits themselves are stored."""
    monkeypatch.setattr(calbench.persist.encode, "NARROW_MIN_SIZE", 1)  # the pool here is 240 × 4
    logits32 = Scores(CAL[0].logits.astype(np.float32).astype(np.float64))
    chain = make("ts+lece", lece={"grid": {"q": [0.2], "t": [0.0]}, "cv": {"folds": 2}}).fit(logits32, CAL[1])
    pool = chain.steps[1].estimators_[0].pool_
    assert not np.array_equal(pool.logits.astype(np.float32), pool.logits)  # scaled: not float32-exact
    loaded, path = _round_trip(chain, tmp_path, "ts+lece")
    assert _row_arrays(path) == sorted([("<f4", logits32.logits.shape), ("<i8", CAL[1].shape)])
    for key, value in vars(pool).items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(loaded.steps[1].estimators_[0].pool_, key), value, err_msg=key)
    again = calbench.save(loaded, tmp_path / "again.safetensors")  # a loaded chain saves the same way
    assert [dtype for dtype, _ in _row_arrays(again)] == ["<f4", "<i8"]

    monkeypatch.setattr(calbench.scores.Derivation, "replay", lambda self: self.logits)  # a replay that differs
    stored = _row_arrays(calbench.save(chain, tmp_path / "stored.safetensors"))
    assert stored == sorted([("<f8", pool.logits.shape), ("<i8", CAL[1].shape)])


def _row_arrays(path):
    """dtype and shape of the stored arrays with a row per calibration point (not the grid search's CV table)."""
    return sorted((a.dtype.str, a.shape) for a in _tensors(path).values() if a.shape[0] == CAL[1].size)


def test_a_default_grid_function_is_saved_as_the_methods_default_grid_not_by_name(tmp_path):
    """dir_l2's default grid is a function of the number of classes: the file says "the estimator's default grid"
    (with the settings held fixed), names no function, and loads as the same function."""
    cal = make("dir_l2", cv={"folds": 2}).fit(CAL[0], CAL[1])
    loaded, path = _round_trip(cal, tmp_path, "dir_l2")
    assert loaded.grid is cal.grid
    assert "l2_default_grid" not in path.read_bytes().decode("latin-1")
    fixed = make("dir_l2", reg_scale="paper", cv={"folds": 2}).fit(CAL[0], CAL[1])  # a GridWithout
    loaded, _ = _round_trip(fixed, tmp_path, "dir_l2_fixed")
    assert loaded.grid.grid is fixed.grid.grid and loaded.grid.fixed == fixed.grid.fixed


def test_probability_input_kind_is_recorded(tmp_path):
    cal = make("ts").fit(Scores.from_probs(CAL[0].probs), CAL[1])
    path = calbench.save(cal, tmp_path / "p.safetensors", input_kind="probs")
    assert calbench.load(path).input_kind_ == "probs"
    with pytest.raises(ValueError, match="input_kind"):
        calbench.save(cal, tmp_path / "q.safetensors", input_kind="logit")


def test_unfitted_and_unsaveable_calibrators_are_refused(tmp_path):
    with pytest.raises(ValueError, match="not fitted"):
        calbench.save(make("ts"), tmp_path / "x.safetensors")
    cal = make("lece", grid={"q": [0.1], "t": [0.0]}, cv={"folds": 2}).fit(CAL[0], CAL[1])
    cal.grid = lambda k: {"q": [0.1]}
    with pytest.raises(TypeError, match="other than the method's default grid"):
        calbench.save(cal, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()

    class MyScaling(type(make("ts"))):  # a user's class: loading could not resolve it, so saving refuses
        pass

    with pytest.raises(TypeError, match="not a registered calibrator class"):
        calbench.save(MyScaling().fit(CAL[0], CAL[1]), tmp_path / "x.safetensors")
    nan = make("ts").fit(CAL[0], CAL[1])
    nan.temperature_ = float("nan")  # a diverged fit: refused at saving, as at loading
    with pytest.raises(ValueError, match="calibrator.state.temperature_: it holds NaN"):
        calbench.save(nan, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


@pytest.fixture
def saved(tmp_path):
    cal = make("vs").fit(CAL[0], CAL[1])
    return calbench.save(cal, tmp_path / "vs.safetensors")


def test_truncated_file_is_detected(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) - 20])
    with pytest.raises(CalibratorFileError, match="truncated"):
        calbench.load(saved)


def _rewrite(path, edit_header=None, edit_arrays=None):
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(path), framework="np") as f:
        header = json.loads(f.metadata()["calbench"])
        arrays = {k: f.get_tensor(k) for k in f.keys()}
    if edit_header:
        edit_header(header)
    if edit_arrays:
        edit_arrays(arrays)
    save_file(arrays, str(path), metadata={"calbench": json.dumps(header)})


def test_tampered_weights_fail_the_checksum(saved):
    def bump(arrays):
        key = next(iter(arrays))
        arrays[key] = arrays[key] + 1e-9

    _rewrite(saved, edit_arrays=bump)
    with pytest.raises(CalibratorFileError, match="checksum"):
        calbench.load(saved)


def _recheck(header, arrays):
    header["checksum"] = calbench.persist.format.checksum(header, arrays)


def test_an_edited_header_field_is_refused_even_with_a_recomputed_checksum(saved):
    """Every header field is under the checksum; the fields computed from the calibrator (method, num_classes,
    ...) are computed again on loading, so an edit with the checksum recomputed is refused too."""
    _rewrite(saved, edit_header=lambda h: h.update(method="magic_scaling"))
    with pytest.raises(CalibratorFileError, match="header field 'checksum'"):
        calbench.load(saved)
    _rewrite(saved, edit_header=lambda h: (h.update(method="ts"), h.update(checksum=None)))
    _rewrite(saved, edit_header=lambda h: h.update(checksum=calbench.persist.format.checksum(h, _tensors(saved))))
    with pytest.raises(CalibratorFileError, match=r"vs.safetensors: header field 'method': says ts"):
        calbench.load(saved)


def test_older_and_newer_formats_say_what_to_do_and_classes_are_known_by_registered_name_only(saved, tmp_path):
    _rewrite(saved, edit_header=lambda h: h.update(format_version=99))
    with pytest.raises(CalibratorFileError, match="upgrade calbench"):
        calbench.load(saved)
    _rewrite(saved, edit_header=lambda h: h.update(format_version=2))
    with pytest.raises(CalibratorFileError, match="earlier formats named classes"):
        calbench.load(saved)
    other = calbench.save(make("ts").fit(CAL[0], CAL[1]), tmp_path / "ts.safetensors")

    def foreign(h):
        h["calibrator"]["$calibrator"] = "os:system"
        h["checksum"] = calbench.persist.format.checksum(h, {})

    _rewrite(other, edit_header=foreign)
    with pytest.raises(CalibratorFileError, match="calibrator: unknown method 'os:system'"):
        calbench.load(other)


def test_non_finite_fitted_values_are_refused_at_loading(saved, tmp_path):
    """A NaN temperature once wrote all-NaN probabilities with exit status 0: a non-finite number or array entry of
    a fitted state is refused, naming the field, even with the checksum recomputed."""
    ts = calbench.save(make("ts").fit(CAL[0], CAL[1]), tmp_path / "ts.safetensors")

    def nan_temperature(h):
        pairs = h["calibrator"]["state"]["$dict"]
        pairs[[k for k, _ in pairs].index("temperature_")][1] = float("nan")
        h["checksum"] = calbench.persist.format.checksum(h, {})

    _rewrite(ts, edit_header=nan_temperature)
    with pytest.raises(CalibratorFileError, match=r"ts.safetensors: calibrator.state.temperature_: non-finite"):
        calbench.load(ts)

    def inf_weight(arrays):
        key = next(iter(arrays))
        arrays[key] = arrays[key].copy()
        arrays[key][0] = np.inf

    _rewrite(saved, edit_arrays=inf_weight)
    _rewrite(saved, edit_header=lambda h: h.update(checksum=calbench.persist.format.checksum(h, _tensors(saved))))
    with pytest.raises(CalibratorFileError, match=r"vs.safetensors: calibrator.state.\w+_: NaN or infinite"):
        calbench.load(saved)


def test_a_saved_state_holds_only_the_fitted_attributes_its_class_declares(saved, tmp_path):
    """A class declares its fitted state by assigning it (``self.temperature_ = ...``, in its methods or its
    bases'); saving refuses another attribute, and loading refuses a name the class does not declare, or one
    that would replace a method or property, even with the checksum recomputed."""
    from calbench.fitted_state import fitted_names

    assert fitted_names(type(make("ts"))) == {"num_classes_", "embedding_dim_", "temperature_"}
    cal = make("ts").fit(CAL[0], CAL[1])
    cal.note_ = "mine"
    with pytest.raises(TypeError, match="'note_' is neither a setting"):
        calbench.save(cal, tmp_path / "x.safetensors")
    for name in ("extra_", "classes_", "predict_proba", "__class__"):
        def rename(h, name=name):
            pairs = h["calibrator"]["state"]["$dict"]
            pairs[[k for k, _ in pairs].index("weights_")][0] = name
            h["checksum"] = calbench.persist.format.checksum(h, _tensors(saved))

        calbench.save(make("vs").fit(CAL[0], CAL[1]), saved)
        _rewrite(saved, edit_header=rename)
        with pytest.raises(CalibratorFileError, match=f"calibrator.state: '{name}' is not an attribute a "
                                                      "VectorScaling can be given"):
            calbench.load(saved)


def test_counts_that_size_the_probe_are_bounded(tmp_path):
    """The number of classes sizes the probe's input (and nothing in an uncalibrated model's file is C long), so a
    count above MAX_CLASSES is refused before anything of that size is made."""
    path = calbench.save(make("uncal").fit(CAL[0], CAL[1]), tmp_path / "u.safetensors")

    def huge(h):
        h["calibrator"]["state"]["$dict"] = [["num_classes_", calbench.persist.MAX_CLASSES + 1]]
        h["num_classes"] = calbench.persist.MAX_CLASSES + 1
        h["checksum"] = calbench.persist.format.checksum(h, {})

    _rewrite(path, edit_header=huge)
    with pytest.raises(CalibratorFileError, match=r"calibrator.state.num_classes_: 1048577 is not a count"):
        calbench.load(path)


def test_a_tensor_the_header_names_nowhere_is_refused(saved):
    _rewrite(saved, edit_arrays=lambda arrays: arrays.update(extra=np.zeros(3)))
    _rewrite(saved, edit_header=lambda h: h.update(checksum=calbench.persist.format.checksum(h, _tensors(saved))))
    with pytest.raises(CalibratorFileError, match=r"vs.safetensors: tensors \['extra'\]: named nowhere"):
        calbench.load(saved)


def test_saved_settings_and_grid_values_are_checked_against_the_declared_constraints(tmp_path):
    """A setting or a grid value that make() would refuse is refused at loading, naming it (LECE's q ∈ (0, 1])."""
    path = calbench.save(fitted("lece"), tmp_path / "lece.safetensors")
    arrays = _tensors(path)

    def pairs_of(node):
        return dict((k, i) for i, (k, _) in enumerate(node["$dict"]))

    def grid_q(h):
        params = h["calibrator"]["params"]
        grid = params["$dict"][pairs_of(params)["grid"]][1]
        grid["$dict"][pairs_of(grid)["q"]][1] = [0.1, 5.0]
        h["checksum"] = calbench.persist.format.checksum(h, arrays)

    def estimator_q(h):
        params = h["calibrator"]["params"]
        fold_model = h["calibrator"]["state"]["$dict"][pairs_of(h["calibrator"]["state"])["estimators_"]][1][0]
        fold_model["params"]["$dict"][pairs_of(fold_model["params"])["q"]][1] = -1.0
        assert params  # the search's own settings untouched
        h["checksum"] = calbench.persist.format.checksum(h, arrays)

    for edit, field in ((grid_q, r"calibrator.params.grid.q: 5.0 is not allowed"),
                        (estimator_q, r"calibrator.state.estimators_\[0\].params.q: -1.0 is not allowed")):
        calbench.save(fitted("lece"), path)
        _rewrite(path, edit_header=edit)
        with pytest.raises(CalibratorFileError, match=field):
            calbench.load(path)


@pytest.mark.parametrize("name", ["kcal", "lece"])
def test_saved_labels_outside_the_classes_are_refused(name, tmp_path):
    """Labels index by class (KCal's class sums and prior, LECE's targets): a saved label outside [0, C), which
    would index outside or allocate by its value, is refused at loading."""
    cal = fitted(name)
    labels = cal.support_labels_ if name == "kcal" else cal.estimators_[0].pool_.labels
    path = calbench.save(cal, tmp_path / f"{name}.safetensors")
    key = next(k for k, a in _tensors(path).items() if a.dtype.kind == "i" and np.array_equal(a, labels))

    def huge_label(arrays):
        arrays[key] = arrays[key].copy()
        arrays[key][0] = 10**12

    _rewrite(path, edit_arrays=huge_label)
    _rewrite(path, edit_header=lambda h: h.update(checksum=calbench.persist.format.checksum(h, _tensors(path))))
    with pytest.raises(CalibratorFileError, match=r"labels_?: expected"):
        calbench.load(path)
