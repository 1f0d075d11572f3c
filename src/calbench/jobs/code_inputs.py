"""The code input of a workflow rule: one manifest file per import closure (:mod:`calbench.imports`), instead of
every file of the closure as an input of every job (docs/operations.md, "What reruns after an edit").

A manifest lists the closure's files in ``sha256sum``'s format, ``<SHA-256>  <path below the repository>`` (an
absolute path where calbench is installed outside the checkout), so that ``sha256sum -c`` run in the repository
checks it. The Snakefile writes it when it builds the DAG, and only where its text changed: an edit of a file of the
closure changes the manifest's content and modification time, so the jobs that read it rerun; touching a file, or
editing it and editing it back, leaves a manifest whose checksum is the one Snakemake recorded, and reruns nothing.
A new manifest (a fresh ``.snakemake``) takes the modification time of the newest file it lists, so that it is no
newer than outputs made from those files. A file replaced with other content but its old modification time
(``cp -p``, ``rsync -a``) changes the manifest too.

One input per job, not the ~80 files of its closure: Snakemake checks the existence and size of every input of every
ready job each time it chooses jobs to start, which with the files as inputs was half of the default run's
Snakemake process's CPU time (docs/runtime.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from calbench.atomic import atomic_path
from calbench.data.digests import file_sha256, fingerprint

#: The folder of the manifests, in the run's working directory beside Snakemake's own records.
MANIFESTS = Path(".snakemake") / "calbench-code"
SUFFIX = ".sha256"


#: path → (its fingerprint, its SHA-256) in this process: a file is in many closures, hashed once per version.
_HASHED: dict[str, tuple[list[int], str]] = {}


def _sha256(path: str) -> str:
    mark = fingerprint(path)
    held = _HASHED.get(path)
    if held is None or held[0] != mark:
        held = _HASHED[path] = (mark, file_sha256(path))
    return held[1]


def code_manifest(name: str, files, root, folder: Path = MANIFESTS) -> str:
    """The path of manifest ``name`` listing ``files`` (paths below ``root``, the repository), written first where
    it is missing or lists other files or content; the rule's ``input.code``."""
    root = Path(root).resolve()
    text = "".join(f"{_sha256(f)}  {_below(Path(f).resolve(), root)}\n" for f in sorted(files))
    path = Path(folder) / f"{name}{SUFFIX}"
    try:
        if path.read_text() == text:
            return str(path)
        created = False
    except FileNotFoundError:
        created = True
    with atomic_path(path) as tmp:
        tmp.write_text(text)
        if created:
            newest = max((os.stat(f).st_mtime_ns for f in files), default=None)
            if newest is not None:
                os.utime(tmp, ns=(newest, newest))
    return str(path)


def _below(path: Path, root: Path) -> str:
    """``path`` relative to ``root``, or absolute where it lies elsewhere (calbench installed, not in the checkout)."""
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def listed_files(manifest, root) -> list[str]:
    """The absolute paths that ``manifest`` lists (``root``: the repository it was written for; an absolute path
    stays as it is)."""
    root = Path(root).resolve()
    return [str(root / line.split("  ", 1)[1]) for line in Path(manifest).read_text().splitlines()]


def with_code_files(inputs: set[str], workdir, root) -> set[str]:
    """A job's ``inputs`` as a dry run prints them (relative to ``workdir``), each code manifest joined by the files
    it lists: what an edit of a source file reaches (scripts/edit_reruns.py, the rerun tests)."""
    listed = [listed_files(Path(workdir) / p, root) for p in inputs if Path(p).parent == MANIFESTS]
    return set(inputs).union(*listed)
