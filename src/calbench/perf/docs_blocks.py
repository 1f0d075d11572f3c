"""Generated blocks of the docs: text between ``<!-- begin generated: NAME -->`` and ``<!-- end generated -->``
is written by a script from recorded measurements, never by hand, so the prose around it stays stable.

:func:`replace_blocks` puts rendered blocks into a page; :func:`write_or_check` is the last step of every docs
generator (``scripts/docs_blocks.py``, ``scripts/edit_reruns.py``, ``scripts/choosing.py``): write the page, or with
``--check`` exit 1 when the committed page differs from what would be written.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

BEGIN = "<!-- begin generated: {name} -->"
END = "<!-- end generated -->"
_BLOCK = re.compile(r"<!-- begin generated: (?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- end generated -->", re.S)


def block_names(text: str) -> list[str]:
    """The names of the generated blocks of ``text``, in order."""
    return [m["name"] for m in _BLOCK.finditer(text)]


def replace_blocks(path: Path, text: str, rendered: dict[str, str]) -> str:
    """``text`` (the page at ``path``) with the body of each block named in ``rendered`` replaced by its value;
    other blocks are left as they are. A name of ``rendered`` that the page lacks is an error naming the page."""
    missing = sorted(set(rendered) - set(block_names(text)))
    if missing:
        raise ValueError(f"{path}: no generated block named {', '.join(missing)}; add the lines "
                         f"'{BEGIN.format(name=missing[0])}' and '{END}' where it belongs")

    def body(match: re.Match) -> str:
        name = match["name"]
        if name not in rendered:
            return match[0]
        return f"{BEGIN.format(name=name)}\n{rendered[name].rstrip()}\n{END}"

    return _BLOCK.sub(body, text)


def write_or_check(path: Path, new: str, check: bool, fix: str) -> int:
    """Write ``new`` to ``path``, or (``check``) return 1 with a message naming ``path`` and the command ``fix``
    that updates it when its text differs; 0 otherwise."""
    if not check:
        path.write_text(new)
        return 0
    if path.read_text() != new:
        print(f"{path}: generated text out of date; run {fix}", file=sys.stderr)
        return 1
    return 0
