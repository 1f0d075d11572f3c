"""Snakemake adapter of calbench.jobs.image_manifest.image_manifest_job."""
from calbench.jobs.image_manifest import image_manifest_job
from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    image_manifest_job(smk.params.data_dir, list(smk.params.images), smk.output[0])
