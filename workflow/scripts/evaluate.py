"""Snakemake adapter of calbench.jobs.evaluate.evaluate_job, its arguments from calbench.jobs.arguments (outside
Snakemake: python -m calbench evaluate)."""
from calbench.jobs.arguments import evaluate_arguments
from calbench.jobs.evaluate import evaluate_job
from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    evaluate_job(**evaluate_arguments(smk.config, smk.wildcards.source, smk.wildcards.method, int(smk.wildcards.seed)))
