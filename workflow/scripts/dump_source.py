"""Snakemake adapter of calbench.pipeline.dump_job (debug outside Snakemake: python -m calbench dump --help)."""
import json

from calbench.pipeline import dump_job, job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_job(smk.wildcards.source, json.loads(smk.params.entry), list(smk.params.seeds), smk.output[0], smk.params.cache_dir)
