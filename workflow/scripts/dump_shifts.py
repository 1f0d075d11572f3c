"""Snakemake adapter of the shift dump jobs (docs/shift.md): calbench.jobs.models.dump_model_shifts_job for
train/pretrained sources, calbench.jobs.sources.dump_source_shifts_job for import/download sources."""
import json

from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
entry = json.loads(smk.params.entry)
with job_logging(snakemake_log(smk)):
    if entry["type"] in ("train", "pretrained"):
        from calbench.jobs.models import dump_model_shifts_job

        dump_model_shifts_job(smk.wildcards.source, entry, smk.output[0], smk.input.weights or None,
                              cache_dir=smk.params.cache_dir, threads=smk.threads)
    else:
        from calbench.jobs.sources import dump_source_shifts_job

        dump_source_shifts_job(smk.wildcards.source, entry, smk.input.dump, smk.output[0], smk.params.cache_dir)
