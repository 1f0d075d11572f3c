"""Snakemake adapter of calbench.jobs.tables.write_paper_comparison."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec
from calbench.jobs.tables import write_paper_comparison

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    write_paper_comparison(spec=snakemake_spec(smk))
