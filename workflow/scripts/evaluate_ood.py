"""Snakemake adapter of calbench.jobs.ood.evaluate_ood_job (docs/shift.md)."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.ood import evaluate_ood_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    evaluate_ood_job(spec=snakemake_spec(smk))
