"""The folder of a model source's dataset, and the images an ``imagefolder`` source reads there, listed as
torchvision's ``ImageFolder`` lists them (without importing torch): the inputs of the source's manifest rule
(:mod:`calbench.jobs.image_manifest`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: The file endings torchvision's ``ImageFolder`` reads, in any case (``torchvision.datasets.folder.IMG_EXTENSIONS``;
#: a test checks that the two agree).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def dataset_folder(entry: dict, cache_dir) -> Path:
    """The folder of a model source's dataset: its ``data_dir``, else ``cache_dir/{dataset}`` (the config's
    ``downloads_dir``, where torchvision downloads)."""
    return Path(entry.get("data_dir") or Path(cache_dir) / entry["dataset"])


def not_a_folder(root, where: str) -> str:
    """What to do where an ``imagefolder`` source's folder is missing."""
    return (f"{where}.data_dir: {root} is not a folder of class sub-folders of images. Put the images there (for "
            "ImageNet-1k: the 50,000 validation images in one sub-folder per class, named by WordNet id so that "
            "their sorted order is the models' class order) or set data_dir to where they are")


def image_files(data_dir, where: str) -> list[str]:
    """The images an ``imagefolder`` source reads, in the order torchvision's ``ImageFolder`` reads them: every
    sub-folder of ``data_dir`` is a class, and each class holds the files with an image ending anywhere below it,
    links followed. None where ``data_dir`` is not a folder (the dump then says so). A link back to a folder above it
    is refused (``ImageFolder`` would follow it without end)."""
    root = Path(data_dir)
    if not root.is_dir():
        return []
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    return [os.path.join(folder, name) for cls in classes for folder, names in _walk(root / cls, where)
            for name in sorted(names) if name.lower().endswith(IMAGE_EXTENSIONS)]


def _walk(top: Path, where: str) -> list[tuple[str, list[str]]]:
    """``(folder, file names)`` of ``top`` and every folder below it, links followed, sorted by path (as
    ``ImageFolder``); a ValueError naming the link where one leads to a folder that holds it (a loop)."""
    real = {str(top): os.path.realpath(top)}
    found = []
    for folder, subfolders, names in os.walk(top, followlinks=True):
        found.append((folder, names))
        for sub in subfolders:
            path = os.path.join(folder, sub)
            target, above = os.path.realpath(path), folder
            while above in real:  # the real folders this path passes through
                if real[above] == target or real[above].startswith(target.rstrip(os.sep) + os.sep):
                    raise ValueError(f"{where}.data_dir: {path} links to {target}, which holds {above}, so its "
                                     "images would be read without end; remove the link")
                above = os.path.dirname(above)
            real[path] = target
    return sorted(found)


#: The first bytes of each image format of :data:`IMAGE_EXTENSIONS` (WebP: ``RIFF`` then ``WEBP`` at byte 8).
IMAGE_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"P1", b"P2", b"P3", b"P4", b"P5", b"P6", b"BM",
                    b"II*\x00", b"MM\x00*", b"RIFF")


def image_file_problem(path) -> str | None:
    """What makes ``path`` (links followed) no image file, said for a message, or None: not a regular file (a
    FIFO, a device such as ``/dev/zero``, which reading would never finish), empty, or not starting as an image of
    :data:`IMAGE_EXTENSIONS` does. Only the first bytes are read."""
    try:
        info = os.stat(path)
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a FIFO, a device or a socket), which reading would never finish"
    if info.st_size == 0:
        return "is empty (0 bytes)"
    with open(path, "rb") as file:
        head = file.read(12)
    if not head.startswith(IMAGE_SIGNATURES) or (head.startswith(b"RIFF") and head[8:12] != b"WEBP"):
        return "does not start as a JPEG, PNG, PPM/PGM, BMP, TIFF or WebP image does"
    return None
