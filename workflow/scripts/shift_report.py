"""Snakemake adapter of calbench.jobs.shift.shift_report_job."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.shift import shift_report_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    shift_report_job(spec=snakemake_spec(smk))
