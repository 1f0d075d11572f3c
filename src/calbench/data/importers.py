"""Read classifier outputs from files: ``.npy``, ``.npz`` and the NN_calibration pickle.

Layouts (see config/README.md):

* ``npy``: one file per field, ``files: {logits: a.npy, labels: b.npy}`` (a pool) or per split
  ``files: {cal: {logits: .., labels: ..}, test: {...}}``; optional ``embeddings``.
* ``npz``: ``files: {archive: x.npz}`` with arrays ``logits``/``labels`` (a pool) or
  ``{split}_{field}`` (``cal_logits``, ``test_labels``, ``train_embeddings``, ...).
* ``pickle``: ``files: {archive: x.p}`` holding ``((logits_val, y_val), (logits_test, y_test))``, the
  format of github.com/markus93/NN_calibration used by the LECE and Dirichlet papers; val → cal.

Declared probabilities (``scores: probs``) become log-probabilities, floored at
:data:`calbench.scores.PROB_FLOOR` (the smallest positive float64). A declaration that does not fit
the data (rows of "probabilities" that do not sum to one, or "logits" that all do) is an error, not a guess.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from calbench.data.store import validate_split
from calbench.scores import check_logits, log_of_probs, looks_like_probs

SPLITS = ("train", "cal", "test", "all")


def _load_npy(path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as err:
        raise ValueError(f"{path}: cannot read as .npy ({err})") from None


def convert_scores(logits: np.ndarray, declared: str, where: str, fix: str | None = None) -> np.ndarray:
    """Turn declared ``probs`` into log-probabilities; check that the declaration fits the data. ``fix``
    replaces the advice that ends a mismatch message (default: the config key to change)."""
    arr = check_logits(logits, name=where)  # numeric, 2-D, finite
    if declared == "probs":
        if not looks_like_probs(arr):
            raise ValueError(f"{where}: declared `scores: probs` but rows are not probability vectors "
                             "(values outside [0, 1] or rows not summing to 1); "
                             + (fix or "declare `scores: logits`"))
        return log_of_probs(arr)
    if declared == "logits":
        if arr.shape[0] > 1 and looks_like_probs(arr):
            raise ValueError(f"{where}: declared `scores: logits` but every row is a probability vector; "
                             + (fix or "declare `scores: probs` so they are converted to log-probabilities"))
        return arr
    raise ValueError(f"{where}: scores must be 'logits' or 'probs', got {declared!r}")


def _from_npy(files: dict) -> dict[str, dict]:
    if "logits" in files:
        return {"all": {field: _load_npy(path) for field, path in files.items()}}
    return {split: {field: _load_npy(path) for field, path in fields.items()} for split, fields in files.items()}


def _from_npz(archive) -> dict[str, dict]:
    try:
        data = dict(np.load(archive, allow_pickle=False))
    except (ValueError, OSError) as err:
        raise ValueError(f"{archive}: cannot read as .npz ({err})") from None
    if "logits" in data:
        return {"all": data}
    groups: dict[str, dict] = {}
    for key, arr in data.items():
        split, _, field = key.partition("_")
        if split not in SPLITS or not field:
            raise ValueError(f"{archive}: array {key!r} is not named {{split}}_{{field}} with split in {SPLITS}")
        groups.setdefault(split, {})[field] = arr
    return groups


#: The only globals an NN_calibration pickle may name: numpy's array and scalar reconstructors and dtypes (the
#: module paths of numpy 1 and 2; ``_frombuffer`` for protocol 5) and the string-to-bytes codec that protocol-2
#: pickles store array data with. Everything else (functions, classes, ``os.system``) is refused unresolved.
PICKLE_GLOBALS = frozenset({(f"numpy{core}.{module}", name) for core in (".core", "._core")
                            for module, name in (("multiarray", "_reconstruct"), ("multiarray", "scalar"),
                                                 ("numeric", "_frombuffer"))}
                           | {("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")})


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """An unpickler that builds only numpy arrays, tuples, lists, numbers and strings: loading runs no code."""

    def find_class(self, module: str, name: str):
        if (module, name) not in PICKLE_GLOBALS:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which is not a numpy array part (only arrays, "
                                         "tuples, lists and numbers are read: nothing in a data file may run code)")
        return super().find_class(module, name)


def _from_pickle(archive) -> dict[str, dict]:
    try:
        with open(archive, "rb") as fh:
            (logits_val, y_val), (logits_test, y_test) = _ArraysOnlyUnpickler(fh, encoding="latin1").load()
    except (pickle.UnpicklingError, ValueError, TypeError, EOFError) as err:
        raise ValueError(f"{archive}: expected the NN_calibration pickle ((logits_val, y_val), (logits_test, y_test)) "
                         f"({type(err).__name__}: {err})") from None
    squeeze = lambda y: np.asarray(y).reshape(-1)  # noqa: E731  (some pickles store labels as [N, 1])
    return {"cal": {"logits": logits_val, "labels": squeeze(y_val)},
            "test": {"logits": logits_test, "labels": squeeze(y_test)}}


def read_files(fmt: str, files: dict, scores: str, origin: str) -> dict[str, dict]:
    """Groups ``{split: {field: array}}`` from local ``files`` in format ``fmt``; raises the first problem.

    ``origin`` names the config entry in error messages.
    """
    groups, problems = inspect_files(fmt, files, scores, origin)
    if problems:
        raise problems[0]
    return groups


def inspect_files(fmt: str, files: dict, scores: str, origin: str) -> tuple[dict[str, dict], list[Exception]]:
    """The checked groups of :func:`read_files` and every problem found (one per missing file or bad
    split; a split with a problem is left out of the groups)."""
    readers = {"npy": lambda: _from_npy(files), "npz": lambda: _from_npz(files["archive"]),
               "pickle": lambda: _from_pickle(files["archive"])}
    if fmt not in readers:
        return {}, [ValueError(f"{origin}.format: expected one of {sorted(readers)}, got {fmt!r}")]
    if fmt in ("npz", "pickle") and "archive" not in files:
        return {}, [ValueError(f"{origin}.files: format {fmt} needs `archive: <path>`")]
    missing = missing_files(files, origin)
    if missing:
        return {}, missing
    try:
        raw = readers[fmt]()
    except ValueError as err:
        return {}, [err]
    groups, problems = {}, []
    for split, arrays in raw.items():
        missing_fields = [f for f in ("logits", "labels") if f not in arrays]
        if missing_fields:
            problems.append(ValueError(f"{origin}.files: split {split!r} has no {' and no '.join(missing_fields)}; "
                                       f"every split needs logits and labels (metrics compare with the labels)"))
            continue
        try:
            where = f"{origin}: {_file_of(fmt, files, split, 'logits')}:{split}/logits"
            if "logits" in arrays:
                arrays["logits"] = convert_scores(arrays["logits"], scores, where)
            groups[split] = validate_split(arrays, f"{origin}: {_file_of(fmt, files, split, 'labels')}:{split}")
        except ValueError as err:
            problems.append(err)
    return groups, problems


def pickle_problems(fmt: str, files: dict) -> list[ValueError]:
    """The error of reading a ``pickle`` source's archive (one that names anything but array parts), or none."""
    if fmt != "pickle" or "archive" not in files:
        return []
    try:
        _from_pickle(files["archive"])
    except ValueError as err:
        return [err]
    return []


def missing_files(files: dict, origin: str) -> list[FileNotFoundError]:
    """One error per file of ``files`` that does not exist."""
    return [FileNotFoundError(f"{origin}.files: {path} does not exist") for path in _paths(files)
            if not Path(path).exists()]


def npy_shapes(files: dict) -> dict[str, dict]:
    """``{split: {field: shape}}`` of an ``npy`` source read from the file headers only (memory-mapped)."""
    def shape(path):
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False).shape
        except (ValueError, OSError) as err:
            raise ValueError(f"{path}: cannot read as .npy ({err})") from None

    if "logits" in files:
        return {"all": {field: shape(path) for field, path in files.items()}}
    return {split: {field: shape(path) for field, path in fields.items()} for split, fields in files.items()}


def _file_of(fmt: str, files: dict, split: str, field: str) -> str:
    """The input file that holds ``field`` of ``split`` (for error messages)."""
    if fmt != "npy":
        return str(files["archive"])
    entry = files.get(split, files) if isinstance(files.get(split), dict) else files
    return str(entry.get(field, "?"))


def _paths(files: dict):
    for value in files.values():
        if isinstance(value, dict):
            yield from _paths(value)
        else:
            yield value
