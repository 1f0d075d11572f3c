"""Read classifier outputs from files: ``.npy``, ``.npz`` and the NN_calibration pickle.

Layouts (see config/README.md):

* ``npy``: one file per field, ``files: {logits: a.npy, labels: b.npy}`` (a pool) or per split
  ``files: {cal: {logits: .., labels: ..}, test: {...}}``; optional ``embeddings``. A source declared
  ``scores: probs`` may name its score file ``probs`` instead of ``logits`` (also in ``npz`` arrays).
* ``npz``: ``files: {archive: x.npz}`` with arrays ``logits``/``labels`` (a pool) or
  ``{split}_{field}`` (``cal_logits``, ``test_labels``, ``train_embeddings``, ...).
* ``pickle``: ``files: {archive: x.p}`` holding ``((logits_val, y_val), (logits_test, y_test))``, the
  format of github.com/markus93/NN_calibration used by the LECE and Dirichlet papers; val → cal.

Declared probabilities (``scores: probs``) become log-probabilities, floored at
:data:`calbench.scores.PROB_FLOOR` (the smallest positive float64). A declaration that does not fit
the data (rows of "probabilities" that do not sum to one, or "logits" that all do) is an error, not a guess.
"""

from __future__ import annotations

import errno
import os
import pickle
from pathlib import Path

import numpy as np

from calbench.data.inputs import file_paths
from calbench.data.npy_files import load_npy, load_npz
from calbench.data.store import validate_split
from calbench.data.where import shown
from calbench.scores import convert_scores

SPLITS = ("train", "cal", "test", "all")
_NO_ROWS = "0 rows (an empty array); a split needs rows of scores and labels"
#: The fields a split may hold; ``probs`` is the score field's other name for ``scores: probs`` sources.
FIELDS = ("logits", "labels", "embeddings", "true_probs")


def npy_fields(files: dict, scores: str, origin: str) -> dict:
    """An ``npy`` source's ``files`` with the score field named ``logits`` (``probs`` accepted where the source
    declares ``scores: probs``); a layout that is neither a pool ``{field: path}`` nor splits
    ``{split: {field: path}}`` is an error naming the key and the fix."""
    pooled = any(not isinstance(value, dict) for value in files.values())
    if pooled:
        return _rename_probs(files, scores, f"{origin}.files")
    return {split: _rename_probs(fields, scores, f"{origin}.files.{split}") if split in SPLITS else fields
            for split, fields in files.items()}


def _rename_probs(fields: dict, scores: str, where: str) -> dict:
    unknown = sorted(set(fields) - {*FIELDS, "probs"})
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; a split names the files of {FIELDS} (the score file "
                         "`probs` where the source declares `scores: probs`), or the files form splits "
                         f"{{cal: {{...}}, test: {{...}}}} with split names in {SPLITS}")
    if "probs" not in fields:
        return dict(fields)
    if scores != "probs" or "logits" in fields:
        raise ValueError(f"{where}.probs: a score file named `probs` needs `scores: probs` and no `logits` beside "
                         "it; declare `scores: probs`, or name the key `logits` for logits")
    return {("logits" if key == "probs" else key): value for key, value in fields.items()}


def _load_npy(path) -> np.ndarray:
    try:
        return load_npy(path)
    except (ValueError, OSError, EOFError) as err:
        raise ValueError(f"{path}: cannot read as .npy ({err or type(err).__name__}); it is truncated or not an "
                         ".npy file") from None


def _from_npy(files: dict) -> dict[str, dict]:
    if not any(isinstance(value, dict) for value in files.values()):
        return {"all": {field: _load_npy(path) for field, path in files.items()}}
    return {split: {field: _load_npy(path) for field, path in fields.items()} for split, fields in files.items()}


def _from_npz(archive) -> dict[str, dict]:
    try:
        data = load_npz(archive)
    except (ValueError, OSError, EOFError) as err:
        raise ValueError(f"{archive}: cannot read as .npz ({err or type(err).__name__}); it is truncated or not an "
                         ".npz archive") from None
    if "logits" in data or "probs" in data:
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


#: The entries a pickle's lists may expand to, per byte of the file: a list named twice is stored once, so a small
#: pickle can describe a list of 2³⁴ leaves (a DAG of shared lists), which converting to arrays would expand.
PICKLE_ENTRIES_PER_BYTE = 16


def _expanded_entries(value, memo: dict) -> int:
    """The entries ``value`` expands to as nested lists and arrays, each shared list counted as often as it is
    named (computed once per object)."""
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, np.ndarray):
        count = value.size
    elif isinstance(value, (list, tuple)):
        memo[id(value)] = 0  # a list that holds itself expands to nothing more
        count = sum(_expanded_entries(item, memo) for item in value)
    else:
        count = 1
    memo[id(value)] = count
    return count


def _from_pickle(archive) -> dict[str, dict]:
    try:
        with open(archive, "rb") as fh:
            loaded = _ArraysOnlyUnpickler(fh, encoding="latin1").load()
        entries, limit = _expanded_entries(loaded, {}), PICKLE_ENTRIES_PER_BYTE * max(os.path.getsize(archive), 4096)
        if entries > limit:
            raise ValueError(f"its lists expand to {entries:,} entries, more than {PICKLE_ENTRIES_PER_BYTE} per byte "
                             "of the file (lists named many times over); store the logits and labels as arrays")
        (logits_val, y_val), (logits_test, y_test) = loaded
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
    if fmt == "npy":
        try:
            files = npy_fields(files, scores, origin)
        except ValueError as err:
            return {}, [err]
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
    except ValueError as err:  # names the file; the key names the source
        return {}, [ValueError(f"{origin}: {err}")]
    groups, problems = {}, []
    for split, arrays in raw.items():
        if "probs" in arrays:
            try:
                arrays = _rename_probs(arrays, scores, f"{origin}: {_file_of(fmt, files, split, 'probs')}:{split}")
            except ValueError as err:
                problems.append(err)
                continue
        missing_fields = [f for f in ("logits", "labels") if f not in arrays]
        if missing_fields:
            problems.append(ValueError(f"{origin}.files: split {split!r} has no {' and no '.join(missing_fields)}; "
                                       f"every split needs logits and labels (metrics compare with the labels)"))
            continue
        if np.shape(arrays["logits"])[:1] == (0,):
            problems.append(ValueError(f"{origin}: {_file_of(fmt, files, split, 'logits')}:{split}/logits: {_NO_ROWS}"))
            continue
        try:
            where = f"{origin}: {_file_of(fmt, files, split, 'logits')}:{split}/logits"
            if "logits" in arrays:
                arrays["logits"] = convert_scores(arrays["logits"], scores, where)
            groups[split] = validate_split(arrays, f"{origin}: {_file_of(fmt, files, split, 'labels')}:{split}")
        except ValueError as err:
            problems.append(err)
    return groups, problems


def archive_problems(fmt: str, files: dict) -> list[ValueError]:
    """The error of opening a ``pickle`` or ``npz`` source's archive (a pickle is read in full: one that names anything
    but array parts is refused; an npz's table of contents only), or none."""
    if fmt not in ("pickle", "npz") or "archive" not in files:
        return []
    archive = files["archive"]
    try:
        if fmt == "pickle":
            _from_pickle(archive)
            return []
        opened = np.load(archive, allow_pickle=False)
    except ValueError as err:
        return [err if fmt == "pickle" else ValueError(f"{archive}: cannot read as .npz ({err})")]
    except (OSError, EOFError) as err:
        return [ValueError(f"{archive}: cannot read as .npz ({err or type(err).__name__}); it is truncated or not an "
                           ".npz archive")]
    if not isinstance(opened, np.lib.npyio.NpzFile):
        return [ValueError(f"{archive}: an .npy array, not an .npz archive; use `format: npy`, or np.savez")]
    opened.close()
    return []


def missing_files(files: dict, origin: str) -> list[FileNotFoundError]:
    """One error per file of ``files`` that cannot be read as a data file: it does not exist, is a loop of symbolic
    links, is not a regular file, or is empty."""
    problems = []
    for path in file_paths(files):
        problem = _unusable(Path(path))
        if problem:
            problems.append(FileNotFoundError(f"{origin}.files: {shown(path)} {problem}"))
    return problems


def _unusable(path: Path) -> str | None:
    """Why ``path`` is no data file, or None."""
    try:
        if not path.exists():
            if not path.is_symlink():
                return "does not exist"
            try:
                os.stat(path)
            except OSError as err:
                if err.errno == errno.ELOOP:
                    return "is a loop of symbolic links; point the link at the data file"
            return "is a symbolic link to a missing file"
        if not path.is_file():
            return "is not a file (a folder?); name the data file itself"
        if path.stat().st_size == 0:
            return "is empty (0 bytes): an interrupted copy or download? Write the file again"
    except (RuntimeError, OSError) as err:  # a loop of symbolic links: RuntimeError before Python 3.13
        return f"cannot be read ({' '.join(str(err).split())}); fix the symbolic link(s)"
    return None


def npy_shapes(files: dict) -> dict[str, dict]:
    """``{split: {field: shape}}`` of an ``npy`` source (``files`` as :func:`npy_fields` returns them) read from
    the file headers only (memory-mapped)."""
    def shape(path):
        try:
            found = np.load(path, mmap_mode="r", allow_pickle=False).shape
        except (ValueError, OSError, EOFError) as err:
            raise ValueError(f"{path}: cannot read as .npy ({err or type(err).__name__}); it is truncated or not an "
                             ".npy file") from None
        if found[:1] == (0,):
            raise ValueError(f"{path}: {_NO_ROWS}")
        return found

    if not any(isinstance(value, dict) for value in files.values()):
        return {"all": {field: shape(path) for field, path in files.items()}}
    return {split: {field: shape(path) for field, path in fields.items()} for split, fields in files.items()}


def _file_of(fmt: str, files: dict, split: str, field: str) -> str:
    """The input file that holds ``field`` of ``split`` (for error messages)."""
    if fmt != "npy":
        return str(files["archive"])
    entry = files.get(split, files) if isinstance(files.get(split), dict) else files
    return str(entry.get(field, "?"))
