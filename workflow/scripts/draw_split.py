"""Snakemake adapter of calbench.data.splits.write_test_index (a pooled source's split for one seed), its arguments
built as python -m calbench calibrate builds them where the split is missing (draw_split_arguments)."""
from calbench.data.splits import write_test_index
from calbench.jobs.logs import job_logging, snakemake_log
from calbench.jobs.paths import draw_split_arguments

smk = snakemake  # noqa: F821 (injected by Snakemake)
with job_logging(snakemake_log(smk)):
    write_test_index(**draw_split_arguments(smk.config, smk.wildcards.source, int(smk.wildcards.seed)))
