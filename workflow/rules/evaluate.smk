# Metrics of each calibrated output (one flat JSON per source, method and seed).
import calbench.maps1d as _calbench_maps1d  # the fit-on-test estimators' calibration maps


rule evaluate:
    input:
        calibrated="results/calibrated/{source}/{method}/seed{seed}.h5",
        dump="results/dumps/{source}.h5",
        code=package_files(_calbench_metrics) + package_files(_calbench_maps1d),
    output:
        "results/metrics/{source}/{method}/seed{seed}.json",
    params:
        metrics=METRICS,
        split=source_split,
        bootstrap=config["bootstrap"],
    log:
        "logs/evaluate/{source}/{method}/seed{seed}.log",
    benchmark:
        "benchmarks/evaluate/{source}/{method}/seed{seed}.tsv"
    conda:
        "../../envs/calbench.yaml"
    group:
        "calibrate_evaluate"
    resources:
        mem_mb=lambda wildcards, input: job_memory_mb(input.dump, int(wildcards.seed), "evaluate"),
        runtime=30,
    script:
        "../scripts/evaluate.py"
