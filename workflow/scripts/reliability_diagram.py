"""Snakemake adapter of calbench.jobs.reliability.reliability_job."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.reliability import reliability_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
seeds = list(smk.params.seeds)
files = list(smk.input.calibrated)  # method-major: each method's file of every seed
calibrated = {m: files[i * len(seeds):(i + 1) * len(seeds)] for i, m in enumerate(smk.params.methods)}
with job_logging(snakemake_log(smk)):
    reliability_job(calibrated, smk.output.figure, smk.output.table, smk.wildcards.target, smk.wildcards.source, seeds,
                    smk.params.bins, smk.params.scheme, smk.params.max_classes, smk.params.axis, smk.params.class_names)
