"""Reading and writing the user's arrays (``.npy``, ``.npz``, ``.csv``) for ``calbench fit`` and ``apply``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from calbench.scores import Scores

SCORE_KEYS = ("logits", "probs", "scores")


def read_array(path, keys=SCORE_KEYS) -> np.ndarray:
    """An array from ``.npy``, ``.npz`` (its only array, or one named in ``keys``) or ``.csv`` (comma-separated;
    a first line that is not numbers is a header and skipped)."""
    from calbench.data.npy_files import check_npz, load_npy
    from calbench.data.where import shown

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{shown(path)}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return load_npy(path)
        if suffix == ".npz":
            check_npz(path)
            with np.load(path, allow_pickle=False) as archive:
                names = list(archive.files)
                chosen = names if len(names) == 1 else [k for k in keys if k in names][:1]
                if not chosen:
                    raise ValueError(f"holds arrays {names}; name the wanted one {' or '.join(keys)}")
                return archive[chosen[0]]
        if suffix == ".csv":
            header = _csv_has_header(path)
            if header:
                print(f"{path}: first line read as column names, not a row: {header[:80]}", file=sys.stderr)
            return np.loadtxt(path, delimiter=",", ndmin=2, skiprows=int(bool(header)), encoding="utf-8-sig")
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot read ({err})") from None
    raise ValueError(f"{path}: unknown file type {suffix!r}; use .npy, .npz or .csv")


def _csv_has_header(path: Path) -> str:
    """The first line of a CSV file when it is column names: no field of it parses as a number (a byte-order mark,
    as spreadsheets write, is not part of the first field); "" otherwise. A line mixing numbers and other text is a
    row, which reading then refuses."""
    with open(path, encoding="utf-8-sig") as f:
        first = f.readline().strip()
    fields = [field.strip() for field in first.split(",") if field.strip()]
    for field in fields:
        try:
            float(field)
        except ValueError:
            continue
        return ""
    return first if fields else ""


def write_array(path, array: np.ndarray) -> None:
    """Write ``.npy`` or ``.csv`` atomically (no half-written file on error)."""
    from calbench.atomic import atomic_path

    path = Path(path)
    if path.suffix.lower() not in (".npy", ".csv"):
        raise ValueError(f"{path}: output must end in .npy or .csv")
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        if path.suffix.lower() == ".npy":
            np.save(f, array)
        else:
            np.savetxt(f, array, delimiter=",", fmt="%.17g")


def read_scores(path, kind: str, embeddings=None, fix: str | None = None) -> Scores:
    """Scores from a file of logits or (``kind="probs"``) probabilities, checked against the declared kind;
    ``fix`` is the advice given when they do not look like that kind."""
    from calbench.scores import convert_scores

    logits = convert_scores(read_array(path), "probs" if kind == "probs" else "logits", str(path), fix)
    return Scores(logits, None if embeddings is None else read_array(embeddings, ("embeddings",)))
