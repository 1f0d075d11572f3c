"""Snakemake adapter of calbench.jobs.ood.ood_report_job (docs/shift.md)."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.ood import ood_report_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    ood_report_job({tuple(key): path for key, path in zip(smk.params.jobs, smk.input.records)}, smk.output.table,
                   {s: (png, csv) for s, png, csv in zip(smk.params.sources, smk.output.figures, smk.output.csv)},
                   list(smk.params.methods))
