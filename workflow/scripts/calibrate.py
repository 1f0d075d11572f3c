"""Snakemake adapter of calbench.jobs.calibrate.calibrate_job (outside Snakemake: python -m calbench calibrate)."""
import json

import numpy as np

from calbench.jobs.calibrate import calibrate_job
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.parallel import share_cores

smk = snakemake  # noqa: F821 (injected by Snakemake)
share_cores(smk.threads)  # fold workers and BLAS on exactly the granted cores (docs/operations.md)
test_index = np.load(smk.input.split[0]) if smk.input.split else None  # pooled sources: the drawn split
with job_logging(snakemake_log(smk)):
    calibrate_job(smk.input.dump, smk.output.calibrated, smk.wildcards.method, json.loads(smk.params.settings),
                  int(smk.wildcards.seed), json.loads(smk.params.split), calibrator_output=smk.output.calibrator,
                  input_kind=smk.params.scores_kind, test_index=test_index,
                  perturbed_cal=smk.input.perturbed[0] if smk.input.perturbed else None)
