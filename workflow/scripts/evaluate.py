"""Snakemake adapter of calbench.pipeline.evaluate_job (debug outside Snakemake: python -m calbench evaluate --help)."""
import json

from calbench.pipeline import evaluate_job, job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    evaluate_job(smk.input.calibrated, smk.input.dump, smk.output[0], list(smk.params.metrics),
                 smk.wildcards.source, smk.wildcards.method, int(smk.wildcards.seed), json.loads(smk.params.split),
                 smk.params.bootstrap)
