"""Fetch a file from a URL, check its sha256, and cache it under ``resources/``.

``file://`` URLs work too (tests point them at ../shared/data). The file is written to a temporary
name and renamed only after the checksum matched, so a broken or tampered download never lands in
the cache.
"""

from __future__ import annotations

import hashlib
import shutil
import urllib.request
from pathlib import Path

from calbench.atomic import atomic_path


def sha256_of(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(url: str, sha256: str, cache_dir, timeout: float = 60.0) -> Path:
    """Return the cached path of ``url`` in ``cache_dir`` (the config's ``downloads_dir``), downloading it first if
    needed."""
    if not isinstance(sha256, str) or len(sha256) != 64:
        raise ValueError(f"{url}: sha256 must be a 64-character hex digest, got {sha256!r}")
    name = url.rstrip("/").rsplit("/", 1)[-1] or "download"
    target = Path(cache_dir) / f"{sha256[:16]}-{name}"
    if target.exists() and sha256_of(target) == sha256:
        return target
    with atomic_path(target) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as out:
                shutil.copyfileobj(response, out)
        except OSError as err:
            raise OSError(f"{url}: download failed ({err}); without network, place the file at {target} "
                          "(its sha256 is checked) or use an `import` source with a local path") from None
        actual = sha256_of(tmp)
        if actual != sha256.lower():
            raise ValueError(f"{url}: sha256 mismatch: expected {sha256}, got {actual}; the file changed upstream "
                             "or the config's sha256 is wrong. Nothing was cached.")
    return target
