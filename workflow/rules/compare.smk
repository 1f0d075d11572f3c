# Our aggregated results beside a paper's published table (config key `paper_comparison`).
# lint accepted (Mixed rules and functions in same snakefile): a rule file's own helpers live beside its rules
# (common.smk holds only those several rule files share), so that each file reads as one stage
from calbench.jobs import paths

PAPER_COMPARISON = config.get("paper_comparison")  # None: no comparison; its source is checked by calbench.config.load


def paper_comparison_outputs():
    return [paths.PAPER_COMPARISON] if PAPER_COMPARISON else []


def paper_comparison_dump(wildcards):
    return paths.DUMP.format(source=PAPER_COMPARISON["source"])


def paper_comparison_seeds(wildcards):
    return source_seeds(PAPER_COMPARISON["source"])


localrules:
    paper_comparison,


rule paper_comparison:
    input:
        long=paths.METRICS_LONG,
        dump=paper_comparison_dump,
        code=script_code("paper_comparison"),
    output:
        paths.PAPER_COMPARISON,
    params:
        table=section_value(PAPER_COMPARISON, "table"),
        source=section_value(PAPER_COMPARISON, "source"),
        seeds=paper_comparison_seeds,
    log:
        "logs/paper_comparison.log",
    conda:
        "../../envs/calbench.yaml"
    script:
        "../scripts/paper_comparison.py"
