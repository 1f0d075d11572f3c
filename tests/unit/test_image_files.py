"""An image folder's files are images: a FIFO or a link to ``/dev/zero`` named ``x.png`` (reading either never
ends), an empty ``.png`` and a text file named ``.png`` are refused by ``validate`` (the image-folder check) and by
the manifest job before it reads them, a truncated PNG by ``validate`` (it decodes each image); real images pass."""

from __future__ import annotations

import os
import re

import pytest

from calbench.data.check import image_folder_problems
from calbench.jobs.image_manifest import ManifestSpec, image_manifest_job
from conftest import image_folder


def _planted(root, kind):
    path = root / "n00" / "x.png"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.symlink("/dev/zero", path)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":  # a PNG cut short: its signature, not its pixels
        path.write_bytes((root / "n00" / "0.png").read_bytes()[:60])
    else:
        path.write_text("not an image")
    return path


@pytest.mark.parametrize("kind, problem", [("fifo", "is not a regular file"), ("device", "is not a regular file"),
                                           ("empty", r"is empty \(0 bytes\)"), ("text", "does not start as a JPEG"),
                                           ("truncated", "does not decode as an image")])
def test_a_file_with_an_image_ending_that_is_no_image_is_refused(tmp_path, kind, problem):
    root = image_folder(tmp_path / "images", classes=2, per_class=2)
    entry = {"type": "pretrained", "dataset": "imagefolder", "data_dir": str(root)}
    assert image_folder_problems("x", entry, "cache", deep=True) == []
    path = _planted(root, kind)
    assert image_folder_problems("x", entry, "cache") == []  # the DAG's cheap check reads no image
    problems = image_folder_problems("x", entry, "cache", deep=True)
    assert len(problems) == 1 and "sources.x.data_dir: " in problems[0] and "x.png" in problems[0], problems
    assert re.search(problem, problems[0]), problems
    images = sorted(str(p) for p in root.rglob("*.png"))
    if kind != "truncated":  # the manifest job reads the first bytes only (decoding is the model job's)
        with pytest.raises(ValueError, match=rf"x.png {problem}"):
            image_manifest_job(spec=_manifest(root, images, tmp_path))
        assert not (tmp_path / "manifest.tsv").exists()
    path.unlink()
    image_manifest_job(spec=_manifest(root, sorted(str(p) for p in root.rglob("*.png")), tmp_path))


def _manifest(root, images, tmp_path) -> ManifestSpec:
    """The manifest job of ``images`` below ``root``, written to tmp_path/manifest.tsv."""
    return ManifestSpec(source="x", images=images, data_dir=str(root), content="",
                        manifest=str(tmp_path / "manifest.tsv"))
