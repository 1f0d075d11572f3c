"""The digest table of a source's data files (rule source_digest): the input through which the jobs that read an
import's files or a model's local weights see them, so that a file replaced with other content reruns them whatever
its modification time, and a touched one nothing (:mod:`calbench.data.digests`, docs/operations.md)."""

from __future__ import annotations

from dataclasses import dataclass

from calbench.data.entry import Source
from calbench.jobs import paths
from calbench.jobs.spec import JobSpec, outfile, param


@dataclass(frozen=True, kw_only=True)
class DigestSpec(JobSpec):
    """``files``: the files the source's entry names (:func:`calbench.data.inputs.source_files`); ``content``: their
    paths' and contents' digest, computed when the spec is built (when the DAG is), the setting that reruns the job."""

    source: str
    files: list = param()
    content: str = param()
    table: str = outfile()


def spec(config: dict, *, source: str) -> DigestSpec:
    from calbench.data.digests import content_digest
    from calbench.data.inputs import source_files

    files = sorted(source_files(dict(Source.of(config, source).entry)))  # reordering the config reruns nothing
    return DigestSpec(source=source, files=files, content=content_digest(files),
                      table=paths.SOURCE_DIGEST.format(source=source))


def source_digest_job(*, spec: DigestSpec) -> None:
    """Write the table (path, SHA-256) of the source's data files."""
    from calbench.data.digests import digest_table_job

    digest_table_job(spec.files, spec.table)
