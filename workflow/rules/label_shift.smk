# Calibration and prior adaptation under label shift (docs/label_shift.md): the evaluate jobs of sources with
# `label_shift` draw the shifted sets and compute their metrics (rules/evaluate.smk, rules/shift.smk); this rule
# writes the per-strength tables from the long table and the metrics JSONs' bootstrap resamples.
# lint accepted (Mixed rules and functions in same snakefile): a rule file's own helpers live beside its rules
# (common.smk holds only those several rule files share), so that each file reads as one stage
from calbench.jobs import paths

LABEL_SHIFT_METRICS = list(dict.fromkeys(m for s in LABEL_SHIFT_SOURCES for m in SOURCES[s]["label_shift"]["metrics"]))
LABEL_SHIFT_TABLES = [paths.LABEL_SHIFT_TABLE.format(metric=m) for m in LABEL_SHIFT_METRICS]


def label_shift_outputs():
    return LABEL_SHIFT_TABLES + ([paths.LABEL_SHIFT_ADAPT] if LABEL_SHIFT_TABLES else [])


localrules:
    label_shift_report,


rule label_shift_report:
    input:
        long=paths.METRICS_LONG,
        metrics=[f for f, (s, _, _) in zip(metric_files(), jobs()) if s in LABEL_SHIFT_SOURCES],
        code=script_code("label_shift_report"),
    output:
        tables=[
            report(p, caption="../report/label_shift_table.rst", category="Label shift", subcategory="Tables")
            for p in LABEL_SHIFT_TABLES
        ],
        adapt=report(
            paths.LABEL_SHIFT_ADAPT,
            caption="../report/label_shift_table.rst",
            category="Label shift",
            subcategory="Tables",
        ),
    params:
        metrics=LABEL_SHIFT_METRICS,
        methods=METHODS,
    log:
        "logs/label_shift_report.log",
    benchmark:
        "benchmarks/label_shift_report.tsv"
    conda:
        "../../envs/calbench.yaml"
    script:
        "../scripts/label_shift_report.py"
