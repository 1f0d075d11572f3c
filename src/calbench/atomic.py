"""Atomic file writes: a killed job never leaves a half-written result behind."""

from __future__ import annotations

import contextlib
import glob
import os
import socket
import tempfile
from pathlib import Path

_UMASK = os.umask(0)
os.umask(_UMASK)


def _writer() -> str:
    """This writer's mark in its temporary files' names: the host and the process id."""
    return f"{socket.gethostname().replace('.', '_')}-{os.getpid()}"


def _writer_gone(name: str, prefix: str) -> bool:
    """Whether the writer of temporary file ``name`` (``{prefix}{host}-{pid}.{random}.tmp``) is gone: a process of
    this host that no longer runs. A writer on another host, or a name of another form, is never taken for gone."""
    host, _, pid = name[len(prefix):].partition(".")[0].rpartition("-")
    if host != _writer().rpartition("-")[0] or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it runs, as another user
        return False
    return False


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    Temporary files of ``path`` left by an earlier writer that was killed (SIGKILL skips the clean-up) are removed
    first, but only where their writer is gone (its host and process id are in the name), so that writers of one
    path at once (two ``calbench fit -o``) never remove each other's files; the last rename wins.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}."
    for stale in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        if _writer_gone(stale.name, prefix):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{prefix}{_writer()}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; results are ordinary files
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text_atomic(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
