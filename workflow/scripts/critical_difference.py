"""Snakemake adapter of calbench.jobs.critical_difference.critical_difference_job."""
from calbench.jobs.critical_difference import critical_difference_job
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    critical_difference_job(spec=snakemake_spec(smk))
