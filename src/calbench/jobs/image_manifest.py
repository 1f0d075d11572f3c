"""The manifest of an ``imagefolder`` source's images: the input of its model jobs (training, dumps), so that a
changed, added or removed image reruns them and what depends on them, and nothing else (docs/operations.md).

Its own rule reads every image (:func:`calbench.data.image_folder.image_files`), whose content digests, computed
when the DAG is built (:mod:`calbench.data.digests`), are a param of it: Snakemake reruns it where the set of images
or the content of one changed, whatever the modification times; the model jobs then read one small file rather
than each image.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from calbench.atomic import write_text_atomic
from calbench.data.digests import file_sha256
from calbench.data.entry import Source
from calbench.jobs import paths
from calbench.jobs.spec import JobSpec, outfile, param


@dataclass(frozen=True, kw_only=True)
class ManifestSpec(JobSpec):
    """The manifest of an ``imagefolder`` source's images (rule image_manifest): ``images``, every image below
    ``data_dir`` that torchvision's ImageFolder reads, in its order; ``content``, their paths' (below ``data_dir``)
    and contents' digest (:func:`calbench.data.digests.content_digest`), the setting that reruns the job when an
    image is added, removed or changed in content (the images are not inputs: their modification times would rerun
    it for nothing). ``data_dir`` is no setting: the manifest names the images below it, so that the same images
    elsewhere (a changed ``downloads_dir``) rerun nothing."""

    source: str
    images: list
    data_dir: str
    content: str = param()
    manifest: str = outfile()


def spec(config: dict, *, source: str) -> ManifestSpec:
    from calbench.data.digests import content_digest
    from calbench.data.image_folder import dataset_folder, image_files

    data_dir = str(dataset_folder(dict(Source.of(config, source).entry), config["downloads_dir"]))
    images = image_files(data_dir, f"sources.{source}")
    return ManifestSpec(source=source, data_dir=data_dir, images=images, content=content_digest(images, root=data_dir),
                        manifest=paths.IMAGE_MANIFEST.format(source=source))


def image_manifest_job(*, spec: ManifestSpec) -> None:
    """One line per image: its path relative to ``data_dir``, its size in bytes and the SHA-256 of its content. A
    file that is no image file (:func:`calbench.data.image_folder.image_file_problem`: a FIFO, a device, empty, not
    an image) is refused before it is read."""
    from calbench.data.image_folder import image_file_problem

    data_dir = spec.data_dir
    lines = ["path\tbytes\tsha256"]
    for path in spec.images:
        if problem := image_file_problem(path):  # before reading: a FIFO or a device would never end
            raise ValueError(f"{path} {problem}; remove it from {data_dir} or replace it with the image")
        lines.append(f"{os.path.relpath(path, data_dir)}\t{os.path.getsize(path)}\t{file_sha256(path)}")
    write_text_atomic(spec.manifest, "\n".join(lines) + "\n")
