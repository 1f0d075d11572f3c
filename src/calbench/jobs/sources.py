"""The dump job of a data source (synthetic, imported, downloaded); model sources: :mod:`calbench.jobs.model_dump`."""

from __future__ import annotations

import logging

import calbench
from calbench.jobs import paths

log = logging.getLogger("calbench")


#: The keys of a source entry that no dump, training or calibration reads: adding a shifted or out-of-distribution
#: test set, a label shift or a seed reruns none of them (docs/shift.md, docs/label_shift.md; the dump of a data
#: source takes its seeds as an argument of their own).
LATER_KEYS = ("shifts", "ood", "label_shift", "seeds")


def dump_entry(config: dict, source: str) -> dict:
    """The source's entry as its dump, training and perturbed-calibration jobs read it (and store it in their
    files): without :data:`LATER_KEYS`, in the params' form (:func:`calbench.jobs.paths.as_params`)."""
    return paths.as_params({k: v for k, v in config["sources"][source].items() if k not in LATER_KEYS})


def dump_source_arguments(config: dict, source: str) -> dict:
    """The arguments of :func:`dump_source_job` (rule dump_source, ``calbench dump``) from the resolved config."""
    return {"source": source, "entry": dump_entry(config, source), "seeds": list(config["sources"][source]["seeds"]),
            "output": paths.DUMP.format(source=source), "cache_dir": config["downloads_dir"]}


def dump_source_job(source: str, entry: dict, seeds, output, cache_dir) -> None:
    """Build the HDF5 dump of one data source; ``cache_dir``: the config's ``downloads_dir``."""
    from calbench.data import sources

    log.info("building dump of source %s (%s)", source, entry["type"])
    sources.make_dump(source, entry, seeds, output, cache_dir)


def dump_source_shifts_job(source: str, entry: dict, dump, output, cache_dir) -> None:
    """Write the shifted test sets of an import/download source (its ``shifts`` files, docs/shift.md) to ``output``
    (root attribute ``rows_of: own``): each is evaluated in full, or, where it aligns its rows with a pooled
    source's pool (field ``pool_rows``), on each seed's test rows. Their class count must be the dump's."""
    from calbench.data import sources, store

    pool = store.read_group(dump, "all", ["labels"])["labels"] if entry.get("split") else None
    groups = sources.shift_groups(source, entry, cache_dir, pool)
    classes = int(store.read_attrs(dump)["num_classes"])
    for name, arrays in groups.items():
        if arrays["logits"].shape[1] != classes:
            raise ValueError(f"sources.{source}.shifts: {name} has {arrays['logits'].shape[1]} classes, but {dump} "
                             f"has {classes}; a shifted test set holds the same classifier's outputs")
    store.write_dump(output, groups, {"source": entry, "source_name": source, "rows_of": "own",
                                      "calbench_version": calbench.__version__})
