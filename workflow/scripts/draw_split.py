"""Snakemake adapter of calbench.data.splits.write_test_index (a pooled source's split for one seed)."""
import json

from calbench.data.splits import write_test_index
from calbench.jobs.logs import job_logging, snakemake_log

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    write_test_index(smk.input.dump, int(smk.wildcards.seed), json.loads(smk.params.split), smk.output[0])
