"""Snakemake adapter of calbench.jobs.sources.dump_source_job, its arguments built as python -m calbench dump builds
them (dump_source_arguments)."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.sources import dump_source_arguments, dump_source_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_source_job(**dump_source_arguments(smk.config, smk.wildcards.source))
