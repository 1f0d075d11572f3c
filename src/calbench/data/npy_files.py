"""``.npy`` and ``.npz`` files read with their declared sizes checked first: numpy allocates an array of the shape a
header declares before it reads the data (a 192-byte ``.npy`` declaring 2⁴⁰ rows, an ``.npz`` member declaring
128 TB), so the declared bytes are compared with the bytes the file holds before anything is allocated."""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np

#: Deflate expands at most about 1032-fold; an ``.npz`` member that says it holds more than this many times its
#: compressed bytes (plus a little) is damaged or forged.
MAX_EXPANSION = 1100


def _declared_bytes(fp, where: str) -> tuple[int, int]:
    """(bytes the array of the ``.npy`` stream ``fp`` declares, bytes of its header), ``fp`` at its start."""
    start = fp.tell()
    try:
        version = np.lib.format.read_magic(fp)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(fp)
    except (ValueError, OSError, EOFError, SyntaxError) as err:
        raise ValueError(f"{where}: not an .npy array ({err or type(err).__name__}); it is truncated or not an "
                         ".npy file") from None
    if dtype.hasobject:
        raise ValueError(f"{where}: holds Python objects (dtype {dtype}); save numeric arrays")
    return math.prod(shape) * dtype.itemsize, fp.tell() - start


def _refuse_beyond(declared: int, held: int, where: str) -> None:
    if declared > held:
        raise ValueError(f"{where}: its header declares an array of {declared:,} bytes, but it holds {held:,} bytes "
                         "of data; the file is truncated or damaged: export the array again")


def load_npy(path) -> np.ndarray:
    """The array of ``.npy`` file ``path`` (no pickles), refused before allocating when its header declares more
    bytes than the file holds."""
    path = Path(path)
    with open(path, "rb") as fp:
        declared, header = _declared_bytes(fp, str(path))
        _refuse_beyond(declared, path.stat().st_size - header, str(path))
        fp.seek(0)
        return np.load(fp, allow_pickle=False)


def check_npz(path) -> None:
    """Refuse ``.npz`` archive ``path`` when a member's header declares more bytes than the member holds, or a
    member says it expands beyond what deflate can (:data:`MAX_EXPANSION`)."""
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                where = f"{path}: member {info.filename[:80]!r}"
                if info.file_size > MAX_EXPANSION * info.compress_size + 2**16:
                    raise ValueError(f"{where}: says it expands {info.compress_size:,} bytes to {info.file_size:,}, "
                                     "more than compression can; the archive is damaged: export it again")
                if info.filename.endswith(".npy"):
                    with archive.open(info) as fp:
                        declared, header = _declared_bytes(fp, where)
                    _refuse_beyond(declared, info.file_size - header, where)
    except zipfile.BadZipFile as err:
        raise ValueError(f"{path}: cannot read as .npz ({err}); it is truncated or not an .npz archive") from None


def load_npz(path) -> dict[str, np.ndarray]:
    """Every array of ``.npz`` archive ``path`` by name, after :func:`check_npz`."""
    check_npz(path)
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}
