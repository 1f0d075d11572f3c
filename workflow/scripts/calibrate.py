"""Snakemake adapter of calbench.jobs.calibrate.calibrate_job, its arguments built as python -m calbench calibrate
builds them (calibrate_arguments); run by the run's local job runner where it has one (calbench.jobs.runner)."""
from job_runner.client import ran_by_runner

smk = snakemake  # noqa: F821 (injected by Snakemake)
if not ran_by_runner(smk, __file__):
    from calbench.jobs.calibrate import calibrate_arguments, calibrate_job
    from calbench.jobs.logs import job_logging, snakemake_log
    from calbench.parallel import share_cores

    share_cores(smk.threads)  # fold workers and BLAS on exactly the granted cores (docs/operations.md)
    with job_logging(snakemake_log(smk)):
        wildcards = smk.wildcards
        calibrate_job(**calibrate_arguments(smk.config, wildcards.source, wildcards.method, int(wildcards.seed)))
