"""Snakemake adapter of calbench.pipeline.aggregate_job (debug outside Snakemake: python -m calbench aggregate --help)."""
from pathlib import Path

from calbench.pipeline import aggregate_job, job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    aggregate_job(list(smk.input), Path(smk.output.long).parent, list(smk.params.metrics), list(smk.params.methods))
