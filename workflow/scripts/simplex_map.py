"""Snakemake adapter of calbench.jobs.simplex.simplex_job."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.simplex import simplex_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    simplex_job(spec=snakemake_spec(smk))
