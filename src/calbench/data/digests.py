"""Content digests of the data files and images a source reads, computed when the workflow's DAG is built, so that
they enter it by content rather than by modification time (docs/operations.md, "Content, not time").

A file is hashed again only where its fingerprint (size, modification and status-change times, inode) changed
since the digest cached for it: replacing a file with other content but the old modification time (``cp -p``,
``rsync -a``, ``tar x``, ``touch -r``) still changes its status-change time, so it is hashed again and its new
digest reruns what depends on it; a ``touch`` without a change is hashed again to the same digest and reruns
nothing. The cache (:data:`CACHE`) holds one line per file and is rewritten atomically."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from calbench.atomic import write_text_atomic

#: The digests cached between workflow runs, beside Snakemake's own records.
CACHE = Path(".snakemake") / "calbench-digests.json"


def fingerprint(path: str) -> list[int]:
    """What changes when a file's content may have: size, modification and status-change times, inode."""
    info = os.stat(path)
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]


def file_sha256(path: str) -> str:
    """The SHA-256 of the file at ``path``, hex."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def file_digests(paths: list[str], cache: Path = CACHE) -> dict[str, str]:
    """The SHA-256 of each regular file of ``paths`` (by its absolute path), from ``cache`` where its fingerprint is
    unchanged; a path that is missing or not a regular file is left out (the config checks name those)."""
    try:
        cached = json.loads(cache.read_text())
    except (OSError, ValueError):
        cached = {}
    digests, changed = {}, False
    for path in paths:
        key = os.path.abspath(path)
        try:
            if not os.path.isfile(key):
                continue
            mark = fingerprint(key)
            entry = cached.get(key)
            if not (isinstance(entry, list) and entry[:4] == mark):
                entry, changed = [*mark, file_sha256(key)], True
                cached[key] = entry
        except OSError:
            continue
        digests[key] = entry[4]
    if changed:
        write_text_atomic(cache, json.dumps(cached))
    return digests


def content_digest(paths: list[str], cache: Path = CACHE, *, root=None) -> str:
    """One SHA-256 of every file of ``paths`` by path and content (:func:`file_digests`): the param of the rules that
    read them, which changes exactly when a file is added, removed or changes content. With ``root``, the paths
    enter it relative to that folder, so that the same files in another folder give the same digest."""
    digests = file_digests(paths, cache)
    text = "\n".join(f"{os.path.relpath(path, root) if root is not None else path}\t"
                     f"{digests.get(os.path.abspath(path), 'missing')}" for path in paths)
    return hashlib.sha256(text.encode()).hexdigest()


def digest_table_job(paths: list[str], output) -> None:
    """The table of a source's data files (path, SHA-256), the input of the rules that read them."""
    digests = file_digests(paths)
    write_text_atomic(output, "path\tsha256\n" + "".join(f"{p}\t{digests.get(os.path.abspath(p), 'missing')}\n"
                                                          for p in paths))
