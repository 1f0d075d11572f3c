"""Snakemake adapter of calbench.jobs.model_dump.dump_model_job."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.model_dump import dump_model_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_model_job(spec=snakemake_spec(smk))
