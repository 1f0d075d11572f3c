"""Snakemake adapter of the out-of-distribution dump jobs (docs/shift.md): calbench.jobs.ood_model.dump_model_ood_job
for train/pretrained sources (rule dump_ood_model), calbench.jobs.ood.dump_source_ood_job for import sources (rule
dump_ood_source)."""
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.spec import snakemake_spec

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    if smk.rule == "dump_ood_model":
        from calbench.jobs.ood_model import dump_model_ood_job

        dump_model_ood_job(spec=snakemake_spec(smk))
    else:
        from calbench.jobs.ood import dump_source_ood_job

        dump_source_ood_job(spec=snakemake_spec(smk))
