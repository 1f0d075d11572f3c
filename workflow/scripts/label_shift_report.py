"""Snakemake adapter of calbench.jobs.label_shift.label_shift_report_job."""
from calbench.jobs.label_shift import label_shift_report_job
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    label_shift_report_job(spec=snakemake_spec(smk))
