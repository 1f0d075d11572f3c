"""The shifted test sets a source entry names (docs/shift.md), for the jobs that dump and evaluate them.

A module of its own, importing nothing of calbench: the model jobs read it, and their code inputs
(:mod:`calbench.imports`) must not reach the method and metric registries through :mod:`calbench.config`.
"""

from __future__ import annotations


def shift_sets(entry: dict) -> list[str]:
    """The shifted test sets of a source entry, ``family/severity``, in config order."""
    return [f"{family}/{item['severity'] if isinstance(item, dict) else item}"
            for family, items in entry.get("shifts", {}).items() for item in items]
