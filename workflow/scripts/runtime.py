"""Snakemake adapter of calbench.jobs.tables.write_runtime_table."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.tables import write_runtime_table

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    write_runtime_table([tuple(job) for job in smk.params.jobs], list(smk.input.calibrated),
                        list(smk.input.calibrate_benchmarks), list(smk.input.metrics), smk.output[0],
                        list(smk.params.methods))
