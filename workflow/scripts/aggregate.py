"""Snakemake adapter of calbench.jobs.tables.aggregate_job."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec
from calbench.jobs.tables import aggregate_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    aggregate_job(spec=snakemake_spec(smk))
