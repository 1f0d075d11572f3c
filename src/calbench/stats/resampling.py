"""What one resample draws: the units that were sampled, as row counts shared by every method and metric.

A source's seeds test on rows of some group of its dump (docs/architecture.md §3): the ``all`` pool that every seed
re-splits (a row is in the test split of several seeds), the fixed ``test`` group (every seed tests on the same
rows) or a ``seed{s}/test`` group drawn for that seed alone. The rows are the units sampled from the population, so
a resample draws *rows of the group*, not rows of each seed: one multinomial draw of the group's N rows (N draws
with replacement; Efron & Tibshirani 1993, §6.2) gives every row a count, and each seed that tests on the row reads
that same count. A seed's metric on the resample is its test rows weighted by their counts (a weighted mean divides
by the counts' sum, which varies around the seed's test size). The draw depends on the group's name and size only,
so that a job that sees one seed (the evaluate job's label-shifted sets,
:func:`calbench.data.label_shift.redraw_weights`) reads the same counts as the tables (:func:`unit_counts`). Seeds
whose test rows overlap then vary together as their estimates do, and the mean over seeds gets the variance it has;
resampling each seed's rows on its own (the scheme of seeds on disjoint groups, which this reduces to there) treats
overlapping seeds as independent evidence and under-covers (tests/unit/test_stats_coverage.py).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from calbench.metrics.bootstrap import counts_of

#: Resamples of every interval and test calbench reports: the tables' marks, ``intervals.csv``, ``calbench
#: recommend``, the shift and label-shift tables. With R = 1,000 the smallest p-value a count of resamples can show
#: is 1/(R + 1) < 0.001, and Holm's procedure can still reject at α = 0.05 with up to 50 comparisons.
RESAMPLES = 1000
#: Elements of the row counts [R, |U|] held at once; larger groups are resampled in blocks of resamples.
COUNTS_BUDGET = 2**24


@dataclass(frozen=True)
class SeedRows:
    """The test rows of one seed as units: ``ids`` (int64) index the rows of the dump group ``group`` (``all``,
    ``test``, ``seed{s}/test``; a shifted copy of a row keeps the row's id and group) of ``size`` rows (None: not
    known, e.g. outputs of earlier versions; then the largest id + 1 of the seeds of the group)."""

    group: str
    ids: np.ndarray
    size: int | None = None


@functools.lru_cache(maxsize=4)
def _kept_counts(n: int, resamples: int, key: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """:func:`row_counts` of counts that fit :data:`COUNTS_BUDGET`, kept for the next call with the same
    arguments (``calbench recommend --all-metrics`` resamples one source metric after metric)."""
    return tuple(_draw_counts(n, resamples, key))


def row_counts(n: int, resamples: int, key: Sequence[int]) -> list[np.ndarray]:
    """Row counts of ``resamples`` draws of ``n`` rows with replacement, in blocks ``[r, n]`` of at most
    :data:`COUNTS_BUDGET` elements, drawn from a generator seeded by ``key``."""
    if n * resamples <= COUNTS_BUDGET:
        return list(_kept_counts(n, resamples, tuple(key)))
    return _draw_counts(n, resamples, key)


def _draw_counts(n: int, resamples: int, key: Sequence[int]) -> list[np.ndarray]:
    rng = np.random.default_rng([7919, n, *key])
    block = max(1, COUNTS_BUDGET // max(n, 1))
    return [counts_of(rng.integers(n, size=(min(block, resamples - start), n)))
            for start in range(0, resamples, block)]


def unit_counts(unit: SeedRows, resamples: int) -> list[np.ndarray]:
    """Blocks ``[r, n]`` of the counts of ``unit``'s rows, in the order of its ids: its columns of the one draw of
    the group's ``unit.size`` rows (seeded by the group's name and size), whichever job reads them."""
    return [block[:, unit.ids] for block in row_counts(unit.size, resamples, (zlib.crc32(unit.group.encode()),))]


class Resampler:
    """The row counts of every seed of one source (module docstring): seeds whose test rows belong to the same
    group read their columns of one draw of the group's rows."""

    def __init__(self, units: Sequence[SeedRows | None], resamples: int):
        self.resamples = resamples
        sizes: dict[str, int] = {}
        for unit in filter(None, units):
            own = unit.size if unit.size is not None else int(unit.ids.max(initial=-1)) + 1
            sizes[unit.group] = max(sizes.get(unit.group, 0), own)
        self._units = [replace(unit, size=sizes[unit.group]) if unit is not None else None for unit in units]

    def counts(self, seed_index: int) -> list[np.ndarray]:
        """Blocks ``[r, n]`` of the counts of seed ``seed_index``'s test rows, in the order of its ids."""
        return unit_counts(self._units[seed_index], self.resamples)

    def shared(self) -> bool:
        """True where two seeds test on rows of one group (their counts are shared)."""
        groups = [unit.group for unit in self._units if unit is not None]
        return len(groups) != len(set(groups))


def seed_rows(outputs: dict, seed: int) -> SeedRows:
    """The units of a calibrate job's test outputs (``index``, ``rows_of`` and ``group_rows``,
    :func:`calbench.data.store.read_calibrated`); outputs without ``rows_of`` (files of earlier versions) count as
    the seed's own rows."""
    group = outputs.get("rows_of")
    ids = np.asarray(outputs["index"], dtype=np.int64)
    if group is None:  # a group of the seed's rows alone: their positions, whatever the index holds
        return SeedRows(f"seed{seed}/own", np.arange(ids.size), ids.size)
    size = outputs.get("group_rows")
    return SeedRows(str(group), ids, None if size is None else int(size))


def seed_picks(seeds: Sequence[int], resamples: int) -> np.ndarray:
    """[R, S] the seeds drawn by the seed stage (indices into ``seeds``), the same for every method."""
    return np.random.default_rng([7919, len(seeds), *seeds]).integers(len(seeds), size=(resamples, len(seeds)))
