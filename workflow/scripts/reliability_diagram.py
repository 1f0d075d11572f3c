"""Snakemake adapter of calbench.jobs.figures.reliability_job."""
from calbench.jobs.figures import reliability_job
from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    reliability_job(dict(zip(smk.params.methods, smk.input.calibrated)), smk.output.figure, smk.output.table,
                    smk.wildcards.target, smk.wildcards.source, smk.params.bins, smk.params.scheme,
                    smk.params.max_classes)
