"""Snakemake adapter of calbench.jobs.perturbed_cal.dump_perturbed_cal_job (docs/shift.md): the model's outputs on
the calibration images perturbed at increasing strengths (Tomani et al. 2021; levels and clipping: the config key
perturbed_cal), read by the methods whose ``needs`` name perturbed_cal."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.perturbed_cal import dump_perturbed_cal_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_perturbed_cal_job(spec=snakemake_spec(smk))
