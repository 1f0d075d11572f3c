"""Snakemake adapter of calbench.jobs.model_shifts.dump_model_shifts_job (docs/shift.md): a train/pretrained source's
outputs on corrupted copies of its held-out images."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.model_shifts import dump_model_shifts_job
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_model_shifts_job(spec=snakemake_spec(smk))
