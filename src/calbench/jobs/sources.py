"""The dump job of a data source (synthetic, imported, downloaded); model sources: :mod:`calbench.jobs.models`."""

from __future__ import annotations

import logging

log = logging.getLogger("calbench")


def dump_source_job(source: str, entry: dict, seeds, output, cache_dir="resources/downloads") -> None:
    """Build the HDF5 dump of one data source."""
    from calbench.data import sources

    log.info("building dump of source %s (%s)", source, entry.get("type"))
    sources.make_dump(source, entry, seeds, output, cache_dir)
