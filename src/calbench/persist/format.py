"""What saving and loading share: the layout's constants, the error, the checksum and the classes a file can name."""

from __future__ import annotations

import functools
import hashlib
import json

import numpy as np

from calbench.version import __version__

#: Version of the file layout; bumped when the header or the encoding changes incompatibly (3: classes by their
#: registered name only, every header field under the checksum; earlier formats named classes and functions by
#: import path and are refused).
FORMAT_VERSION = 3
#: File extension of saved calibrators (the workflow's ``results/calibrators/.../seed{s}.safetensors``).
EXTENSION = ".safetensors"
INPUT_KINDS = ("logits", "probs")
#: Largest number of classes (and embedding width) a file may state; the decode budget bounds it further by the
#: file's size (:mod:`calbench.persist.budget`: the probe's input is charged).
MAX_CLASSES = 2**20
#: Deepest nesting of the encoded calibrator (ts+lece and ts+vs+ms+lece nest 25 and 28 JSON levels).
MAX_DEPTH = 200
#: Tensor dtypes (safetensors' names) a file may hold: booleans, integers and floats of at most 8 bytes.
TENSOR_DTYPES = ("BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "F16", "F32", "F64")
#: dtypes of numpy scalars in the encoded state (``$scalar``).
SCALAR_DTYPES = tuple(np.dtype(code).str for code in ("?", "u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8",
                                                      "f2", "f4", "f8"))
#: The safetensors metadata key of the JSON header.
HEADER_KEY = "calbench"
#: Header fields computed from the calibrator: written by ``save``, recomputed and compared by ``load``.
DERIVED_FIELDS = ("method", "num_classes", "needs", "chosen", "fitted_summary")


class CalibratorFileError(ValueError):
    """A saved calibrator that cannot be read: truncated, damaged, edited, foreign or from another format version."""


def compositions() -> dict[str, type]:
    """The classes a file names besides the registered calibrators: ``chain`` and ``grid_search``."""
    from calbench.methods.chain import Chain
    from calbench.methods.tuning import GridSearch

    return {"chain": Chain, "grid_search": GridSearch}


@functools.cache
def maps() -> dict[str, type]:
    """The 1-D map classes: every public class defined in a module of :mod:`calbench.maps1d`, by class name (the
    package's own module list, never a name from a file)."""
    import importlib
    import pkgutil

    import calbench.maps1d as maps1d

    found = {}
    for info in pkgutil.iter_modules(maps1d.__path__):
        module = importlib.import_module(f"calbench.maps1d.{info.name}")
        found.update({name: value for name, value in vars(module).items() if isinstance(value, type)
                      and value.__module__ == module.__name__ and not name.startswith("_")})
    return found


def name_of_class(cal, where: str) -> str:
    """The name a file gives calibrator ``cal``'s class: its registered name, ``chain`` or ``grid_search``."""
    from calbench.methods.registry import available, method_class

    for name, cls in compositions().items():
        if type(cal) is cls:
            return name
    name = getattr(type(cal), "method_name", None)
    if name in available() and method_class(name) is type(cal):
        return name
    raise TypeError(f"cannot save {where}: {type(cal).__module__}.{type(cal).__qualname__} is not a registered "
                    "calibrator class, and loading builds only those (calbench.methods.register), chains and grid "
                    "searches; register the class to save it")


def class_of_name(name, where: str) -> type:
    """The class a file's name stands for (:func:`name_of_class`'s inverse); anything else is refused."""
    from calbench.methods.registry import available, method_class

    found = compositions()
    if name in found:
        return found[name]
    if isinstance(name, str) and name in available():
        return method_class(name)
    raise CalibratorFileError(f"{where}: unknown method {str(name)[:80]!r}: calbench {__version__} registers "
                              f"{', '.join(available())} (plus chain and grid_search); a file of a newer calbench "
                              "needs that version, otherwise refit the calibrator")


def init_names(cls) -> list[str]:
    """The settings of a map class: the keyword arguments of its ``__init__`` (none for ``object``'s)."""
    import inspect

    if cls.__init__ is object.__init__:
        return []
    return [p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def checksum(header: dict, arrays: dict) -> str:
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


def plain(value):
    """``value`` as the JSON it is written as (numpy numbers as floats)."""
    return json.loads(json.dumps(value, default=float))


def derived(cal) -> dict:
    """The header fields computed from a calibrator (:data:`DERIVED_FIELDS`)."""
    try:
        summary = plain(cal.fitted_summary())
    except (TypeError, ValueError, AttributeError):
        summary = {}
    return {"method": method_name(cal), "num_classes": int(cal.num_classes_), "needs": sorted(cal.needs),
            "chosen": plain(chosen_settings(cal)), "fitted_summary": summary}


def state_of(obj) -> dict:
    """What is saved of ``obj`` besides its settings: ``_get_state()`` where the class defines it, else its
    attributes (a loaded calibrator's ``input_kind_`` and ``loaded_from_`` belong to the file, not to its state)."""
    state = obj._get_state() if hasattr(obj, "_get_state") else dict(vars(obj))
    state.pop("input_kind_", None)
    state.pop("loaded_from_", None)
    return state
