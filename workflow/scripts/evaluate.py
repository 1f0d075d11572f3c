"""Snakemake adapter of calbench.jobs.evaluate.evaluate_job, with the spec python -m calbench job evaluate builds
(calbench.jobs.evaluate.spec); run by the run's local job runner where it has one (calbench.jobs.runner)."""
from job_runner.client import ran_by_runner

smk = snakemake  # noqa: F821 (injected by Snakemake)
if not ran_by_runner(smk, __file__):
    from calbench.jobs.evaluate import evaluate_job
    from calbench.jobs.logs import job_logging, snakemake_log
    from calbench.jobs.spec import snakemake_spec

    with job_logging(snakemake_log(smk)):
        evaluate_job(spec=snakemake_spec(smk))
