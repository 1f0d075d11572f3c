"""Snakemake adapter of calbench.data.digests.digest_table_job."""
from calbench.data.digests import digest_table_job
from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    digest_table_job(list(smk.params.files), smk.output[0])
