"""Snakemake adapter of calbench.jobs.image_manifest.image_manifest_job."""
from calbench.jobs.image_manifest import image_manifest_job
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    image_manifest_job(spec=snakemake_spec(smk))
