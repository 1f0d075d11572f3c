"""Snakemake adapter of calbench.jobs.sources.dump_source_shifts_job (docs/shift.md): an import/download source's
shifted test sets, read from their files."""
import json

from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.sources import dump_source_shifts_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_source_shifts_job(smk.wildcards.source, json.loads(smk.params.entry), smk.input.dump, smk.output[0],
                           smk.params.cache_dir)
