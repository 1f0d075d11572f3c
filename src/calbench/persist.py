"""Saved calibrators: :func:`save` / :func:`load` in a versioned file that is data only (docs/saved_calibrators.md).

A file is a safetensors file: every numpy array of the fitted calibrator is one tensor, and the safetensors
metadata holds one JSON header (key ``calbench``) describing the rest. Loading reads tensors of numeric dtypes
and JSON values; it never unpickles, evaluates or imports anything a file names. The only classes a file can
build are the registered calibrators (named by their registered name), the two compositions (``chain``,
``grid_search``) and the one-dimensional maps defined in :mod:`calbench.maps1d`; no name in a file is resolved to a
function or to any other class.

A class declares its fitted state once (``_fitted_state``, :mod:`calbench.fitted_state`: the kind, dtype and shape
of every attribute its methods fit): a calibrator is rebuilt as ``cls(**params)`` from its ``get_params`` and gets
back those fitted attributes, encoded recursively: numpy arrays and scalars, Python scalars, lists, tuples, dicts,
nested calibrators and 1-D maps. Loading checks every value's kind (finite numbers, numeric arrays no larger than
the file), every setting against the class's declared constraints, every fitted attribute against the class's
declaration, and that every fitted calibrator of the file computes probabilities of its number of classes
(:func:`_probe`). A class whose state holds something else defines ``_get_state()`` /
``_set_state(state)`` (LECE rebuilds its neighbour pool from the rows that define it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np

from calbench.fitted_state import StateError, check_state, declared_state
from calbench.version import __version__

#: Version of the file layout; bumped when the header or the encoding changes incompatibly (3: classes by their
#: registered name only, every header field under the checksum; earlier formats named classes and functions by
#: import path and are refused).
FORMAT_VERSION = 3
#: float64 arrays of at least this many entries are checked for a lossless float32 copy (logits read from a
#: float32 dump, say): half the bytes, and the loaded array is the same float64 bit for bit.
NARROW_MIN_SIZE = 4096
#: File extension of saved calibrators (the workflow's ``results/calibrators/.../seed{s}.safetensors``).
EXTENSION = ".safetensors"
INPUT_KINDS = ("logits", "probs")
#: Largest number of classes (and embedding width) a file may state: it sizes the probe's input, so a damaged
#: count cannot allocate beyond it (no classifier comes near: ImageNet-21k has 21,843 classes).
MAX_CLASSES = 2**20
#: Deepest nesting of the encoded calibrator (ts+lece and ts+vs+ms+lece nest 25 and 28 JSON levels).
MAX_DEPTH = 200
#: Rows of the probe input each loaded calibrator predicts on (:func:`_probe`), and the tolerance on its row sums.
PROBE_ROWS = 4
PROBE_SUM_TOL = 1e-6
#: Tensor dtypes (safetensors' names) a file may hold: booleans, integers and floats of at most 8 bytes.
TENSOR_DTYPES = ("BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "F16", "F32", "F64")
#: dtypes of numpy scalars in the encoded state (``$scalar``).
SCALAR_DTYPES = tuple(np.dtype(code).str for code in ("?", "u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8",
                                                      "f2", "f4", "f8"))
_HEADER_KEY = "calbench"
_ATTRIBUTE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: Header fields computed from the calibrator: written by :func:`save`, recomputed and compared by :func:`load`.
DERIVED_FIELDS = ("method", "num_classes", "needs", "chosen", "fitted_summary")


class CalibratorFileError(ValueError):
    """A saved calibrator that cannot be read: truncated, damaged, edited, foreign or from another format version."""


# -- the classes a file can build ------------------------------------------------------------------------------
def _compositions() -> dict[str, type]:
    from calbench.methods.chain import Chain
    from calbench.methods.tuning import GridSearch

    return {"chain": Chain, "grid_search": GridSearch}


@functools.cache
def _maps() -> dict[str, type]:
    """The 1-D map classes: every public class defined in a module of :mod:`calbench.maps1d`, by class name (the
    package's own module list, never a name from a file)."""
    import importlib
    import pkgutil

    import calbench.maps1d as maps1d

    maps = {}
    for info in pkgutil.iter_modules(maps1d.__path__):
        module = importlib.import_module(f"calbench.maps1d.{info.name}")
        maps.update({name: value for name, value in vars(module).items() if isinstance(value, type)
                     and value.__module__ == module.__name__ and not name.startswith("_")})
    return maps


def _name_of_class(cal, where: str) -> str:
    """The name a file gives calibrator ``cal``'s class: its registered name, ``chain`` or ``grid_search``."""
    from calbench.methods.registry import available, method_class

    for name, cls in _compositions().items():
        if type(cal) is cls:
            return name
    name = getattr(type(cal), "method_name", None)
    if name in available() and method_class(name) is type(cal):
        return name
    raise TypeError(f"cannot save {where}: {type(cal).__module__}.{type(cal).__qualname__} is not a registered "
                    "calibrator class, and loading builds only those (calbench.methods.register), chains and grid "
                    "searches; register the class to save it")


def _class_of_name(name, where: str) -> type:
    from calbench.methods.registry import available, method_class

    compositions = _compositions()
    if name in compositions:
        return compositions[name]
    if isinstance(name, str) and name in available():
        return method_class(name)
    raise CalibratorFileError(f"{where}: unknown method {str(name)[:80]!r}: calbench {__version__} registers "
                              f"{', '.join(available())} (plus chain and grid_search); a file of a newer calbench "
                              "needs that version, otherwise refit the calibrator")


# -- saving ----------------------------------------------------------------------------------------------------
def _finite(value, where: str) -> None:
    if not np.all(np.isfinite(value)):
        raise ValueError(f"cannot save {where}: it holds NaN or infinite values, so the fit failed or diverged; "
                         "check the scores and refit before saving")


def _state(obj) -> dict:
    """What is saved of ``obj`` besides its settings: ``_get_state()`` where the class defines it, else its
    attributes (a loaded calibrator's ``input_kind_`` belongs to the file's header, not to its state)."""
    state = obj._get_state() if hasattr(obj, "_get_state") else dict(vars(obj))
    state.pop("input_kind_", None)
    return state


class _Encoder:
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
            _finite(value, where)
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
            _finite(value, where)
            return value
        if isinstance(value, np.ndarray):
            return self.array(value, where)
        if isinstance(value, np.generic):
            if value.dtype.str not in SCALAR_DTYPES:
                raise TypeError(f"cannot save {where}: numpy scalars of dtype {value.dtype} are not supported")
            if value.dtype.kind == "f":
                _finite(value, where)
            return {"$scalar": value.dtype.str, "value": value.item()}
        if isinstance(value, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            return {"$dict": [[self.key(k, where), self.encode(v, f"{where}[{k!r}]")] for k, v in value.items()]}
        if isinstance(value, Calibrator):
            return self.calibrator(value, where)
        if type(value) in _maps().values():
            self.check_map(value, where)
            return {"$map": type(value).__name__,
                    "state": {"$dict": [[k, self.encode(v, f"{where}.{k}")] for k, v in _state(value).items()]}}
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
        if hasattr(value, "_get_state"):
            return
        extra = set(vars(value)) - set(_init_names(type(value))) - set(declared_state(type(value)))
        if extra:
            raise TypeError(f"cannot save {where}: attributes {sorted(extra)} of a {type(value).__name__} are neither "
                            "settings nor fitted attributes its class declares, so loading would refuse them")

    def key(self, key, where: str):
        if key is None or type(key) in (bool, int, str) or (type(key) is float and math.isfinite(key)):
            return key
        raise TypeError(f"cannot save {where}: dict key {key!r} is not a number or a string")

    def calibrator(self, cal, where: str) -> dict:
        name = _name_of_class(cal, where)
        params = cal.get_params(deep=False)
        encoded = {k: self.default_grid(cal, f"{where}.params.grid") if name == "grid_search" and k == "grid"
                   and callable(v) else self.encode(v, f"{where}.params.{k}") for k, v in params.items()}
        state = {k: v for k, v in _state(cal).items() if k not in params}
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


def _plain(value):
    """``value`` as the JSON it is written as (numpy numbers as floats)."""
    return json.loads(json.dumps(value, default=float))


def _derived(cal) -> dict:
    """The header fields computed from a calibrator (:data:`DERIVED_FIELDS`)."""
    try:
        summary = _plain(cal.fitted_summary())
    except (TypeError, ValueError, AttributeError):
        summary = {}
    return {"method": method_name(cal), "num_classes": int(cal.num_classes_), "needs": sorted(cal.needs),
            "chosen": _plain(chosen_settings(cal)), "fitted_summary": summary}


def _checksum(header: dict, arrays: dict) -> str:
    """SHA-256 of every header field but ``checksum`` (canonical JSON) and of every array's name, dtype, shape and
    bytes: it detects a damaged or partly edited file, not who wrote it (anyone can recompute it)."""
    body = {k: v for k, v in header.items() if k != "checksum"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode())
    for key in sorted(arrays):
        arr = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}:{arr.dtype.str}:{arr.shape}".encode())
        digest.update(memoryview(arr.reshape(-1).view(np.uint8)))
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
    ``"logits"`` or ``"probs"`` (probabilities, as ``fit --probs``); ``load``/``apply`` check new inputs against it.
    Refuses (``TypeError``/``ValueError``, nothing written) a state with NaN or infinite values and anything that
    loading would not build."""
    from safetensors.numpy import save_file

    from calbench.atomic import atomic_path
    from calbench.methods.base import Calibrator

    if input_kind not in INPUT_KINDS:
        raise ValueError(f"input_kind: expected one of {INPUT_KINDS}, got {input_kind!r}")
    if not isinstance(cal, Calibrator):
        raise TypeError(f"expected a fitted calbench calibrator, got a {type(cal).__name__}")
    if not hasattr(cal, "num_classes_"):
        raise ValueError(f"{type(cal).__name__} is not fitted; call fit(scores, y) before saving it")
    encoder = _Encoder()
    header = {"format": "calbench-calibrator", "format_version": FORMAT_VERSION, "calbench_version": __version__,
              "input_kind": input_kind, **_derived(cal), "calibrator": encoder.encode(cal, "calibrator")}
    header["checksum"] = _checksum(header, encoder.arrays)
    path = Path(path)
    with atomic_path(path) as tmp:
        save_file(encoder.arrays, str(tmp), metadata={_HEADER_KEY: json.dumps(header)})
    return path


# -- loading ---------------------------------------------------------------------------------------------------
def read_header(path) -> dict:
    """The JSON header of a saved calibrator, its checksum verified (no calibrator built: :func:`load` also checks
    the derived fields against the state); raises :class:`CalibratorFileError` on a bad file."""
    return _open(path)[0]


def _tensors(f, path: Path, size: int) -> dict:
    """The file's tensors, each dtype and size checked before it is read."""
    arrays = {}
    for key in f.keys():
        view = f.get_slice(key)
        dtype, shape = view.get_dtype(), view.get_shape()
        if dtype not in TENSOR_DTYPES:
            raise CalibratorFileError(f"{path}: tensor {key[:80]!r}: dtype {dtype[:40]} is not one a calibrator "
                                      f"holds ({', '.join(TENSOR_DTYPES)}); not a calbench calibrator file")
        if math.prod(shape) > size:
            raise CalibratorFileError(f"{path}: tensor {key[:80]!r}: shape {shape} is larger than the file; the "
                                      "file is damaged")
        arrays[key] = f.get_tensor(key)
    return arrays


def _open(path) -> tuple[dict, dict]:
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        from calbench.data.where import shown

        raise FileNotFoundError(f"{shown(path)}: no such calibrator file")
    try:
        with safe_open(str(path), framework="np") as f:
            metadata = f.metadata() or {}
            arrays = _tensors(f, path, path.stat().st_size)
    except (SafetensorError, OSError, ValueError, TypeError) as err:
        if isinstance(err, CalibratorFileError):
            raise
        raise CalibratorFileError(f"{path}: not a readable calibrator file (truncated or damaged?): {err}; save it "
                                  "again with calbench.save or `calbench fit`") from err
    if _HEADER_KEY not in metadata:
        raise CalibratorFileError(f"{path}: a safetensors file without a calbench header; not a saved calibrator")
    try:
        header = json.loads(metadata[_HEADER_KEY])
    except (ValueError, RecursionError) as err:
        raise CalibratorFileError(f"{path}: header: not valid JSON ({str(err)[:200]}); the file is damaged") from err
    if not isinstance(header, dict) or header.get("format") != "calbench-calibrator":
        raise CalibratorFileError(f"{path}: header field 'format': not a calbench calibrator header")
    version = header.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        newer = type(version) is int and version > FORMAT_VERSION
        raise CalibratorFileError(
            f"{path}: header field 'format_version': {str(version)[:20]}, written by calbench "
            f"{str(header.get('calbench_version'))[:40]}; this calbench {__version__} reads format {FORMAT_VERSION} "
            "only: " + ("upgrade calbench (pip install -U calbench)" if newer else
                        "earlier formats named classes and functions by import path, which loading no longer "
                        "resolves; refit the calibrator and save it again"))
    if _checksum(header, arrays) != header.get("checksum"):
        raise CalibratorFileError(f"{path}: header field 'checksum': does not match the header and arrays, which "
                                  "were damaged or edited after saving; refit and save the calibrator again")
    return header, arrays


class _DefaultGrid:
    """A ``$default_grid`` node: the grid search's estimator's own default grid, with ``fixed`` held fixed."""

    def __init__(self, fixed):
        self.fixed = fixed


class _Decoder:
    """Builds a calibrator from an encoded tree and the file's arrays, checking every value's kind."""

    def __init__(self, arrays: dict, path: Path):
        self.arrays, self.path = arrays, path
        self.unread = set(arrays)  # every tensor must be named by the tree

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
            return _DefaultGrid(self.value(node["$default_grid"], where, depth + 1))
        raise self.error(where, f"unknown node with keys {[str(t)[:40] for t in tags[:5]]}")

    def array(self, node: dict, where: str) -> np.ndarray:
        key = node["$array"]
        if not isinstance(key, str) or key not in self.arrays:
            raise self.error(where, f"names tensor {str(key)[:80]!r}, which the file does not hold")
        stored = self.arrays[key]
        self.unread.discard(key)
        if "as" in node:
            if node["as"] != "<f8" or stored.dtype != np.float32:
                raise self.error(where, f"'as' {str(node['as'])[:40]!r} on a {stored.dtype} tensor (only float32 "
                                 "tensors widen, to '<f8')")
            stored = stored.astype(np.float64)
        if stored.dtype.kind == "f" and not np.all(np.isfinite(stored)):
            raise self.error(where, "NaN or infinite values in a fitted array")
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

        cls = _class_of_name(node["$calibrator"], f"{self.path}: {where}")
        params = self.attributes(node["params"], f"{where}.params", depth, _ATTRIBUTE_NAME, object)
        expected = cls._get_param_names()
        if sorted(params) != expected:
            raise self.error(f"{where}.params", f"{cls.__name__} takes the settings {expected}, the file gives "
                             f"{sorted(params)}")
        for key, value in params.items():
            if isinstance(value, _DefaultGrid):
                params[key] = self.default_grid(value, params, f"{where}.params.{key}", cls is GridSearch
                                                and key == "grid")
        try:
            check_settings(cls._parameter_constraints, params, prefix=f"{where}.params.")
            if cls is GridSearch:
                _check_grid(params["estimator"], params["grid"], f"{where}.params.grid.")
        except InvalidSetting as err:
            raise self.error(err.key, f"{err.detail} (the constraint {cls.__name__} declares)") from err
        try:
            cal = cls(**params)
            state = self.attributes(node["state"], f"{where}.state", depth, set(declared_state(cls)), cls)
            for key in ("num_classes_", "embedding_dim_"):
                count = state.get(key, 1)
                if type(count) is not int or not 1 <= count <= MAX_CLASSES:
                    raise self.error(f"{where}.state.{key}", f"{str(count)[:40]} is not a count in [1, {MAX_CLASSES}]")
            if hasattr(cal, "_set_state"):
                cal._set_state(state)
            else:
                cal.__dict__.update(state)
            self.check_state(cal, f"{where}.state.")
            if hasattr(cal, "num_classes_"):
                _probe(cal)
        except CalibratorFileError:
            raise
        except Exception as err:  # a trust boundary: whatever the state makes the class do is the file's fault
            raise self.error(where, f"the saved {cls.__name__} cannot be built or does not compute "
                             f"({type(err).__name__}: {str(err)[:300]})") from err
        return cal

    def check_state(self, obj, prefix: str) -> None:
        """Every fitted attribute of a built calibrator or map against its class's declaration
        (:func:`calbench.fitted_state.check_state`), before it first predicts."""
        try:
            check_state(obj)
        except StateError as err:
            raise self.error(prefix + err.field, f"{err.detail} (the fitted state {type(obj).__name__} "
                             "declares)") from err

    def default_grid(self, marker: _DefaultGrid, params: dict, where: str, allowed: bool):
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
        maps = _maps()
        name = node["$map"]
        if name not in maps:
            raise self.error(where, f"{str(name)[:80]!r} is not a map of calbench.maps1d ({', '.join(maps)})")
        cls = maps[name]
        declared = (_ATTRIBUTE_NAME if hasattr(cls, "_set_state") else
                    frozenset(_init_names(cls)) | set(declared_state(cls)))
        state = self.attributes(node["state"], where, depth, declared, cls)
        try:
            if hasattr(cls, "_set_state"):
                obj = cls.__new__(cls)
                obj._set_state(state)
            else:
                settings = _init_names(cls)
                obj = cls(**{k: state[k] for k in settings if k in state})
                obj.__dict__.update({k: v for k, v in state.items() if k not in settings})
            self.check_state(obj, f"{where}.")
            return obj
        except CalibratorFileError:
            raise
        except Exception as err:
            raise self.error(where, f"the saved {name} cannot be built ({type(err).__name__}: "
                             f"{str(err)[:300]})") from err


def _check_grid(estimator, grid, prefix: str) -> None:
    """A saved grid's values (or the settings a default grid holds fixed) checked against the estimator's declared
    constraints, as :func:`~calbench.methods.make` checks a grid."""
    from calbench.methods.constraints import check_settings
    from calbench.methods.tuning import GridWithout

    constraints = getattr(type(estimator), "_parameter_constraints", {})
    values = grid.fixed if isinstance(grid, GridWithout) else grid if isinstance(grid, dict) else {}
    for key, options in values.items():
        for value in options if isinstance(options, list) and not isinstance(grid, GridWithout) else [options]:
            check_settings(constraints, {key: value}, prefix=prefix)


def _init_names(cls) -> list[str]:
    """The settings of a map class: the keyword arguments of its ``__init__`` (none for ``object``'s)."""
    import inspect

    if cls.__init__ is object.__init__:
        return []
    return [p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _probe(cal) -> None:
    """Check that a loaded calibrator computes: its probabilities on a fixed input of its number of classes (and
    embedding width) are finite, non-negative rows summing to 1. A state of the wrong shape or kind fails here,
    at loading, rather than in the user's first prediction."""
    from calbench.scores import Scores

    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3.0, size=(PROBE_ROWS, cal.num_classes_))
    embeddings = None
    if "embeddings" in cal.needs:
        if not hasattr(cal, "embedding_dim_"):
            raise ValueError("it reads embeddings but its state gives no embedding_dim_")
        embeddings = rng.normal(size=(PROBE_ROWS, cal.embedding_dim_))
    probs = np.asarray(cal.predict_proba(Scores(logits, embeddings)))
    if probs.shape != logits.shape or not np.all(np.isfinite(probs)) or np.any(probs < 0) \
            or np.max(np.abs(probs.sum(axis=1) - 1.0)) > PROBE_SUM_TOL:
        raise ValueError(f"its output on {PROBE_ROWS} rows of {cal.num_classes_} classes is not a matrix of "
                         f"probabilities of that shape (shape {probs.shape})")


def load(path):
    """Read a calibrator written by :func:`save`; it has ``input_kind_`` set from the header. Builds only registered
    classes from data (docs/saved_calibrators.md); any damaged, edited or foreign file raises
    :class:`CalibratorFileError` naming the file and the field."""
    header, arrays = _open(path)
    path = Path(path)
    input_kind = header.get("input_kind")
    if input_kind not in INPUT_KINDS:
        raise CalibratorFileError(f"{path}: header field 'input_kind': {str(input_kind)[:40]!r} is not one of "
                                  f"{INPUT_KINDS}; the file is damaged")
    tree = header.get("calibrator")
    if not isinstance(tree, dict) or "$calibrator" not in tree:
        raise CalibratorFileError(f"{path}: header field 'calibrator': not an encoded calibrator")
    decoder = _Decoder(arrays, path)
    cal = decoder.value(tree, "calibrator")
    if decoder.unread:
        raise CalibratorFileError(f"{path}: tensors {sorted(decoder.unread)[:5]}: named nowhere in the header; the "
                                  "file was not written by calbench.save")
    if not hasattr(cal, "num_classes_"):
        raise CalibratorFileError(f"{path}: calibrator.state.num_classes_: missing, so the calibrator is not "
                                  "fitted; fit it before saving")
    try:
        derived = _derived(cal)
    except Exception as err:  # the state of a file, not the user's input
        raise CalibratorFileError(f"{path}: calibrator.state: the saved calibrator cannot report its header fields "
                                  f"({type(err).__name__}: {str(err)[:200]}); the file is damaged") from err
    for field in DERIVED_FIELDS:
        if json.dumps(header.get(field), sort_keys=True) != json.dumps(derived[field], sort_keys=True):
            raise CalibratorFileError(
                f"{path}: header field {field!r}: says {str(header.get(field))[:120]}, but the saved calibrator gives "
                f"{str(derived[field])[:120]}; the header was edited after saving: refit and save it again")
    cal.input_kind_ = input_kind
    return cal
