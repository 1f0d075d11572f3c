"""Snakemake adapter of calbench.jobs.source_digest."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.source_digest import source_digest_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    source_digest_job(spec=snakemake_spec(smk))
