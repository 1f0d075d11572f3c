"""File paths in messages: a relative path says which directory it was resolved against."""

from __future__ import annotations

import os
from pathlib import Path


def shown(path) -> str:
    """``path`` as the user wrote it, followed for a relative path by the absolute path it names here
    (``data/x.npy (resolved to /home/me/data/x.npy)``): a run started from another folder then shows where
    calbench looked. Symbolic links are not followed (a loop of them is itself the problem to show)."""
    path = Path(path)
    return str(path) if path.is_absolute() else f"{path} (resolved to {os.path.abspath(path)})"
