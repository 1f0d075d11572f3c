"""The rules' code manifests (calbench.jobs.code_inputs): written only where their text changes, so that Snakemake
reruns a job exactly when a file of its closure changes content."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from calbench.jobs.code_inputs import MANIFESTS, code_manifest, listed_files, with_code_files


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "src").mkdir()
    for name, text in (("a.py", "x = 1\n"), ("b.py", "y = 2\n")):
        (tmp_path / "src" / name).write_text(text)
    old = 1_600_000_000_000_000_000
    os.utime(tmp_path / "src" / "a.py", ns=(old, old))
    os.utime(tmp_path / "src" / "b.py", ns=(old + 5, old + 5))
    return tmp_path


def _files(repo):
    return [str(repo / "src" / "b.py"), str(repo / "src" / "a.py")]


def test_a_new_manifest_lists_each_file_with_its_sha256_and_takes_the_newest_files_time(repo):
    path = Path(code_manifest("calibrate.ts", _files(repo), repo, folder=repo / MANIFESTS))
    assert path == repo / MANIFESTS / "calibrate.ts.sha256"
    lines = path.read_text().splitlines()
    assert lines == [f"{hashlib.sha256(b'x = 1' + bytes([10])).hexdigest()}  src/a.py",
                     f"{hashlib.sha256(b'y = 2' + bytes([10])).hexdigest()}  src/b.py"]
    assert path.stat().st_mtime_ns == (repo / "src" / "b.py").stat().st_mtime_ns  # a fresh .snakemake reruns nothing


def test_touching_a_file_leaves_the_manifest_and_an_edit_rewrites_it(repo):
    folder = repo / MANIFESTS
    path = Path(code_manifest("evaluate", _files(repo), repo, folder=folder))
    before = path.stat()
    os.utime(repo / "src" / "a.py")  # touched: same content
    code_manifest("evaluate", _files(repo), repo, folder=folder)
    assert path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_ino == before.st_ino
    (repo / "src" / "a.py").write_text("x = 3\n")
    code_manifest("evaluate", _files(repo), repo, folder=folder)
    assert path.stat().st_mtime_ns > before.st_mtime_ns
    assert hashlib.sha256(b"x = 3\n").hexdigest() in path.read_text()


def test_a_file_replaced_with_its_old_modification_time_changes_the_manifest(repo):
    """``cp -p`` / ``rsync -a``: other content, the old time; a file's time alone would not rerun its jobs."""
    folder = repo / MANIFESTS
    path = Path(code_manifest("evaluate", _files(repo), repo, folder=folder))
    text, stat = path.read_text(), (repo / "src" / "a.py").stat()
    (repo / "src" / "a.py").write_text("x = 4\n")
    os.utime(repo / "src" / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code_manifest("evaluate", _files(repo), repo, folder=folder)
    assert path.read_text() != text and path.stat().st_mtime_ns > stat.st_mtime_ns


def test_listed_files_are_the_absolute_paths_and_join_a_jobs_inputs(repo, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("site-packages") / "c.py"  # calbench installed outside the checkout
    elsewhere.write_text("z = 0\n")
    workdir = tmp_path_factory.mktemp("work")
    name = code_manifest("calibrate.ts", [*_files(repo), str(elsewhere)], repo, folder=workdir / MANIFESTS)
    assert str(elsewhere) in (workdir / name).read_text()
    assert listed_files(workdir / name, repo) == sorted([*_files(repo), str(elsewhere)])
    relative = Path(name).relative_to(workdir).as_posix() if Path(name).is_absolute() else name
    inputs = {"results/dumps/s.h5", str(relative)}
    assert with_code_files(inputs, workdir, repo) == inputs | set(_files(repo)) | {str(elsewhere)}


@pytest.mark.workflow  # starts a process
@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="no sha256sum on this machine")
def test_sha256sum_checks_a_manifest_from_the_repository(repo):
    path = code_manifest("aggregate", _files(repo), repo, folder=repo / MANIFESTS)
    assert subprocess.run(["sha256sum", "-c", "--quiet", path], cwd=repo).returncode == 0
    (repo / "src" / "b.py").write_text("edited\n")
    assert subprocess.run(["sha256sum", "-c", "--quiet", path], cwd=repo, capture_output=True).returncode == 1
