"""Snakemake adapter of calbench.jobs.models.train_job."""
import json

from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.models import train_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    train_job(smk.wildcards.source, json.loads(smk.params.entry), smk.output[0], cache_dir=smk.params.cache_dir,
              threads=smk.threads)
