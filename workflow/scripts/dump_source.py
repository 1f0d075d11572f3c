"""Snakemake adapter of calbench.jobs.sources.dump_source_job (outside Snakemake: python -m calbench dump)."""
import json

from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.sources import dump_source_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_source_job(smk.wildcards.source, json.loads(smk.params.entry), list(smk.params.seeds), smk.output[0],
                    smk.params.cache_dir)
