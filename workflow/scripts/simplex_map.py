"""Snakemake adapter of calbench.jobs.simplex.simplex_job."""
import json

from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.simplex import simplex_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    simplex_job(dict(zip(smk.params.methods, smk.input.calibrated)), smk.input.dump, smk.output[0],
                smk.wildcards.source, smk.params.seed, json.loads(smk.params.split), smk.params.divisions)
