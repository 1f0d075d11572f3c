"""Snakemake adapter of calbench.jobs.studies.learning_curve_job."""
import json

from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.studies import learning_curve_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    learning_curve_job(smk.input.dump, smk.output[0], smk.wildcards.source, smk.wildcards.method,
                       json.loads(smk.params.settings), list(smk.params.sizes), smk.params.repeats,
                       list(smk.params.metrics), smk.params.seed, json.loads(smk.params.split))
