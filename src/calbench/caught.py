"""The warnings a job raises, recorded with its outputs so that they reach the tables, ``calbench recommend`` and
the report instead of staying in one job's log (docs/operations.md, "Warnings").

Lowest layer: the dump, calibrate and evaluate stages record with it.
"""

from __future__ import annotations

import warnings

#: Warnings about the software rather than the results (deprecations, imports, unclosed files): not recorded.
NOT_RECORDED = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ImportWarning, ResourceWarning)


class Recorder:
    """``with Recorder("calibrate") as caught: ...; caught.records()``: every warning raised inside, once per
    distinct (category, message), as ``{stage, category, message}``; on leaving, each recorded warning is shown
    again (so that the job's log still has it)."""

    def __init__(self, stage: str):
        self.stage = stage
        self._context = warnings.catch_warnings(record=True)
        self._caught: list = []

    def __enter__(self) -> Recorder:
        self._caught = self._context.__enter__()
        warnings.simplefilter("always")
        return self

    def _kept(self) -> list:
        seen, kept = set(), []
        for found in self._caught:
            key = (found.category.__name__, str(found.message))
            if not issubclass(found.category, NOT_RECORDED) and key not in seen:
                seen.add(key)
                kept.append(found)
        return kept

    def records(self) -> list[dict]:
        """The distinct warnings raised so far, in the order first raised."""
        return [{"stage": self.stage, "category": w.category.__name__, "message": str(w.message)}
                for w in self._kept()]

    def __exit__(self, *exc) -> None:
        kept = self._kept()
        self._context.__exit__(*exc)
        for w in kept:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
