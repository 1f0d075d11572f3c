# Every metrics JSON and calibrated test output → results/tables (long CSV, per-metric Markdown tables marked by
# the paired bootstrap of the test rows, its intervals, the warnings the jobs raised).


rule aggregate:
    input:
        unpack(spec_input("aggregate")),
        code=script_code("aggregate"),
    output:
        long=report(
            AGGREGATE.long,
            caption="../report/metrics_long.rst",
            category="Tables",
        ),
        summary=report(
            AGGREGATE.summary,
            caption="../report/summary.rst",
            category="Tables",
        ),
        ranks=AGGREGATE.ranks,
        intervals=AGGREGATE.intervals,
        warnings=AGGREGATE.warnings,
        per_metric=list(AGGREGATE.per_metric.values()),
    log:
        "logs/aggregate.log",
    benchmark:
        "benchmarks/aggregate.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        settings=spec_params("aggregate"),
    script:
        "../scripts/aggregate.py"
