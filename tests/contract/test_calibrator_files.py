"""A calibrator file is data (docs/saved_calibrators.md): files crafted by an adversary from the saved file of every
registered method (names of standard-library functions and classes in every kind of string of the header, huge
shapes and unsupported dtypes in the tensor table, edited header fields, the checksum always recomputed) are each
refused with CalibratorFileError naming the file, or load to the same predictions; while they load, an audit hook
(``sys.addaudithook``) sees no process started, no file written, removed or renamed, no code compiled or unpickled
and no file opened but the one loaded and the installed code, and tracemalloc sees memory bounded by the file."""

from __future__ import annotations

import json
import os
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import calbench
from calbench.methods import available
from calbench.persist import CalibratorFileError
from calbench.persist.format import checksum as _checksum
from test_persist import TEST, fitted

#: Strings a forger would write: dotted paths to standard-library callables (the old format resolved such paths),
#: dtypes that would allocate without bound, and a registered name in the wrong place.
HOSTILE = ["calbench.atomic:os.system", "calbench.atomic:tempfile._TemporaryFileCloser", "os:system",
           "subprocess:Popen", "builtins:eval", "numpy:ndarray.tofile", "shutil.rmtree", "<U500000", "|O",
           "pickle.loads", "ts"]
#: Audit events that no load may raise (CPython's audit event table): processes, writes, code, the network.
FORBIDDEN = ("os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.kill", "subprocess.Popen",
             "os.remove", "os.rmdir", "os.rename", "os.truncate", "os.chmod", "os.chown", "os.link", "os.symlink",
             "os.mkdir", "os.putenv", "os.unsetenv", "shutil.", "socket.", "ctypes.", "pickle.find_class",
             "marshal.loads", "exec", "compile", "tempfile.", "webbrowser.", "urllib.")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: Where a load may read files: the file itself, the installed code and its caches (numba's, where it is set apart).
READABLE = tuple(str(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, Path(calbench.__file__).parent,
                                                  os.environ.get("NUMBA_CACHE_DIR") or sys.prefix})

_seen: list | None = None  # the events of the load being watched; None: not watching


def _audit(event: str, args) -> None:
    if _seen is None:
        return
    if event.startswith(FORBIDDEN):
        _seen.append((event, repr(args)[:200]))
    elif event == "open":
        path, mode, flags = args
        writes = (mode is not None and any(c in str(mode) for c in "wax+")) or (flags or 0) & _WRITE_FLAGS
        if writes or (isinstance(path, (str, bytes, os.PathLike))
                      and not os.fsdecode(path).startswith(READABLE + (_loading,))):
            _seen.append((event, repr(args)[:200]))


_loading = "\0"
sys.addaudithook(_audit)  # cannot be removed: inert (one comparison) outside `_watched`


def _watched(path: Path) -> tuple[object, list, int]:
    """(the loaded calibrator or the exception, the forbidden audit events, peak traced bytes) of loading ``path``."""
    global _seen, _loading
    _seen, _loading = [], str(path.resolve())
    tracemalloc.start()
    try:
        result = calbench.load(path)
    except Exception as err:  # noqa: BLE001 (the test sorts what came out)
        result = err
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        events, _seen, _loading = _seen, None, "\0"
    return result, events, peak


def _parts(path: Path) -> tuple[dict, dict, bytes]:
    """(safetensors tensor table, calbench header, tensor bytes) of a saved file, read as raw bytes."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    table = json.loads(raw[8:8 + size])
    return table, json.loads(table["__metadata__"]["calbench"]), raw[8 + size:]


def _write(path: Path, table: dict, header: dict | None, data: bytes) -> None:
    table = dict(table)
    if header is not None:
        table["__metadata__"] = {"calbench": json.dumps(header)}
    text = json.dumps(table).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


def _strings(node, at=()):
    """Paths (tuples of keys and indices) to every string of a JSON tree, dict keys included (``("key", k)``)."""
    if isinstance(node, str):
        yield at
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, at + (i,))
    elif isinstance(node, dict):
        for key, value in node.items():
            yield at + (("key", key),)
            yield from _strings(value, at + (key,))


def _kind_of_place(at) -> tuple:
    """A string's place with the positions inside plain lists and tuples left out (the fold models of a grid search,
    its CV table's rows, the maps of a one-vs-rest method are places of one kind); the pairs of a ``$dict`` (which
    attribute, key or value) are kept."""
    return tuple("#" if isinstance(step, int) and not (i >= 1 and at[i - 1] == "$dict" or i >= 2
                                                        and at[i - 2] == "$dict") else step
                 for i, step in enumerate(at))


def _places(header):
    """One path per kind of place of the header's strings (:func:`_kind_of_place`)."""
    return list({_kind_of_place(at): at for at in reversed(list(_strings(header)))}.values())[::-1]


def _replaced(tree, at, text):
    tree = json.loads(json.dumps(tree))
    *parent_path, last = at
    parent = tree
    for step in parent_path:
        parent = parent[step]
    if isinstance(last, tuple):  # a dict key: renamed, its value kept
        parent[text] = parent.pop(last[1])
    else:
        parent[last] = text
    return tree


def _crafted(path: Path, arrays: dict, out: Path):
    """Yield (description, crafted file) for every forgery of the saved file ``path``."""
    table, header, data = _parts(path)
    hostile = iter(HOSTILE * (1 + 4 * len(json.dumps(header)) // len(HOSTILE)))
    for n, at in enumerate(_places(header)):
        text = next(hostile)
        forged = _replaced(header, at, text)
        forged["checksum"] = _checksum(forged, arrays)
        _write(out / f"s{n}.safetensors", table, forged, data)
        yield f"string at {at} = {text!r}", out / f"s{n}.safetensors"
    edits = {"num_classes": 10**9, "method": "uncal", "needs": ["logits"], "input_kind": "probs",
             "fitted_summary": {"temperature": 1.0}, "chosen": {"q": 1.0}, "format_version": 2,
             "calbench_version": "0.0.1"}
    for field, value in edits.items():
        forged = {**header, field: value}
        forged["checksum"] = _checksum(forged, arrays)
        _write(out / f"h_{field}.safetensors", table, forged, data)
        yield f"header field {field} = {value!r}", out / f"h_{field}.safetensors"
    for key in [k for k in table if k != "__metadata__"]:
        for shape, dtype in (([2**40], None), ([2**31, 2**31], None), (None, "U500000"), (None, "BF16"),
                             (None, "F8_E4M3"), (None, "C64"), (None, "O")):
            forged_table = {**table, key: {**table[key], **({"shape": shape} if shape else {}),
                                           **({"dtype": dtype} if dtype else {})}}
            name = f"t_{key}_{dtype or len(shape)}.safetensors"
            _write(out / name, forged_table, None, data)
            yield f"tensor {key} with shape {shape} / dtype {dtype}", out / name


@pytest.mark.parametrize("name", available() + ["ts+lece"])  # and a chain, whose LECE pool replays its TS step
def test_a_crafted_calibrator_file_is_refused_or_loads_to_the_same_predictions_and_runs_nothing(name, tmp_path):
    from safetensors.numpy import load_file

    cal = fitted(name)
    path = calbench.save(cal, tmp_path / f"{name}.safetensors")
    expected = cal.predict_proba(TEST[0])
    calbench.load(path)  # imports and compiled kernels loaded before watching
    arrays = load_file(str(path))
    victim = tmp_path / "victim.txt"
    victim.write_text("still here")
    crafted = tmp_path / "crafted"
    crafted.mkdir()
    before = sorted(tmp_path.rglob("*"))
    refused = loaded = 0
    for description, forged in _crafted(path, arrays, crafted):
        result, events, peak = _watched(forged)
        where = f"{name}: {description}"
        assert not events, f"{where}: loading raised audit events {events}"
        assert peak <= 2**25 + 40 * forged.stat().st_size, f"{where}: {peak / 2**20:.0f} MiB traced while loading"
        if isinstance(result, Exception):
            assert isinstance(result, CalibratorFileError), f"{where}: {type(result).__name__}: {result}"
            assert str(forged) in str(result), f"{where}: the message names no file: {result}"
            refused += 1
        else:
            np.testing.assert_allclose(result.predict_proba(TEST[0]), expected, rtol=0, atol=1e-12, err_msg=where)
            loaded += 1
        forged.unlink()
    assert sorted(tmp_path.rglob("*")) == before and victim.read_text() == "still here"  # no file made or touched
    assert refused > 10 and loaded >= 1  # the forgeries reach the checks; fields for people load as they are


def test_the_audit_hook_sees_what_the_old_format_did(tmp_path):
    """The test's own check: writing a file and starting a process are seen by the hook while watching."""
    global _seen, _loading
    _seen, _loading = [], "\0"
    try:
        (tmp_path / "x.txt").write_text("x")
        os.system("true")
    finally:
        events, _seen = _seen, None
    assert [event for event, _ in events] == ["open", "os.system"]
