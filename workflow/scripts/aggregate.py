"""Snakemake adapter of calbench.jobs.tables.aggregate_job."""
from pathlib import Path

from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.tables import aggregate_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    aggregate_job(list(smk.input.metrics), list(smk.input.calibrated), Path(smk.output.long).parent,
                  list(smk.params.metrics), list(smk.params.methods))
