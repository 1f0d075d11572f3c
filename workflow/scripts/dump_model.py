"""Snakemake adapter of calbench.models.jobs.dump_job."""
import json

from calbench.models.jobs import dump_job
from calbench.pipeline import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_job(smk.wildcards.source, json.loads(smk.params.entry), smk.output[0], smk.input.weights or None,
             smk.params.cache_dir, smk.threads)
