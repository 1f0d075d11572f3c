"""The jobs of a data source (synthetic, imported, downloaded): its dump, a pooled source's split per seed, its shifted
test sets; model sources: :mod:`calbench.jobs.model_dump`."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import calbench
from calbench.data.entry import Source
from calbench.jobs import paths
from calbench.jobs.spec import JobSpec, as_params, dump_entry, infile, job_entry, outfile, param, source_data

log = logging.getLogger("calbench")


@dataclass(frozen=True, kw_only=True)
class DumpSpec(JobSpec):
    """The dump of one data source (rule dump_source, ``calbench job dump``)."""

    source: str
    entry: dict = param()
    seeds: list = param()
    cache_dir: str
    data: list = infile()
    dump: str = outfile()


def spec(config: dict, *, source: str) -> DumpSpec:
    entry = Source.of(config, source)
    return DumpSpec(source=source, entry=dump_entry(entry), seeds=entry.seeds, cache_dir=config["downloads_dir"],
                    data=source_data(entry), dump=paths.DUMP.format(source=source))


def dump_source_job(*, spec: DumpSpec) -> None:
    """Build the HDF5 dump of one data source; ``cache_dir``: the config's ``downloads_dir``."""
    from calbench.data import sources

    log.info("building dump of source %s (%s)", spec.source, spec.entry["type"])
    sources.make_dump(spec.source, spec.entry, spec.seeds, spec.dump, spec.cache_dir)


@dataclass(frozen=True, kw_only=True)
class SplitSpec(JobSpec):
    """A pooled source's calibration/test split for one seed (rule draw_split)."""

    source: str
    seed: int
    split: dict = param()
    dump: str = infile()
    test_rows: str = outfile()


def split_spec(config: dict, *, source: str, seed) -> SplitSpec:
    entry = Source.of(config, source)
    return SplitSpec(source=source, seed=int(seed), split=as_params(entry.split), dump=paths.DUMP.format(source=source),
                     test_rows=paths.SPLIT.format(source=source, seed=seed))


def draw_split_job(*, spec: SplitSpec) -> None:
    """Draw the seed's test rows of the pooled source (:func:`calbench.data.splits.write_test_index`)."""
    from calbench.data.splits import write_test_index

    write_test_index(spec.dump, spec.seed, spec.split, spec.test_rows)


@dataclass(frozen=True, kw_only=True)
class ShiftsSpec(JobSpec):
    """The shifted test sets of an import or download source, from their files (rule dump_shifts_source)."""

    source: str
    entry: dict = param()
    cache_dir: str
    dump: str = infile()
    data: list = infile()
    shifts: str = outfile()


def shifts_spec(config: dict, *, source: str) -> ShiftsSpec:
    from calbench.data.inputs import shift_files

    entry = Source.of(config, source)
    return ShiftsSpec(source=source, entry=job_entry(entry, "ood", "label_shift"),
                      cache_dir=config["downloads_dir"], dump=paths.DUMP.format(source=source),
                      data=shift_files(dict(entry.entry)), shifts=paths.SHIFTS.format(source=source))


def dump_source_shifts_job(*, spec: ShiftsSpec) -> None:
    """Write the shifted test sets of an import/download source (its ``shifts`` files, docs/shift.md) to ``output``
    (root attribute ``rows_of: own``): each is evaluated in full, or, where it aligns its rows with a pooled
    source's pool (field ``pool_rows``), on each seed's test rows. Their class count must be the dump's."""
    from calbench.data import sources, store

    source, entry, dump, output = spec.source, spec.entry, spec.dump, spec.shifts
    pool = store.read_group(dump, "all", ["labels"])["labels"] if entry.get("split") else None
    groups = sources.shift_groups(source, entry, spec.cache_dir, pool)
    classes = int(store.read_attrs(dump)["num_classes"])
    for name, arrays in groups.items():
        if arrays["logits"].shape[1] != classes:
            raise ValueError(f"sources.{source}.shifts: {name} has {arrays['logits'].shape[1]} classes, but {dump} "
                             f"has {classes}; a shifted test set holds the same classifier's outputs")
    store.write_dump(output, groups, {"source": entry, "source_name": source, "rows_of": "own",
                                      "calbench_version": calbench.__version__})
