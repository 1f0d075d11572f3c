"""The files a source entry names, as inputs of the workflow's rules that read them: a changed file then reruns
its dump (and what depends on it), and only that (docs/operations.md).

A downloaded file (``{url, sha256}``) is not among them: its content is pinned by the ``sha256`` of the entry,
which is a param of the rules, and the cache re-checks it on every read (:func:`calbench.data.download.fetch`).
Neither are torchvision's CIFAR and SVHN files: torchvision checks each one's MD5 when it loads them. The images of
an ``imagefolder`` source are, through one manifest of their hashes that the model rules read
(:mod:`calbench.data.image_folder`, :mod:`calbench.jobs.image_manifest`).
"""

from __future__ import annotations

from calbench.data.entry import is_model


def source_files(entry: dict) -> list[str]:
    """The local files the dump (or training) of a source reads: an import source's ``files``, a model source's
    local ``weights``."""
    if entry["type"] == "import":
        return file_paths(entry["files"])
    if is_model(entry) and entry.get("weights"):
        return [entry["weights"]]
    return []


def shift_files(entry: dict) -> list[str]:
    """The local files of an import source's shifted test sets (docs/shift.md)."""
    if entry["type"] != "import":
        return []
    return [path for items in entry.get("shifts", {}).values() for item in items
            for path in [*file_paths(item["files"]), *([item["rows"]] if "rows" in item else [])]]


def ood_files(entry: dict) -> list[str]:
    """The local files of an import source's out-of-distribution sets (docs/shift.md)."""
    return [spec["logits"] for spec in (entry.get("ood") or {}).values()] if entry["type"] == "import" else []


def file_paths(files: dict) -> list[str]:
    """The local paths of a ``files`` mapping, at any depth (a downloaded ``{url, sha256}`` is not one)."""
    paths = []
    for value in files.values():
        if isinstance(value, dict):
            paths += [] if "url" in value else file_paths(value)
        else:
            paths.append(value)
    return paths
