"""Snakemake adapter of calbench.jobs.calibrate.calibrate_job, its arguments from calbench.jobs.arguments (outside
Snakemake: python -m calbench calibrate)."""
from calbench.jobs.arguments import calibrate_arguments
from calbench.jobs.calibrate import calibrate_job
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.parallel import share_cores

smk = snakemake  # noqa: F821 (injected by Snakemake)
share_cores(smk.threads)  # fold workers and BLAS on exactly the granted cores (docs/operations.md)
with job_logging(snakemake_log(smk)):
    wildcards = smk.wildcards
    calibrate_job(**calibrate_arguments(smk.config, wildcards.source, wildcards.method, int(wildcards.seed)))
