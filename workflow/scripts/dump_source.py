"""Snakemake adapter of calbench.jobs.sources.dump_source_job, with the spec python -m calbench job dump builds
(calbench.jobs.sources.spec)."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.sources import dump_source_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_source_job(spec=snakemake_spec(smk))
