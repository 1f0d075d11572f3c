"""Snakemake adapter of calbench.jobs.calibrate.calibrate_job, with the spec python -m calbench job calibrate
builds (calbench.jobs.calibrate.spec); run by the rule's shell command (job_runner/client.py), in the run's local
job runner where it has one (calbench.jobs.runner, calbench.jobs.script_job)."""
from calbench.jobs.calibrate import calibrate_job
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec
from calbench.parallel import share_cores

smk = snakemake  # noqa: F821 (a calbench.jobs.script_job.ScriptJob)
share_cores(smk.threads)  # fold workers and BLAS on exactly the granted cores (docs/operations.md)
with job_logging(snakemake_log(smk)):
    calibrate_job(spec=snakemake_spec(smk))
