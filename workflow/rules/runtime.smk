# The cost of each method: fit/predict seconds and peak memory → results/tables/runtime.md.
from calbench.jobs import paths


localrules:
    runtime_table,


rule runtime_table:
    input:
        calibrated=[paths.CALIBRATED.format(source=s, method=m, seed=seed) for s, m, seed in jobs()],
        calibrate_benchmarks=[paths.CALIBRATE_BENCHMARK.format(source=s, method=m, seed=seed) for s, m, seed in jobs()],
        metrics=metric_files(),
        code=script_code("runtime"),
    output:
        report(
            paths.RUNTIME,
            caption="../report/runtime.rst",
            category="Tables",
        ),
    params:
        jobs=jobs(),
        methods=METHODS,
    log:
        "logs/runtime_table.log",
    conda:
        "../../envs/calbench.yaml"
    script:
        "../scripts/runtime.py"
