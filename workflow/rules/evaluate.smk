# Metrics of each calibrated output (one flat JSON per source, method and seed).
from calbench.jobs import paths


rule evaluate:
    input:
        calibrated=paths.CALIBRATED,
        dump=paths.DUMP,
        code=script_code("evaluate"),
    output:
        paths.METRICS,
    params:
        metrics=METRICS,
        split=source_split,
        bootstrap=config["bootstrap"],
    log:
        "logs/evaluate/{source}/{method}/seed{seed}.log",
    benchmark:
        paths.EVALUATE_BENCHMARK
    conda:
        "../../envs/calbench.yaml"
    group:
        "calibrate_evaluate"
    resources:
        mem_mb=lambda wildcards, input: job_memory_mb(input.dump, int(wildcards.seed), "evaluate"),
        runtime=30,
    script:
        "../scripts/evaluate.py"
