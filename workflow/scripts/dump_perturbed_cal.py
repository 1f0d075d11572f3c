"""Snakemake adapter of calbench.jobs.perturbed_cal.dump_perturbed_cal_job (docs/shift.md): the model's outputs on
the calibration images perturbed at increasing strengths (Tomani et al. 2021; levels and clipping: the config key
perturbed_cal), read by the methods whose ``needs`` name perturbed_cal."""
import json

from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.perturbed_cal import dump_perturbed_cal_job

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    dump_perturbed_cal_job(smk.wildcards.source, json.loads(smk.params.entry), smk.output[0],
                           int(smk.params.perturb["levels"]), smk.input.weights or None, seed=int(smk.wildcards.seed),
                           test_rows=smk.input.split[0] if smk.input.split else None,
                           clip=bool(smk.params.perturb["clip"]), cache_dir=smk.params.cache_dir, threads=smk.threads)
