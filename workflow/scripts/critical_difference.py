"""Snakemake adapter of calbench.jobs.critical_difference.critical_difference_job."""
from calbench.jobs.critical_difference import critical_difference_job
from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    critical_difference_job(smk.input.long, smk.input.intervals, dict(zip(smk.params.metrics, smk.output.figures)),
                            smk.output.table, smk.output.csv, smk.params.test, smk.params.alpha,
                            smk.params.friedman_alpha)
