"""Snakemake adapter of calbench.jobs.evaluate.evaluate_job, its arguments built as python -m calbench evaluate
builds them (evaluate_arguments)."""
from calbench.jobs.evaluate import evaluate_arguments, evaluate_job
from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    evaluate_job(**evaluate_arguments(smk.config, smk.wildcards.source, smk.wildcards.method, int(smk.wildcards.seed)))
