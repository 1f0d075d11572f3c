"""Saved calibrators: :func:`save` / :func:`load` in a safe, versioned file (docs/saved_calibrators.md).

A file is a safetensors file: every numpy array of the fitted calibrator is one tensor, and the
safetensors metadata holds one JSON header (key ``calbench``) describing the rest. Loading reads arrays
and JSON only; it never unpickles or evaluates anything. Classes are named in the header
(``module:QualName``) and resolved only inside the ``calbench`` package.

The fitted state is generic: a calibrator is rebuilt as ``cls(**params)`` from its ``get_params``
and gets back every other attribute of its ``__dict__`` (the fitted attributes ending in ``_``),
encoded recursively: numpy arrays and scalars, Python scalars, lists, tuples, dicts, nested calibrators
(chain steps, grid-search fold models) and plain calbench objects (binary maps, neighbour pools). A class
whose state holds something else (a scikit-learn model) defines ``_get_state()`` / ``_set_state(state)``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import numpy as np

#: Version of the file layout; bumped when the header or the encoding changes incompatibly (2: float64 arrays
#: that float32 holds exactly are stored as float32, marked ``"as": "<f8"``; a version-1 reader refuses them).
FORMAT_VERSION = 2
#: float64 arrays of at least this many entries are checked for a lossless float32 copy (logits read from a
#: float32 dump, say): half the bytes, and the loaded array is the same float64 bit for bit.
NARROW_MIN_SIZE = 4096
#: File extension of saved calibrators (the workflow's ``results/calibrators/.../seed{s}.safetensors``).
EXTENSION = ".safetensors"
INPUT_KINDS = ("logits", "probs")
_HEADER_KEY = "calbench"


class CalibratorFileError(ValueError):
    """A saved calibrator that cannot be read: truncated, tampered, foreign or from an incompatible version."""


def _class_path(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _resolve(path: str, where: str):
    """The calbench class or function named ``module:QualName`` (nothing outside the package)."""
    module_name, _, qualname = path.partition(":")
    if not (module_name == "calbench" or module_name.startswith("calbench.")) or not qualname:
        raise CalibratorFileError(f"{where}: refers to {path!r}, outside calbench; only calbench classes are loaded")
    try:
        value = importlib.import_module(module_name)
        for part in qualname.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as err:
        raise CalibratorFileError(
            f"{where}: {path!r} does not exist in calbench {_version()} ({err}); load the file with the calbench "
            "version that wrote it (see the header's calbench_version) or refit the calibrator") from err
    return value


def _version() -> str:
    import calbench

    return calbench.__version__


class _Encoder:
    """Turns a calibrator into a JSON tree plus named arrays. An array object met twice (a chain's fitted steps
    are both its parameters and its state) is stored once; float64 arrays that float32 holds exactly are stored
    as float32 (:data:`NARROW_MIN_SIZE`)."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self._seen: dict[int, tuple[np.ndarray, dict]] = {}  # id → (the array, kept alive; its node)

    def array(self, value: np.ndarray, where: str) -> dict:
        if value.dtype.kind not in "biuf":
            raise TypeError(f"cannot save {where}: arrays of dtype {value.dtype} are not supported")
        if id(value) in self._seen:
            return dict(self._seen[id(value)][1])
        key = f"a{len(self.arrays)}"
        node = {"$array": key}
        stored = np.ascontiguousarray(value)
        if stored.dtype == np.float64 and stored.size >= NARROW_MIN_SIZE:
            narrow = stored.astype(np.float32)
            if np.array_equal(narrow, stored, equal_nan=True):
                stored, node["as"] = narrow, stored.dtype.str
        self.arrays[key] = stored
        self._seen[id(value)] = (value, node)
        return dict(node)

    def encode(self, value, where: str):
        from calbench.methods.base import Calibrator

        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, float)) and type(value) in (int, float):
            return value
        if isinstance(value, np.ndarray):
            return self.array(value, where)
        if isinstance(value, np.generic):
            return {"$scalar": value.dtype.str, "value": value.item()}
        if isinstance(value, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            return {"$dict": [[self.encode(k, f"{where} key"), self.encode(v, f"{where}[{k!r}]")]
                              for k, v in value.items()]}
        if isinstance(value, type) or _is_function(value):
            return self.function(value, where)
        if isinstance(value, Calibrator):
            return self.calibrator(value, where)
        if type(value).__module__.startswith("calbench."):
            return {"$object": _class_path(type(value)), "state": self.encode(_state(value), where)}
        raise TypeError(f"cannot save {where}: {type(value).__module__}.{type(value).__qualname__} is not a "
                        "calbench object; give its class _get_state()/_set_state() (see calbench.persist)")

    def function(self, value, where: str) -> dict:
        path = _class_path(value) if hasattr(value, "__qualname__") else ""
        if "<" in path or not path.startswith("calbench"):
            raise TypeError(f"cannot save {where}: {value!r} is not a named calbench function (lambdas and "
                            "closures cannot be saved; use a module-level function or a dict grid)")
        return {"$function": path}

    def calibrator(self, cal, where: str) -> dict:
        if not type(cal).__module__.startswith("calbench."):
            raise TypeError(f"cannot save {where}: {_class_path(type(cal))} is defined outside calbench, and "
                            "loading resolves classes only inside calbench")
        params = cal.get_params(deep=False)
        state = {k: v for k, v in _state(cal).items() if k not in params}
        return {"$calibrator": _class_path(type(cal)), "params": self.encode(params, f"{where}.params"),
                "state": self.encode(state, f"{where}.state")}


def _is_function(value) -> bool:
    import types

    return isinstance(value, (types.FunctionType, types.BuiltinFunctionType))


def _state(obj) -> dict:
    return obj._get_state() if hasattr(obj, "_get_state") else dict(vars(obj))


def _set_state(obj, state: dict) -> None:
    if hasattr(obj, "_set_state"):
        obj._set_state(state)
    else:
        obj.__dict__.update(state)


def _decode(node, arrays: dict, where: str):
    if isinstance(node, list):
        return [_decode(v, arrays, f"{where}[{i}]") for i, v in enumerate(node)]
    if not isinstance(node, dict):
        return node
    if "$array" in node:
        stored = arrays[node["$array"]]
        return stored.astype(node["as"]) if "as" in node else stored
    if "$scalar" in node:
        return np.dtype(node["$scalar"]).type(node["value"])
    if "$tuple" in node:
        return tuple(_decode(v, arrays, f"{where}[{i}]") for i, v in enumerate(node["$tuple"]))
    if "$dict" in node:
        return {_decode(k, arrays, where): _decode(v, arrays, f"{where}[{k!r}]") for k, v in node["$dict"]}
    if "$function" in node:
        return _resolve(node["$function"], where)
    if "$object" in node:
        cls = _resolve(node["$object"], where)
        obj = cls.__new__(cls)
        _set_state(obj, _decode(node["state"], arrays, where))
        return obj
    if "$calibrator" in node:
        from calbench.methods.base import Calibrator

        cls = _resolve(node["$calibrator"], where)
        if not (isinstance(cls, type) and issubclass(cls, Calibrator)):
            raise CalibratorFileError(f"{where}: {node['$calibrator']!r} is not a calibrator class")
        params = _decode(node["params"], arrays, f"{where}.params")
        try:
            cal = cls(**params)
        except TypeError as err:
            raise CalibratorFileError(
                f"{where}: calbench {_version()}'s {cls.__name__} does not take the saved settings "
                f"{sorted(params)} ({err}); load the file with the calbench version that wrote it or refit") from err
        _set_state(cal, _decode(node["state"], arrays, f"{where}.state"))
        return cal
    raise CalibratorFileError(f"{where}: unknown node {sorted(node)} in the header")


def _checksum(tree, arrays: dict) -> str:
    """SHA-256 of the encoded tree and of every array's name, dtype, shape and bytes."""
    digest = hashlib.sha256(json.dumps(tree, sort_keys=True).encode())
    for key in sorted(arrays):
        arr = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}:{arr.dtype.str}:{arr.shape}".encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()


def method_name(cal) -> str:
    """Registered name of a calibrator, ``a+b`` for a chain (the name ``make`` takes)."""
    from calbench.methods.base import method_label

    return method_label(cal)


def chosen_settings(cal) -> dict:
    """The grid point a cross-validated calibrator chose (``best_params_``); for a chain, per stage."""
    steps = getattr(cal, "steps", None)
    if steps is not None:
        return {f"{i}:{method_name(step)}": chosen for i, step in enumerate(steps)
                if (chosen := chosen_settings(step))}
    return dict(getattr(cal, "best_params_", None) or {})


def save(cal, path, *, input_kind: str = "logits") -> Path:
    """Write fitted calibrator ``cal`` to ``path`` (atomically); ``input_kind`` says what it was fitted on:
    ``"logits"`` or ``"probs"`` (probabilities, as ``fit --probs``); ``load``/``apply`` check new inputs against it."""
    from safetensors.numpy import save_file

    from calbench.atomic import atomic_path

    if input_kind not in INPUT_KINDS:
        raise ValueError(f"input_kind: expected one of {INPUT_KINDS}, got {input_kind!r}")
    if not hasattr(cal, "num_classes_"):
        raise ValueError(f"{type(cal).__name__} is not fitted; call fit(scores, y) before saving it")
    encoder = _Encoder()
    tree = encoder.encode(cal, "calibrator")
    summary = {}
    try:
        summary = json.loads(json.dumps(cal.fitted_summary(), default=float))
    except (TypeError, ValueError, AttributeError):
        pass
    header = {
        "format": "calbench-calibrator", "format_version": FORMAT_VERSION, "calbench_version": _version(),
        "method": method_name(cal), "params": encoder.encode(cal.get_params(deep=False), "params"),
        "num_classes": int(cal.num_classes_), "input_kind": input_kind, "needs": sorted(cal.needs),
        "chosen": json.loads(json.dumps(chosen_settings(cal), default=float)),
        "fitted_summary": summary, "calibrator": tree, "checksum": _checksum(tree, encoder.arrays),
    }
    path = Path(path)
    with atomic_path(path) as tmp:
        save_file(encoder.arrays, str(tmp), metadata={_HEADER_KEY: json.dumps(header)})
    return path


def read_header(path) -> dict:
    """The JSON header of a saved calibrator (no arrays); raises :class:`CalibratorFileError` on a bad file."""
    return _open(path)[0]


def _open(path) -> tuple[dict, dict]:
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        from calbench.data.where import shown

        raise FileNotFoundError(f"{shown(path)}: no such calibrator file")
    try:
        with safe_open(str(path), framework="np") as f:
            metadata = f.metadata() or {}
            arrays = {key: f.get_tensor(key) for key in f.keys()}
    except (SafetensorError, OSError, ValueError) as err:
        raise CalibratorFileError(f"{path}: not a readable calibrator file (truncated or corrupted?): {err}; "
                                  "save it again with calbench.save or `calbench fit`") from err
    if _HEADER_KEY not in metadata:
        raise CalibratorFileError(f"{path}: a safetensors file without a calbench header; not a saved calibrator")
    try:
        header = json.loads(metadata[_HEADER_KEY])
    except json.JSONDecodeError as err:
        raise CalibratorFileError(f"{path}: the calbench header is not valid JSON ({err}); the file is "
                                  "damaged") from err
    version = header.get("format_version")
    if header.get("format") != "calbench-calibrator" or not isinstance(version, int):
        raise CalibratorFileError(f"{path}: header is not a calbench calibrator header")
    if version > FORMAT_VERSION:
        raise CalibratorFileError(
            f"{path}: written in calibrator format {version} by calbench {header.get('calbench_version')}; this "
            f"calbench {_version()} reads format <= {FORMAT_VERSION}: upgrade calbench (pip install -U calbench)")
    if _checksum(header.get("calibrator"), arrays) != header.get("checksum"):
        raise CalibratorFileError(f"{path}: checksum mismatch: the arrays or the header were modified after saving; "
                                  "refit and save the calibrator again")
    return header, arrays


def load(path):
    """Read a calibrator written by :func:`save`; it has ``input_kind_`` set from the header."""
    from calbench.methods.registry import split_chain

    header, arrays = _open(path)
    try:
        split_chain(header["method"])
    except ValueError as err:
        raise CalibratorFileError(f"{path}: {err}; this calbench {_version()} does not know the method "
                                  f"(file written by calbench {header.get('calbench_version')})") from err
    cal = _decode(header["calibrator"], arrays, str(path))
    cal.input_kind_ = header["input_kind"]
    return cal
