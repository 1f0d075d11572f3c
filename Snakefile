# calbench: post-hoc calibration benchmark. See README.md; every config key: config/README.md.
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")


# The default config applies only when no --configfile is given: a user's config stands alone
# (Snakemake would otherwise merge it into the default's sources, figures and studies).
if not workflow.overwrite_configfiles:
    if not Path("config/config.yaml").is_file():
        raise WorkflowError(
            "calbench: no config: pass your config file (snakemake --configfile my.yaml, or "
            "calbench report my.yaml for the report); config/config.yaml is the default run's"
        )

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/sources.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/shift.smk"
include: "workflow/rules/label_shift.smk"
include: "workflow/rules/perturbed_cal.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/studies.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/runtime.smk"


wildcard_constraints:
    source=_alternatives(SOURCES),
    method=_alternatives(config["methods"]),
    seed=r"\d+",


# The local job runner (calbench.jobs.runner): the calibrate and evaluate jobs of a local run run in children forked
# from one process that has imported calbench once, instead of each paying Python's and numba's start-up.
from calbench.jobs import runner


onstart:
    if runner.enabled(workflow.local_exec):
        runner.start()


onsuccess:
    runner.stop()


onerror:
    runner.stop()


rule all:
    default_target: True
    input:
        table_files(),
        paths.RUNTIME,
        figure_files(),
        study_files(),
        paper_comparison_outputs(),
        shift_outputs(),
        label_shift_outputs(),
