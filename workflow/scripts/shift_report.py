"""Snakemake adapter of calbench.jobs.shift.shift_report_job."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.shift import shift_report_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    shift_report_job(smk.input.long, dict(zip(smk.params.metrics, smk.output.tables)), smk.output.ranking,
                     {s: (png, csv) for s, png, csv in zip(smk.params.sources, smk.output.figures, smk.output.csv)},
                     list(smk.params.metrics), list(smk.params.methods),
                     list(zip(smk.input.metrics, smk.input.calibrated, smk.input.calibrators, strict=True)),
                     dict(zip(smk.params.sources, smk.input.shifts, strict=True)), smk.output.intervals)
