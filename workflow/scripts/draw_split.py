"""Snakemake adapter of calbench.jobs.sources.draw_split_job (a pooled source's split for one seed), with the spec
python -m calbench job calibrate builds where the split is missing (calbench.jobs.sources.split_spec)."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.sources import draw_split_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    draw_split_job(spec=snakemake_spec(smk))
