"""Snakemake adapter of calbench.models.jobs.dump_job."""
from calbench.models.jobs import dump_job
from calbench.pipeline import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_job(smk.wildcards.source, dict(smk.params.entry), smk.output[0], smk.input.weights or None,
             smk.params.cache_dir, smk.threads)
