"""The decode budget: every byte that decoding a file materialises beyond its own tensors, counted before it is
allocated against a budget fixed by the file's size (docs/saved_calibrators.md, "Bounded memory and time").

What is charged: each float32 tensor widened to float64 (once per tensor: every reference to it shares the copy),
each range check of a fitted array (per reference: a file may name one tensor many times), what each class's
``_set_state`` rebuilds (LECE's neighbour pool and the replay of its derivation, the isotonic knots' checks), and
the probe's input and working arrays (its rows × the number of classes and embedding width × the calibrators of
the file). The bytes charged bound the work done too, since every charged byte is written or read once. A file
whose charges exceed the budget is refused before the allocation that would exceed it.
"""

from __future__ import annotations

from pathlib import Path

from calbench.persist.format import CalibratorFileError

#: The budget: this many bytes for any file, plus this many per byte of the file.
BUDGET_BASE = 16 * 2**20
BUDGET_PER_BYTE = 16
#: The bound on the memory traced while a file loads (tensors read, the header's JSON, the budget, the calibrator's
#: objects): what docs/saved_calibrators.md states and tests/contract/test_decode_budget.py measures with tracemalloc.
PEAK_BASE = 32 * 2**20
PEAK_PER_BYTE = 40
#: Rows of the one probe input of a file, and the float64 arrays of the probe's shape that the probe's computation
#: may hold besides one per calibrator of the file (softmaxes, a chain's intermediate scores).
PROBE_ROWS = 4
PROBE_COPIES = 16


class DecodeBudget:
    """The bytes decoding ``path`` (of ``size`` bytes) may still materialise."""

    def __init__(self, path: Path, size: int):
        self.path, self.size = path, int(size)
        self.limit = BUDGET_BASE + BUDGET_PER_BYTE * self.size
        self.used = 0

    def charge(self, nbytes: int, what: str, where: str) -> None:
        """Count ``nbytes`` for ``what`` at ``where``; refuse the file when the total exceeds the budget."""
        self.used += max(int(nbytes), 0)
        if self.used > self.limit:
            raise CalibratorFileError(
                f"{self.path}: {where}: {what} would bring the bytes materialised while decoding to "
                f"{self.used:,}, beyond the decode budget of {self.limit:,} bytes ({BUDGET_BASE // 2**20} MiB + "
                f"{BUDGET_PER_BYTE} x the file's {self.size:,} bytes); a file written by calbench.save stays far "
                "within it, so this one is forged or damaged: refit and save the calibrator again")

    def probe_bytes(self, classes: int, width: int, calibrators: int) -> int:
        """Bytes of the probe of a file of ``calibrators`` calibrators of ``classes`` classes (and embedding
        ``width``): its input and the arrays of that shape its computation holds."""
        return PROBE_ROWS * 8 * (classes + width) * (PROBE_COPIES + calibrators)
