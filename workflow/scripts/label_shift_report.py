"""Snakemake adapter of calbench.jobs.label_shift.label_shift_report_job."""
from calbench.jobs.label_shift import label_shift_report_job
from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    label_shift_report_job(smk.input.long, list(smk.input.metrics), dict(zip(smk.params.metrics, smk.output.tables)),
                           smk.output.adapt, list(smk.params.methods))
