"""Snakemake adapter of calbench.jobs.evaluate.evaluate_job, with the spec python -m calbench job evaluate builds
(calbench.jobs.evaluate.spec); run by the rule's shell command (job_runner/client.py), in the run's local job
runner where it has one (calbench.jobs.runner, calbench.jobs.script_job)."""
from calbench.jobs.evaluate import evaluate_job
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (a calbench.jobs.script_job.ScriptJob)
with job_logging(snakemake_log(smk)):
    evaluate_job(spec=snakemake_spec(smk))
