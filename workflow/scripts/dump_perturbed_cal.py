"""Snakemake adapter of calbench.jobs.perturbed_cal.dump_perturbed_cal_job (docs/shift.md), its arguments from
calbench.jobs.arguments: the model's outputs on the calibration images perturbed at increasing strengths (Tomani et
al. 2021), read by the methods that need ``perturbed_cal``."""
from calbench.jobs.arguments import perturbed_cal_arguments
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.perturbed_cal import dump_perturbed_cal_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_perturbed_cal_job(**perturbed_cal_arguments(smk.config, smk.wildcards.source, int(smk.wildcards.seed)),
                           weights=smk.input.weights or None, threads=smk.threads)
