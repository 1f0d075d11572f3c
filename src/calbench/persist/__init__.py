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
(one probe per file). A class whose state holds something else defines ``_get_state()`` /
``_set_state(state)`` (LECE rebuilds its neighbour pool from the rows that define it).

Decoding is bounded by the file's size (:mod:`calbench.persist.budget`): every byte it materialises beyond the
file's tensors is charged to a budget before it is allocated. The modules: :mod:`~calbench.persist.format` (what
saving and loading share), :mod:`~calbench.persist.encode`, :mod:`~calbench.persist.decode`,
:mod:`~calbench.persist.budget`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from calbench.persist.budget import DecodeBudget
from calbench.persist.decode import Decoder, probe
from calbench.persist.encode import Encoder
from calbench.persist.format import (
    DERIVED_FIELDS,
    EXTENSION,
    FORMAT_VERSION,
    HEADER_KEY,
    INPUT_KINDS,
    MAX_CLASSES,
    TENSOR_DTYPES,
    CalibratorFileError,
    checksum,
    chosen_settings,
    derived,
    method_name,
)
from calbench.version import __version__

__all__ = ["EXTENSION", "FORMAT_VERSION", "INPUT_KINDS", "MAX_CLASSES", "CalibratorFileError", "chosen_settings",
           "load", "method_name", "read_header", "save"]


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
    encoder = Encoder()
    header = {"format": "calbench-calibrator", "format_version": FORMAT_VERSION, "calbench_version": __version__,
              "input_kind": input_kind, **derived(cal), "calibrator": encoder.encode(cal, "calibrator")}
    header["checksum"] = checksum(header, encoder.arrays)
    path = Path(path)
    with atomic_path(path) as tmp:
        save_file(encoder.arrays, str(tmp), metadata={HEADER_KEY: json.dumps(header)})
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


def _open(path) -> tuple[dict, dict, int]:
    """(header, tensors, the file's size in bytes) of a calibrator file, its checksum verified."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        from calbench.data.where import shown

        raise FileNotFoundError(f"{shown(path)}: no such calibrator file")
    try:
        size = path.stat().st_size
        with safe_open(str(path), framework="np") as f:
            metadata = f.metadata() or {}
            arrays = _tensors(f, path, size)
    except (SafetensorError, OSError, ValueError, TypeError) as err:
        if isinstance(err, CalibratorFileError):
            raise
        raise CalibratorFileError(f"{path}: not a readable calibrator file (truncated or damaged?): {err}; save it "
                                  "again with calbench.save or `calbench fit`") from err
    if HEADER_KEY not in metadata:
        raise CalibratorFileError(f"{path}: a safetensors file without a calbench header; not a saved calibrator")
    try:
        header = json.loads(metadata[HEADER_KEY])
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
    if checksum(header, arrays) != header.get("checksum"):
        raise CalibratorFileError(f"{path}: header field 'checksum': does not match the header and arrays, which "
                                  "were damaged or edited after saving; refit and save the calibrator again")
    return header, arrays, size


def load(path):
    """Read a calibrator written by :func:`save`; it has ``input_kind_`` set from the header, and ``loaded_from_``
    (the file), so that its ``predict_proba`` refuses rows that are not probability distributions
    (:class:`calbench.scores.NotDistributionsError`). Builds only registered classes from data, within a decode
    budget fixed by the file's size (docs/saved_calibrators.md); any damaged, edited, forged or foreign file raises
    :class:`CalibratorFileError` naming the file and the field."""
    header, arrays, size = _open(path)
    path = Path(path)
    input_kind = header.get("input_kind")
    if input_kind not in INPUT_KINDS:
        raise CalibratorFileError(f"{path}: header field 'input_kind': {str(input_kind)[:40]!r} is not one of "
                                  f"{INPUT_KINDS}; the file is damaged")
    tree = header.get("calibrator")
    if not isinstance(tree, dict) or "$calibrator" not in tree:
        raise CalibratorFileError(f"{path}: header field 'calibrator': not an encoded calibrator")
    decoder = Decoder(arrays, path, DecodeBudget(path, size))
    cal = decoder.value(tree, "calibrator")
    if decoder.unread:
        raise CalibratorFileError(f"{path}: tensors {sorted(decoder.unread)[:5]}: named nowhere in the header; the "
                                  "file was not written by calbench.save")
    if not hasattr(cal, "num_classes_"):
        raise CalibratorFileError(f"{path}: calibrator.state.num_classes_: missing, so the calibrator is not "
                                  "fitted; fit it before saving")
    probe(cal, decoder)
    try:
        fields = derived(cal)
    except Exception as err:  # the state of a file, not the user's input
        raise CalibratorFileError(f"{path}: calibrator.state: the saved calibrator cannot report its header fields "
                                  f"({type(err).__name__}: {str(err)[:200]}); the file is damaged") from err
    for field in DERIVED_FIELDS:
        if json.dumps(header.get(field), sort_keys=True) != json.dumps(fields[field], sort_keys=True):
            raise CalibratorFileError(
                f"{path}: header field {field!r}: says {str(header.get(field))[:120]}, but the saved calibrator gives "
                f"{str(fields[field])[:120]}; the header was edited after saving: refit and save it again")
    cal.input_kind_ = input_kind
    cal.loaded_from_ = str(path)
    return cal
