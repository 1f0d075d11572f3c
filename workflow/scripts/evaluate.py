"""Snakemake adapter of calbench.jobs.evaluate.evaluate_job, its arguments built as python -m calbench evaluate
builds them (evaluate_arguments); run by the run's local job runner where it has one (calbench.jobs.runner)."""
from job_runner.client import ran_by_runner

smk = snakemake  # noqa: F821 (injected by Snakemake)
if not ran_by_runner(smk, __file__):
    from calbench.jobs.evaluate import evaluate_arguments, evaluate_job
    from calbench.jobs.logs import job_logging, snakemake_log

    with job_logging(snakemake_log(smk)):
        evaluate_job(**evaluate_arguments(smk.config, smk.wildcards.source, smk.wildcards.method,
                                          int(smk.wildcards.seed)))
