"""Snakemake adapter of calbench.jobs.studies.learning_curve_summary_job."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec
from calbench.jobs.studies import learning_curve_summary_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    learning_curve_summary_job(spec=snakemake_spec(smk))
