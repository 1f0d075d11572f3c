"""Snakemake adapter of calbench.report.reliability.reliability_job."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.report.reliability import reliability_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    reliability_job(dict(zip(smk.params.methods, smk.input.calibrated)), smk.output.figure, smk.output.table,
                    smk.wildcards.target, smk.wildcards.source, smk.params.bins, smk.params.scheme,
                    smk.params.max_classes)
