"""Declared fitted state (calbench.fitted_state): every registered method, both compositions and every 1-D map
declares exactly the attributes it fits; fitted instances of 2, 3 and 10 classes satisfy their declarations; and a
saved calibrator file whose declared array or scalar fields were replaced (reshaped, cast to another dtype kind, a
string, an array for a number), derived header fields and checksum recomputed, is refused naming the field."""

from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest

import calbench
from calbench.fitted_state import Array, Count, Scalar, StateError, check_state, declared_state, fitted_names
from calbench.methods import available, make, method_class
from calbench.methods.chain import Chain
from calbench.persist import CalibratorFileError
from calbench.persist.format import checksum as _checksum
from calbench.persist.format import compositions as _compositions
from calbench.persist.format import derived as _derived
from calbench.persist.format import maps as _maps
from test_persist import KCAL_FAST, _data, _make, _rewrite, _tensors, fitted

CLASSES = [method_class(name) for name in available()] + list(_compositions().values()) + list(_maps().values())


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_class_declares_exactly_the_attributes_its_methods_fit(cls):
    assert set(declared_state(cls)) == set(fitted_names(cls)), (
        f"{cls.__name__}: declare every fitted attribute its methods assign in _fitted_state (calbench.fitted_state)")


def _quick(name: str, classes: int):
    """Method ``name`` made to fit in a moment: the last two values of each setting its default grid searches."""
    grid = method_class(name).default_grid
    grid = grid(classes) if callable(grid) else grid
    if grid:
        return make(name, grid={key: values[-2:] for key, values in grid.items()}, cv={"folds": 3})
    return make(name, **{**KCAL_FAST, "n_folds": 2}) if name.startswith("kcal") else _make(name)


@pytest.mark.parametrize("classes", [2, 3, 10])
@pytest.mark.parametrize("name", available() + ["ts+lece"])
def test_fitted_calibrators_satisfy_their_declaration(name, classes):
    scores, y = _data(60 * classes, classes, k=classes, h=6)
    train = _data(40 * classes, classes + 1, k=classes, h=6) if "kcal" in name else None
    stages = [_quick(stage, classes) for stage in name.split("+")]
    cal = stages[0] if len(stages) == 1 else Chain(stages)
    cal.fit(scores, y, train=train)
    for step in getattr(cal, "steps", [cal]):
        check_state(step, deep=True)
        assert step.num_classes_ == classes


@pytest.mark.parametrize("cls", list(_maps().values()), ids=lambda cls: cls.__name__)
def test_fitted_maps_satisfy_their_declaration(cls):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.99, 300)
    fitted_map = cls().fit(p, (rng.uniform(size=p.size) < p).astype(np.float64))
    check_state(fitted_map, deep=True)


@pytest.mark.parametrize("cls", list(_maps().values()), ids=lambda cls: cls.__name__)
def test_every_map_declares_each_of_its_settings_and_its_defaults_satisfy_them(cls):
    """A saved map is rebuilt from its settings: each is declared (kind and range), so a file cannot leave one out
    for its default or give another kind (``n_folds: "3"``)."""
    from calbench.fitted_state import check_declared_settings, declared_settings
    from calbench.persist.format import init_names

    assert set(declared_settings(cls)) == set(init_names(cls))
    made = cls()
    check_declared_settings(cls, {name: getattr(made, name) for name in init_names(cls)})


def test_a_wrong_state_is_refused_naming_the_field_with_expected_and_found():
    cal = fitted("vs")
    reshaped = r"expected axis 0 of a float array of shape \(C, C\) to be C = 4, found 16"
    for value, expected in ((cal.weights_.reshape(16, 1), reshaped),
                            (cal.weights_.astype(np.int64), "expected a float array of shape"),
                            ("hello", "found a str 'hello'")):
        broken = copy.copy(cal)
        broken.weights_ = value
        with pytest.raises(StateError, match=f"^weights_: .*{expected}"):
            check_state(broken)
    broken = copy.copy(cal)
    broken.penalty_centre_ = "hello"
    with pytest.raises(StateError, match="^penalty_centre_: expected a number or None, found a str 'hello'"):
        check_state(broken)


def test_sizes_agree_between_fields_and_with_settings():
    """A free length is one length throughout its object (an isotonic map's knots); a size may name a setting (the
    bins of a histogram binning, 2B + 1 parameters of a B-piece map)."""
    from calbench.maps1d import Isotonic, PiecewiseLinear

    iso = Isotonic().fit(np.linspace(0.1, 0.9, 20), np.tile([0.0, 1.0], 10))
    iso.knots_y_ = iso.knots_y_[:-1]
    with pytest.raises(StateError, match=r"^knots_y_: expected axis 0 of a float array of shape \(n,\) to be n = "):
        check_state(iso)
    hist = copy.deepcopy(fitted("hist"))
    hist.binary_maps_[1]["filled"] = hist.binary_maps_[1]["filled"][:-1]
    with pytest.raises(StateError, match=r"^binary_maps_\[1\]\['filled'\]: .* to be n_bins = 10, found 9"):
        check_state(hist)
    pl = PiecewiseLinear(n_pieces=3)
    pl.theta_ = np.zeros(5)
    with pytest.raises(StateError, match=r"to be 2\*n_pieces\+1 = 7 \(n_pieces = 3\), found 5"):
        check_state(pl)


# -- crafted files ---------------------------------------------------------------------------------------------
def _fields(node, where="calibrator"):
    """(path as loading names it, owning class, field, JSON path) of every state field of every calibrator and map
    of an encoded tree whose declaration is an array, a scalar or a count."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from ((w, c, f, (i, *at)) for w, c, f, at in _fields(item, f"{where}[{i}]"))
        return
    if not isinstance(node, dict):
        return
    if "$calibrator" in node or "$map" in node:
        cls = (_maps()[node["$map"]] if "$map" in node else
               {**_compositions()}.get(node["$calibrator"]) or method_class(node["$calibrator"]))
        base = f"{where}.state" if "$calibrator" in node else where
        declared = declared_state(cls)
        for i, (key, value) in enumerate(node["state"]["$dict"]):
            if isinstance(declared.get(key), (Array, Scalar, Count)):
                yield f"{base}.{key}", cls, key, ("state", "$dict", i, 1)
            yield from ((w, c, f, ("state", "$dict", i, 1, *at)) for w, c, f, at in _fields(value, f"{base}.{key}"))
        return
    if "$dict" in node:
        for i, (key, value) in enumerate(node["$dict"]):
            yield from ((w, c, f, ("$dict", i, 1, *at)) for w, c, f, at in _fields(value, f"{where}[{key!r}]"))
    elif "$tuple" in node:
        yield from ((w, c, f, ("$tuple", *at)) for w, c, f, at in _fields(node["$tuple"], where))


def _forgeries(spec, node, arrays):
    """(description, new node, new arrays) of each wrong value of a field declared ``spec`` saved as ``node``."""
    if isinstance(node, dict) and "$array" in node:
        arr = arrays[node["$array"]]
        cast = (arr.view(np.int64) if arr.dtype == np.float64 else arr.view(np.int32) if arr.dtype == np.float32
                else arr.astype(np.float64))
        yield "reshaped", node, {**arrays, node["$array"]: arr.reshape(-1, 1)}
        yield f"cast to {cast.dtype}", {"$array": node["$array"]}, {**arrays, node["$array"]: cast}
        yield "a string", "hello", arrays
    else:
        yield "an array", {"$array": "forged"}, {**arrays, "forged": np.ones(3)}
        if getattr(spec, "kind", None) is not str:
            yield "a string", "hello", arrays


def _removed(tree, at):
    """``tree`` without the state field at ``at`` (its [name, value] pair)."""
    tree = json.loads(json.dumps(tree))
    pairs = _get(tree, at[:-2])
    del pairs[at[-2]]
    return tree


def _set(tree, at, value):
    for step in at[:-1]:
        tree = tree[step]
    tree[at[-1]] = value


@pytest.mark.parametrize("name", available() + ["ts+lece"])
def test_a_file_with_a_field_of_the_wrong_kind_or_shape_is_refused_naming_the_field(name, tmp_path):
    original = calbench.save(fitted(name), tmp_path / "original.safetensors")
    header = calbench.persist.read_header(original)
    arrays = _tensors(original)
    loaded = calbench.load(original)
    forged_path = tmp_path / "forged.safetensors"
    count = 0
    for where, cls, field, at in _fields(header["calibrator"]):
        spec = declared_state(cls)[field]
        for what, node, forged_arrays in _forgeries(spec, _get(header["calibrator"], at), arrays):
            forged = json.loads(json.dumps(header))
            _set(forged["calibrator"], at, node)
            if where.count(".state.") == 1 and where.startswith("calibrator.state."):  # the forger's own header fields
                model = copy.copy(loaded)
                setattr(model, field, node if isinstance(node, str) else forged_arrays.get(node.get("$array", ""), 0))
                try:
                    forged.update(_derived(model))
                except Exception:  # noqa: BLE001 (a state that cannot report them keeps the saved fields)
                    pass
            forged["checksum"] = _checksum(forged, forged_arrays)
            shutil.copyfile(original, forged_path)
            _rewrite(forged_path, edit_header=lambda h, forged=forged: (h.clear(), h.update(forged)),
                     edit_arrays=lambda a, forged_arrays=forged_arrays: (a.clear(), a.update(forged_arrays)))
            with pytest.raises(CalibratorFileError) as err:
                calbench.load(forged_path)
            assert f"{forged_path}: {where}" in str(err.value), f"{name}: {where} {what}: {err.value}"
            count += 1
    for where, cls, field, at in _fields(header["calibrator"]):
        if not declared_state(cls)[field].optional:
            forged = {**header, "calibrator": _removed(header["calibrator"], at)}
            forged["checksum"] = _checksum(forged, arrays)
            shutil.copyfile(original, forged_path)
            _rewrite(forged_path, edit_header=lambda h, forged=forged: (h.clear(), h.update(forged)))
            with pytest.raises(CalibratorFileError) as err:
                calbench.load(forged_path)
            assert f"{forged_path}: {where}" in str(err.value), f"{name}: {where} removed: {err.value}"
    top = {field for where, _, field, _ in _fields(header["calibrator"]) if where == f"calibrator.state.{field}"}
    assert top == {field for field, spec in declared_state(type(loaded)).items()
                   if isinstance(spec, (Array, Scalar, Count)) and field in vars(loaded)} and count >= 2 * len(top)


def _get(tree, at):
    for step in at:
        tree = tree[step]
    return tree


def test_the_crafted_fields_reach_nested_calibrators():
    """The crafted files reach nested calibrators: a grid search's fold models' weights are among the fields."""
    header = json.loads(json.dumps(calbench.persist.encode.Encoder().encode(fitted("dir_odir"), "calibrator")))
    paths = [where for where, *_ in _fields(header)]
    assert "calibrator.state.estimators_[0].state.weights_" in paths and "calibrator.state.cv_losses_" in paths
