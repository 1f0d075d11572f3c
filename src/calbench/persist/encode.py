"""Saving: a fitted calibrator as a JSON tree of tagged nodes plus named arrays (docs/saved_calibrators.md)."""

from __future__ import annotations

import math

import numpy as np

from calbench.fitted_state import StateError, check_declared_settings, check_state, declared_state
from calbench.persist.format import SCALAR_DTYPES, init_names, maps, name_of_class, state_of

#: float64 arrays of at least this many entries are checked for a lossless float32 copy (logits read from a
#: float32 dump, say): half the bytes, and the loaded array is the same float64 bit for bit.
NARROW_MIN_SIZE = 4096


def finite_or_refuse(value, where: str) -> None:
    """Refuse to save a NaN or infinite value: the fit failed or diverged."""
    if not np.all(np.isfinite(value)):
        raise ValueError(f"cannot save {where}: it holds NaN or infinite values, so the fit failed or diverged; "
                         "check the scores and refit before saving")


class Encoder:
    """Turns a calibrator into a JSON tree plus named arrays. An array object met twice (a chain's fitted steps
    are both its parameters and its state) is stored once; float64 arrays that float32 holds exactly are stored
    as float32 (:data:`NARROW_MIN_SIZE`)."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self._seen: dict[int, tuple[np.ndarray, dict]] = {}  # id → (the array, kept alive; its node)

    def array(self, value: np.ndarray, where: str) -> dict:
        if value.dtype.kind not in "biuf" or value.dtype.itemsize > 8:
            raise TypeError(f"cannot save {where}: arrays of dtype {value.dtype} are not supported (booleans, "
                            "integers and floats only)")
        if id(value) in self._seen:
            return dict(self._seen[id(value)][1])
        if value.dtype.kind == "f":
            finite_or_refuse(value, where)
        key = f"a{len(self.arrays)}"
        node = {"$array": key}
        stored = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"), copy=False)
        if stored.dtype == np.float64 and stored.size >= NARROW_MIN_SIZE:
            narrow = stored.astype(np.float32)
            if np.array_equal(narrow, stored):
                stored, node["as"] = narrow, stored.dtype.str
        self.arrays[key] = stored
        self._seen[id(value)] = (value, node)
        return dict(node)

    def encode(self, value, where: str):
        from calbench.methods.base import Calibrator

        if value is None or isinstance(value, (bool, str)):
            return value
        if type(value) is int:
            return value
        if type(value) is float:
            finite_or_refuse(value, where)
            return value
        if isinstance(value, np.ndarray):
            return self.array(value, where)
        if isinstance(value, np.generic):
            if value.dtype.str not in SCALAR_DTYPES:
                raise TypeError(f"cannot save {where}: numpy scalars of dtype {value.dtype} are not supported")
            if value.dtype.kind == "f":
                finite_or_refuse(value, where)
            return {"$scalar": value.dtype.str, "value": value.item()}
        if isinstance(value, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            return {"$dict": [[self.key(k, where), self.encode(v, f"{where}[{k!r}]")] for k, v in value.items()]}
        if isinstance(value, Calibrator):
            return self.calibrator(value, where)
        if type(value) in maps().values():
            self.check_map(value, where)
            return {"$map": type(value).__name__,
                    "state": {"$dict": [[k, self.encode(v, f"{where}.{k}")] for k, v in state_of(value).items()]}}
        raise TypeError(f"cannot save {where}: a {type(value).__module__}.{type(value).__qualname__} is none of "
                        "the kinds a saved calibrator holds (numbers, strings, numeric arrays, lists, tuples, "
                        "dicts, calibrators, calbench.maps1d maps); give its owner _get_state()/_set_state() "
                        "(calbench.persist)")

    def check_declared(self, obj, where: str) -> None:
        """Refuse a fitted state that its class's declaration does not allow, as loading would."""
        try:
            check_state(obj)
        except StateError as err:
            raise TypeError(f"cannot save {where}{err.field}: {err.detail}, which the _fitted_state of "
                            f"{type(obj).__name__} does not allow (calbench.fitted_state), so loading would refuse "
                            "it; fix the fit or the declaration") from err

    def check_map(self, value, where: str) -> None:
        self.check_declared(value, f"{where}.")
        settings = {name: getattr(value, name) for name in init_names(type(value))}
        try:
            check_declared_settings(type(value), settings, f"{where}.")
        except StateError as err:
            raise TypeError(f"cannot save {err.field}: {err.detail}, which the settings {type(value).__name__} "
                            "declares do not allow, so loading would refuse it") from err
        if hasattr(value, "_get_state"):
            return
        extra = set(vars(value)) - set(init_names(type(value))) - set(declared_state(type(value)))
        if extra:
            raise TypeError(f"cannot save {where}: attributes {sorted(extra)} of a {type(value).__name__} are neither "
                            "settings nor fitted attributes its class declares, so loading would refuse them")

    def key(self, key, where: str):
        if key is None or type(key) in (bool, int, str) or (type(key) is float and math.isfinite(key)):
            return key
        raise TypeError(f"cannot save {where}: dict key {key!r} is not a number or a string")

    def calibrator(self, cal, where: str) -> dict:
        name = name_of_class(cal, where)
        params = cal.get_params(deep=False)
        encoded = {k: self.default_grid(cal, f"{where}.params.grid") if name == "grid_search" and k == "grid"
                   and callable(v) else self.encode(v, f"{where}.params.{k}") for k, v in params.items()}
        state = {k: v for k, v in state_of(cal).items() if k not in params}
        for key in sorted(set(state) - set(declared_state(type(cal)))):
            raise TypeError(f"cannot save {where}: attribute {key!r} is neither a setting (an argument of "
                            f"{type(cal).__name__}.__init__) nor a fitted attribute its class declares (_fitted_state, "
                            "calbench.fitted_state), so loading would refuse it")
        self.check_declared(cal, f"{where}.state.")
        return {"$calibrator": name, "params": {"$dict": [[k, v] for k, v in encoded.items()]},
                "state": {"$dict": [[k, self.encode(v, f"{where}.state.{k}")] for k, v in state.items()]}}

    def default_grid(self, search, where: str) -> dict:
        """A grid function is saved only as "the estimator's default grid" (with the settings it holds fixed)."""
        from calbench.methods.tuning import GridWithout

        default = getattr(type(search.estimator), "default_grid", None)
        if search.grid is default:
            return {"$default_grid": None}
        if isinstance(search.grid, GridWithout) and search.grid.grid is default:
            return {"$default_grid": self.encode(search.grid.fixed, f"{where}.fixed")}
        raise TypeError(f"cannot save {where}: the grid is a function other than the method's default grid, and a "
                        "file names no functions; give the grid as a dict of lists")
