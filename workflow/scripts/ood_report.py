"""Snakemake adapter of calbench.jobs.ood.ood_report_job (docs/shift.md)."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.ood import ood_report_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    ood_report_job(spec=snakemake_spec(smk))
