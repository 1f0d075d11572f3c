"""The manifest of an ``imagefolder`` source's images: the input of its model jobs (training, dumps), so that a
changed, added or removed image reruns them and what depends on them, and nothing else (docs/operations.md).

Its own rule reads every image (:func:`calbench.data.inputs.image_files`): Snakemake reruns it where the set of
images changed or an image is newer than the manifest and, below its checksum limit (1 MB by default), differs in
content; the model jobs then read one small file rather than each image.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from calbench.atomic import write_text_atomic
from calbench.data.entry import Source
from calbench.jobs import paths
from calbench.jobs.spec import JobSpec, infile, outfile, param


@dataclass(frozen=True, kw_only=True)
class ManifestSpec(JobSpec):
    """The manifest of an ``imagefolder`` source's images (rule image_manifest): ``images``, every image below
    ``data_dir`` that torchvision's ImageFolder reads, in its order."""

    source: str
    data_dir: str = param()
    images: list = infile()
    manifest: str = outfile()


def spec(config: dict, *, source: str) -> ManifestSpec:
    from calbench.data.image_folder import dataset_folder, image_files

    data_dir = str(dataset_folder(dict(Source.of(config, source).entry), config["downloads_dir"]))
    return ManifestSpec(source=source, data_dir=data_dir, images=image_files(data_dir, f"sources.{source}"),
                        manifest=paths.IMAGE_MANIFEST.format(source=source))


def image_manifest_job(*, spec: ManifestSpec) -> None:
    """One line per image: its path relative to ``data_dir``, its size in bytes and the SHA-256 of its content."""
    data_dir = spec.data_dir
    lines = ["path\tbytes\tsha256"]
    for path in spec.images:
        with open(path, "rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()
        lines.append(f"{os.path.relpath(path, data_dir)}\t{os.path.getsize(path)}\t{digest}")
    write_text_atomic(spec.manifest, "\n".join(lines) + "\n")
