"""Snakemake adapter of calbench.jobs.tables.write_runtime_table."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec
from calbench.jobs.tables import write_runtime_table

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    write_runtime_table(spec=snakemake_spec(smk))
