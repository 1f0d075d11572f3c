"""An ``imagefolder`` source's images are inputs: its manifest rule reads every image torchvision's ImageFolder
reads, its model rules read the manifest, so a changed, added or removed image reruns the dump and what depends on
it, and nothing else (docs/operations.md). One run of a tiny image folder beside a synthetic source, then each edit
in turn and the job list of ``snakemake -n`` read."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from calbench.data.check import image_folder_problems
from calbench.data.image_folder import IMAGE_EXTENSIONS, image_files
from conftest import run_snakemake
from workflow_helpers import planned_jobs, tiny_config

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("image_folder_inputs")]


def _png(path, seed, size=8):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, size=(size, size, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)


def _folder(root, classes=3, per_class=6):
    for k in range(classes):
        for i in range(per_class):
            _png(root / f"n0{k}" / f"{i}.png", 10 * k + i)
    return root


def test_the_listing_is_what_torchvision_reads(tmp_path):
    """Nested folders, links, endings in upper case, files that are not images, a hidden class folder."""
    folder = pytest.importorskip("torchvision.datasets.folder", reason="torchvision: pip install 'calbench[models]'")
    assert IMAGE_EXTENSIONS == tuple(folder.IMG_EXTENSIONS)
    root = _folder(tmp_path / "val", classes=2, per_class=2)
    _png(root / "n00" / "deeper" / "a.PNG", 1)
    _png(root / ".hidden" / "b.jpg", 2)
    (root / "n01" / "notes.txt").write_text("not an image")
    (root / "README").write_text("not in a class")
    os.symlink(root / "n00" / "deeper", root / "n01" / "linked")
    samples = [path for path, _ in folder.ImageFolder(str(root)).samples]
    assert image_files(root, "sources.x") == samples
    assert len(samples) == 7  # 4 + deeper/a.PNG, read twice (once through the link) + .hidden/b.jpg


def test_a_link_looping_back_is_refused_naming_it(tmp_path):
    root = _folder(tmp_path / "val", classes=2, per_class=1)
    os.symlink("..", root / "n01" / "up")
    with pytest.raises(ValueError, match=r"sources\.x\.data_dir: .*n01/up links to .*n01, .* without end"):
        image_files(root, "sources.x")
    entry = {"dataset": "imagefolder", "data_dir": str(root)}
    assert [p.split(":")[0] for p in image_folder_problems("x", entry, "cache")] == ["sources.x.data_dir"]


def test_a_folder_torchvision_would_refuse_is_a_problem_before_any_job(tmp_path):
    entry = {"dataset": "imagefolder", "data_dir": str(tmp_path / "missing")}
    assert "is not a folder of class sub-folders" in image_folder_problems("x", entry, "cache")[0]
    (tmp_path / "flat").mkdir()
    _png(tmp_path / "flat" / "a.png", 0)
    assert "has no sub-folder" in image_folder_problems("x", {**entry, "data_dir": str(tmp_path / "flat")}, "c")[0]
    root = _folder(tmp_path / "val", classes=2, per_class=1)
    (root / "n02").mkdir()
    (root / "n02" / "a.txt").write_text("")
    assert image_folder_problems("x", {**entry, "data_dir": str(root)}, "c") == [
        f"sources.x.data_dir: no image ({', '.join(IMAGE_EXTENSIONS)}) in the class folder(s) n02"]
    assert image_folder_problems("x", {"dataset": "digits"}, "c") == []


#: An image over 1 MB (random pixels do not compress), above which Snakemake compares an input's modification time
#: alone: tracked by time, touching it would rerun the dump.
LARGE = "n00/0.png"
#: Where the source's images are: ``downloads_dir/imagefolder``, the folder of an imagefolder source without
#: ``data_dir``.
FOLDER = "downloads/imagefolder"


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """A pretrained source on an image folder (random weights of a tiny timm ResNet) with an out-of-distribution set
    (whose dump reads the source's images and weights too), and a synthetic source."""
    torch = pytest.importorskip("torch", reason="the model sources need torch: pip install 'calbench[models]'")
    pytest.importorskip("torchvision")
    from calbench.models import architectures

    work = tmp_path_factory.mktemp("image_folder")
    _png(_folder(work / FOLDER) / LARGE, 0, size=600)
    torch.save(architectures.build("timm:resnet10t", 3).state_dict(), work / "w.pth")
    config = {**tiny_config(n_cal=100, n_test=100), "downloads_dir": "downloads"}  # no data_dir: the folder is there
    config["sources"]["inet"] = {"type": "pretrained", "dataset": "imagefolder", "image_size": 8,
                                 "sizes": {"train": 0, "cal": 9, "test": 9}, "split_seed": 0,
                                 "model": "timm:resnet10t", "weights": "w.pth", "eval_batch_size": 16,
                                 "ood": {"noise": {"noise": "uniform", "rows": 6}}}
    run_snakemake(work, config)
    return work


def _planned_after(work, edit):
    """The jobs ``snakemake -n`` plans after ``edit(folder)``; the folder is restored after."""
    folder = work / FOLDER
    shutil.copytree(folder, work / "orig", symlinks=True, copy_function=shutil.copy2)
    try:
        edit(folder)
        return planned_jobs(work)
    finally:
        shutil.rmtree(folder)
        (work / "orig").rename(folder)


#: What the model reruns when its images or weights change: its dumps and everything after them; nothing of "tiny".
AFTER_MODEL = {("dump_model", "inet"), ("dump_ood_model", "inet"), ("calibrate", "inet/uncal/0"),
               ("calibrate", "inet/ts/0"), ("evaluate", "inet/uncal/0"), ("evaluate", "inet/ts/0"),
               ("evaluate_ood", "inet/uncal/0"), ("evaluate_ood", "inet/ts/0"), ("aggregate", ""),
               ("runtime_table", ""), ("ood_report", "")}
#: What a changed image reruns: the folder's manifest, then the same.
RERUN = AFTER_MODEL | {("image_manifest", "inet")}


def test_an_unchanged_folder_plans_nothing(done):
    assert planned_jobs(done) == set()


def test_a_changed_image_reruns_its_dump_and_everything_after_it_only(done):
    assert _planned_after(done, lambda root: _png(root / "n01" / "3.png", 99)) == RERUN


def test_an_added_or_removed_image_reruns_the_same(done):
    assert _planned_after(done, lambda root: _png(root / "n02" / "new.jpg", 98)) == RERUN
    assert _planned_after(done, lambda root: (root / "n00" / "0.png").unlink()) == RERUN


def test_changed_local_weights_rerun_every_dump_of_the_model(done):
    path = done / "w.pth"
    original, times = path.read_bytes(), path.stat()
    path.write_bytes(original + b"\0")
    try:
        assert planned_jobs(done) == AFTER_MODEL | {("source_digest", "inet")}
    finally:  # its time too: over 1 MB, Snakemake compares times, not checksums
        path.write_bytes(original)
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


def test_an_image_replaced_with_its_old_modification_time_reruns_the_same(done):
    """``cp -p``, ``rsync -a``, ``tar x``: other content, the old time; the images enter the DAG by content."""
    def replace(root):
        path = root / "n01" / "3.png"
        times = path.stat()
        _png(path, 97)
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))

    assert _planned_after(done, replace) == RERUN


def test_an_image_touched_but_unchanged_or_a_file_that_is_not_an_image_reruns_nothing(done):
    """The images' digests are computed when the DAG is built: a touched image hashes to the same digest."""
    assert (done / FOLDER / LARGE).stat().st_size > 1_000_000
    assert _planned_after(done, lambda root: os.utime(root / LARGE)) == set()
    assert _planned_after(done, lambda root: (root / "n01" / "notes.txt").write_text("x")) == set()


def test_the_manifest_holds_every_image_and_its_hash(done):
    import hashlib

    lines = (done / "results" / "manifests" / "inet.tsv").read_text().splitlines()
    assert lines[0] == "path\tbytes\tsha256" and len(lines) == 1 + 18
    path, size, digest = lines[1].split("\t")
    assert path == "n00/0.png" and int(size) == (done / FOLDER / path).stat().st_size
    assert digest == hashlib.sha256((done / FOLDER / path).read_bytes()).hexdigest()


def test_the_same_images_in_another_downloads_dir_rerun_nothing(done):
    """The manifest names the images below their folder: moving the folder with ``downloads_dir`` changes no job."""
    import yaml

    text = (done / "config.yaml").read_text()
    (done / "downloads").rename(done / "moved")
    try:
        moved = {**yaml.safe_load(text), "downloads_dir": "moved"}
        (done / "config.yaml").write_text(yaml.safe_dump(moved, sort_keys=False))  # the sources in their order
        assert planned_jobs(done) == set()
    finally:
        (done / "moved").rename(done / "downloads")
        (done / "config.yaml").write_text(text)


def test_touched_local_weights_rerun_nothing(done):
    """Over 1 MB, Snakemake would compare the weights' modification time, not their checksum: they enter the DAG
    through their digest (rule source_digest), which a touch does not change."""
    path = done / "w.pth"
    times = path.stat()
    assert times.st_size > 1_000_000
    os.utime(path)
    try:
        assert planned_jobs(done) == set()
    finally:
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
