# calbench: post-hoc calibration benchmark. See README.md; every config key: config/README.md.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/sources.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report_common.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/studies.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/runtime.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
        paper_comparison_outputs(),
