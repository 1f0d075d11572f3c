"""The manifest of an ``imagefolder`` source's images: the input of its model jobs (training, dumps), so that a
changed, added or removed image reruns them and what depends on them, and nothing else (docs/operations.md).

Its own rule reads every image (:func:`calbench.data.image_folder.image_files`), whose content digests, computed
when the DAG is built (:mod:`calbench.data.digests`), are a param of it: Snakemake reruns it where the set of images
or the content of one changed, whatever the modification times; the model jobs then read one small file rather
than each image.
"""

from __future__ import annotations

import hashlib
import os

from calbench.atomic import write_text_atomic
from calbench.data.image_folder import image_file_problem


def image_manifest_job(data_dir, images, output) -> None:
    """One line per image of ``images`` (paths below ``data_dir``, in the order the model jobs read them): its path
    relative to ``data_dir``, its size in bytes and the SHA-256 of its content. A file that is no image file
    (:func:`calbench.data.image_folder.image_file_problem`: a FIFO, a device, empty, not an image) is refused
    before it is read."""
    lines = ["path\tbytes\tsha256"]
    for path in images:
        if problem := image_file_problem(path):  # before reading: a FIFO or a device would never end
            raise ValueError(f"{path} {problem}; remove it from {data_dir} or replace it with the image")
        with open(path, "rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()
        lines.append(f"{os.path.relpath(path, data_dir)}\t{os.path.getsize(path)}\t{digest}")
    write_text_atomic(output, "\n".join(lines) + "\n")
