# Every metrics JSON → results/tables (long CSV, ranked per-metric Markdown tables).
from calbench.jobs import paths


localrules:
    aggregate,


rule aggregate:
    input:
        metrics=metric_files(),
        code=script_code("aggregate"),
    output:
        long=report(
            paths.METRICS_LONG,
            caption="../report/metrics_long.rst",
            category="Tables",
        ),
        summary=report(
            paths.SUMMARY,
            caption="../report/summary.rst",
            category="Tables",
        ),
        ranks=paths.AVERAGE_RANKS,
        per_metric=[paths.METRIC_TABLE.format(metric=m) for m in METRICS],
    params:
        metrics=METRICS,
        methods=METHODS,
    log:
        "logs/aggregate.log",
    benchmark:
        "benchmarks/aggregate.tsv"
    conda:
        "../../envs/calbench.yaml"
    script:
        "../scripts/aggregate.py"
