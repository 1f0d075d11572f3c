"""Snakemake adapter of calbench.jobs.model_shifts.dump_model_shifts_job (docs/shift.md): a train/pretrained source's
outputs on corrupted copies of its held-out images."""
import json

from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.model_shifts import dump_model_shifts_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_model_shifts_job(smk.wildcards.source, json.loads(smk.params.entry), smk.output[0], smk.input.weights or None,
                          cache_dir=smk.params.cache_dir, threads=smk.threads)
