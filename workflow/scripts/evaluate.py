"""Snakemake adapter of calbench.jobs.evaluate.evaluate_job (outside Snakemake: python -m calbench evaluate)."""
import json

from calbench.jobs.evaluate import evaluate_job
from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    evaluate_job(smk.input.calibrated, smk.input.dump, smk.output[0], list(smk.params.metrics),
                 smk.wildcards.source, smk.wildcards.method, int(smk.wildcards.seed), json.loads(smk.params.split),
                 smk.params.bootstrap, shifts=smk.input.shifts[0] if smk.input.shifts else None,
                 calibrator=smk.input.calibrator[0] if smk.input.calibrator else None,
                 label_shift=json.loads(smk.params.label_shift))
