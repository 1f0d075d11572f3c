"""Loading: a calibrator built from a file's JSON tree and tensors, every value's kind, range and cost checked
(docs/saved_calibrators.md)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from calbench.fitted_state import StateError, charging, check_declared_settings, check_state, declared_state
from calbench.persist.budget import PROBE_ROWS, DecodeBudget
from calbench.persist.format import (
    MAX_CLASSES,
    MAX_DEPTH,
    SCALAR_DTYPES,
    CalibratorFileError,
    class_of_name,
    init_names,
    maps,
)

_ATTRIBUTE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: The dtypes of the arrays a calibrator file gives (what saving writes): an array of another dtype would also
#: make the compiled kernels compile a new specialisation.
DECODED_DTYPES = (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_))


class DefaultGrid:
    """A ``$default_grid`` node: the grid search's estimator's own default grid, with ``fixed`` held fixed."""

    def __init__(self, fixed):
        self.fixed = fixed


class Decoder:
    """Builds a calibrator from an encoded tree and the file's arrays, checking every value's kind and charging what
    it materialises to ``budget`` (:class:`~calbench.persist.budget.DecodeBudget`; by default, that of a file of the
    arrays' size)."""

    def __init__(self, arrays: dict, path: Path, budget: DecodeBudget | None = None):
        self.arrays, self.path = arrays, path
        self.budget = budget or DecodeBudget(path, sum(a.nbytes for a in arrays.values()))
        self.unread = set(arrays)  # every tensor must be named by the tree
        self.checked: dict[tuple[str, bool], np.ndarray] = {}  # (tensor, widened) → the array every reference shares
        self.calibrators = 0  # calibrators built: each holds an array of the probe's shape while the probe runs

    def error(self, where: str, problem: str) -> CalibratorFileError:
        where = where if len(where) <= 200 else f"{where[:60]}...{where[-140:]}"
        return CalibratorFileError(f"{self.path}: {where}: {problem}; the file is damaged or was not written by "
                                   "calbench.save: refit and save the calibrator again")

    def value(self, node, where: str, depth: int = 0):
        if depth > MAX_DEPTH:
            raise self.error(where, f"nested deeper than {MAX_DEPTH} levels")
        if node is None or isinstance(node, (bool, str, int)):
            return node
        if isinstance(node, float):
            if not math.isfinite(node):
                raise self.error(where, f"non-finite number {node}")
            return node
        if isinstance(node, list):
            return [self.value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(node)]
        if not isinstance(node, dict):
            raise self.error(where, f"unexpected {type(node).__name__}")
        tags = sorted(node)
        if tags in (["$array"], ["$array", "as"]):
            return self.array(node, where)
        if tags == ["$scalar", "value"]:
            return self.scalar(node, where)
        if tags == ["$tuple"] and isinstance(node["$tuple"], list):
            return tuple(self.value(node["$tuple"], where, depth + 1))
        if tags == ["$dict"]:
            return self.mapping(node["$dict"], where, depth + 1)
        if tags == ["$calibrator", "params", "state"]:
            return self.calibrator(node, where, depth + 1)
        if tags == ["$map", "state"]:
            return self.map(node, where, depth + 1)
        if tags == ["$default_grid"] and where.endswith(".params.grid"):  # a setting of a calibrator, no deeper
            return DefaultGrid(self.value(node["$default_grid"], where, depth + 1))
        raise self.error(where, f"unknown node with keys {[str(t)[:40] for t in tags[:5]]}")

    def array(self, node: dict, where: str) -> np.ndarray:
        key = node["$array"]
        if not isinstance(key, str) or key not in self.arrays:
            raise self.error(where, f"names tensor {str(key)[:80]!r}, which the file does not hold")
        stored = self.arrays[key]
        self.unread.discard(key)
        widen = "as" in node
        if widen and (node["as"] != "<f8" or stored.dtype != np.float32):
            raise self.error(where, f"'as' {str(node['as'])[:40]!r} on a {stored.dtype} tensor (only float32 "
                             "tensors widen, to '<f8')")
        if not widen and stored.dtype not in DECODED_DTYPES:
            raise self.error(where, f"tensor {key[:40]!r} of dtype {stored.dtype}: a calibrator's arrays are "
                             f"{', '.join(map(str, DECODED_DTYPES))} (float32 only where the node widens it, 'as': "
                             "'<f8')")
        if (key, widen) in self.checked:  # one widened copy and one check per tensor, however often it is named
            return self.checked[key, widen]
        if widen:
            self.budget.charge(8 * stored.size, f"the float64 copy of tensor {key[:40]!r}", where)
            stored = stored.astype(np.float64)
        if stored.dtype.kind == "f":
            self.budget.charge(stored.size, f"the finiteness check of tensor {key[:40]!r}", where)
            if not np.all(np.isfinite(stored)):
                raise self.error(where, "NaN or infinite values in a fitted array")
        self.checked[key, widen] = stored
        return stored

    def scalar(self, node: dict, where: str):
        dtype, value = node["$scalar"], node["value"]
        if dtype not in SCALAR_DTYPES:
            raise self.error(where, f"scalar dtype {str(dtype)[:40]!r} is not one of {', '.join(SCALAR_DTYPES)}")
        kind = np.dtype(dtype).kind
        fits = (type(value) is bool if kind == "b" else
                type(value) is int and np.iinfo(dtype).min <= value <= np.iinfo(dtype).max if kind in "iu" else
                type(value) in (int, float) and math.isfinite(value))
        with np.errstate(over="ignore"):
            scalar = np.dtype(dtype).type(value) if fits else None
        if scalar is None or (kind == "f" and not np.isfinite(scalar)):
            raise self.error(where, f"{str(value)[:40]!r} is not a finite {np.dtype(dtype)} value")
        return scalar

    def mapping(self, pairs, where: str, depth: int, attributes: bool = False) -> dict:
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise self.error(where, "a dict is a list of [key, value] pairs")
        out = {}
        for key, value in pairs:
            if not (key is None or isinstance(key, (bool, int, str)) or (isinstance(key, float)
                                                                         and math.isfinite(key))):
                raise self.error(where, f"dict key {str(key)[:40]!r} is not a number or a string")
            out[key] = self.value(value, f"{where}.{key}" if attributes else f"{where}[{key!r}]", depth)
        return out

    def attributes(self, node, where: str, depth: int, allowed, cls: type) -> dict:
        """A ``$dict`` of attribute names → values; the names must be ``allowed`` (a pattern or a set) and not be
        ``cls``'s own attributes (methods, properties, class settings)."""
        if not isinstance(node, dict) or sorted(node) != ["$dict"]:
            raise self.error(where, "expected a dict of attributes")
        for pair in node["$dict"] if isinstance(node["$dict"], list) else ():
            name = pair[0] if isinstance(pair, list) and pair else None
            if (not isinstance(name, str) or hasattr(cls, name)
                    or not (allowed.match(name) if isinstance(allowed, re.Pattern) else name in allowed)):
                raise self.error(where, f"{str(name)[:80]!r} is not an attribute a {cls.__name__} can be given")
        return self.mapping(node["$dict"], where, depth + 1, attributes=True)

    def calibrator(self, node: dict, where: str, depth: int):
        from calbench.methods.constraints import InvalidSetting, check_settings
        from calbench.methods.tuning import GridSearch

        cls = class_of_name(node["$calibrator"], f"{self.path}: {where}")
        params = self.attributes(node["params"], f"{where}.params", depth, _ATTRIBUTE_NAME, object)
        expected = cls._get_param_names()
        if sorted(params) != expected:
            raise self.error(f"{where}.params", f"{cls.__name__} takes the settings {expected}, the file gives "
                             f"{sorted(params)}")
        for key, value in params.items():
            if isinstance(value, DefaultGrid):
                params[key] = self.default_grid(value, params, f"{where}.params.{key}", cls is GridSearch
                                                and key == "grid")
        try:
            check_settings(cls._parameter_constraints, params, prefix=f"{where}.params.")
            if cls is GridSearch:
                check_grid(params["estimator"], params["grid"], f"{where}.params.grid.")
        except InvalidSetting as err:
            raise self.error(err.key, f"{err.detail} (the constraint {cls.__name__} declares)") from err
        try:
            cal = cls(**params)
            state = self.attributes(node["state"], f"{where}.state", depth, set(declared_state(cls)), cls)
            for key in ("num_classes_", "embedding_dim_"):
                count = state.get(key, 1)
                if type(count) is not int or not 1 <= count <= MAX_CLASSES:
                    raise self.error(f"{where}.state.{key}", f"{str(count)[:40]} is not a count in [1, {MAX_CLASSES}]")
            self.set_state(cal, state, f"{where}.state")
            self.check_state(cal, f"{where}.state.", f"{where}.params.")
        except CalibratorFileError:
            raise
        except Exception as err:  # a trust boundary: whatever the state makes the class do is the file's fault
            raise self.error(where, f"the saved {cls.__name__} cannot be built ({type(err).__name__}: "
                             f"{str(err)[:300]})") from err
        self.calibrators += 1
        return cal

    def set_state(self, obj, state: dict, where: str) -> None:
        """Give ``obj`` its fitted ``state``; a class with ``_set_state`` rebuilds it, charged first what its
        ``_set_state_bytes(state)`` says the rebuild allocates (by default twice the bytes of the state's arrays: the
        checks' temporaries)."""
        if not hasattr(obj, "_set_state"):
            obj.__dict__.update(state)
            return
        cost = getattr(type(obj), "_set_state_bytes", None)
        nbytes = cost(state) if cost is not None else \
            2 * sum(value.nbytes for value in state.values() if isinstance(value, np.ndarray))
        self.budget.charge(nbytes, f"rebuilding the {type(obj).__name__}", where)
        obj._set_state(state)

    def check_state(self, obj, prefix: str, settings_prefix: str | None = None) -> None:
        """Every fitted attribute of a built calibrator or map against its class's declaration
        (:func:`calbench.fitted_state.check_state`), before it first predicts."""
        try:
            with charging(lambda nbytes, field: self.budget.charge(nbytes, "the range check", field)):
                check_state(obj, prefix, settings_prefix=settings_prefix)
        except StateError as err:
            raise self.error(err.field, f"{err.detail} (the fitted state {type(obj).__name__} declares)") from err

    def default_grid(self, marker: DefaultGrid, params: dict, where: str, allowed: bool):
        from calbench.methods.base import Calibrator
        from calbench.methods.tuning import GridWithout

        estimator = params.get("estimator")
        default = getattr(type(estimator), "default_grid", None) if isinstance(estimator, Calibrator) else None
        if not allowed or not callable(default):
            raise self.error(where, "a default grid stands only for a grid search's grid whose estimator has a "
                             "default grid function")
        if marker.fixed is None:
            return default
        if not isinstance(marker.fixed, dict) or not marker.fixed:
            raise self.error(where, "the settings a default grid holds fixed are a non-empty dict")
        return GridWithout(default, marker.fixed)

    def map(self, node: dict, where: str, depth: int):
        found = maps()
        name = node["$map"]
        if name not in found:
            raise self.error(where, f"{str(name)[:80]!r} is not a map of calbench.maps1d ({', '.join(found)})")
        cls = found[name]
        declared = (_ATTRIBUTE_NAME if hasattr(cls, "_set_state") else
                    frozenset(init_names(cls)) | set(declared_state(cls)))
        state = self.attributes(node["state"], where, depth, declared, cls)
        try:
            if hasattr(cls, "_set_state"):
                obj = cls.__new__(cls)
                self.set_state(obj, state, where)
            else:
                settings = init_names(cls)
                missing = sorted(set(settings) - set(state))
                if missing:
                    raise self.error(where, f"a {name} takes the settings {settings}; the file lacks {missing}")
                try:
                    check_declared_settings(cls, {k: state[k] for k in settings}, f"{where}.")
                except StateError as err:
                    raise self.error(err.field, f"{err.detail} (the setting {name} declares)") from err
                obj = cls(**{k: state[k] for k in settings})
                obj.__dict__.update({k: v for k, v in state.items() if k not in settings})
            self.check_state(obj, f"{where}.")
            return obj
        except CalibratorFileError:
            raise
        except Exception as err:
            raise self.error(where, f"the saved {name} cannot be built ({type(err).__name__}: "
                             f"{str(err)[:300]})") from err


def check_grid(estimator, grid, prefix: str) -> None:
    """A saved grid's values (or the settings a default grid holds fixed) checked against the estimator's declared
    constraints, as :func:`~calbench.methods.make` checks a grid."""
    from calbench.methods.constraints import check_settings
    from calbench.methods.tuning import GridWithout

    constraints = getattr(type(estimator), "_parameter_constraints", {})
    values = grid.fixed if isinstance(grid, GridWithout) else grid if isinstance(grid, dict) else {}
    for key, options in values.items():
        for value in options if isinstance(options, list) and not isinstance(grid, GridWithout) else [options]:
            check_settings(constraints, {key: value}, prefix=prefix)


def probe(cal, decoder: Decoder) -> None:
    """Check that a loaded calibrator computes, once per file: its probabilities on a fixed input of its number of
    classes (and embedding width) are rows of probability distributions of that shape. The input and the arrays of
    its shape that each calibrator of the file holds are charged to the decode budget first."""
    from calbench.scores import Scores, non_distributions

    width = getattr(cal, "embedding_dim_", 0) if "embeddings" in cal.needs else 0
    decoder.budget.charge(decoder.budget.probe_bytes(cal.num_classes_, width, decoder.calibrators),
                          f"the probe ({PROBE_ROWS} rows of {cal.num_classes_} classes through "
                          f"{decoder.calibrators} calibrators)", "calibrator")
    try:
        rng = np.random.default_rng(0)
        logits = rng.normal(scale=3.0, size=(PROBE_ROWS, cal.num_classes_))
        embeddings = None
        if "embeddings" in cal.needs:
            if not width:
                raise ValueError("it reads embeddings but its state gives no embedding_dim_")
            embeddings = rng.normal(size=(PROBE_ROWS, width))
        probs = np.asarray(cal.predict_proba(Scores(logits, embeddings)))
        if probs.shape != logits.shape or non_distributions(probs):
            raise ValueError(f"its output on {PROBE_ROWS} rows of {cal.num_classes_} classes is not a matrix of "
                             f"probability distributions of that shape (shape {probs.shape})")
    except Exception as err:  # the file's state, not the user's input
        raise decoder.error("calibrator", f"the saved calibrator does not compute probabilities "
                            f"({type(err).__name__}: {str(err)[:300]})") from err
