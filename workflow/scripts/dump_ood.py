"""Snakemake adapter of the out-of-distribution dump jobs (docs/shift.md): calbench.jobs.ood_model.dump_model_ood_job
for train/pretrained sources, calbench.jobs.ood.dump_source_ood_job for import sources."""
import json

from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
entry = json.loads(smk.params.entry)
with job_logging(snakemake_log(smk)):
    if entry["type"] in ("train", "pretrained"):
        from calbench.jobs.ood_model import dump_model_ood_job

        dump_model_ood_job(smk.wildcards.source, entry, smk.output[0], smk.input.weights or None,
                           cache_dir=smk.params.cache_dir, threads=smk.threads)
    else:
        from calbench.jobs.ood import dump_source_ood_job

        dump_source_ood_job(smk.wildcards.source, entry, smk.input.dump, smk.output[0])
