"""Snakemake adapter of calbench.jobs.models.train_job."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.models import train_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    train_job(spec=snakemake_spec(smk))
