# Every metrics JSON and calibrated test output → results/tables (long CSV, per-metric Markdown tables marked by
# the paired bootstrap of the test rows, its intervals, the warnings the jobs raised).
from calbench.jobs import paths


localrules:
    aggregate,


rule aggregate:
    input:
        metrics=metric_files(),
        calibrated=calibrated_files(),
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
        intervals=paths.INTERVALS,
        warnings=paths.WARNINGS,
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
