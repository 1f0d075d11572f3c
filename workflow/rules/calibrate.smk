# Fit each method on the calibration split of each source and seed; predict cal and test.


rule calibrate:
    input:
        dump="results/dumps/{source}.h5",
        code=method_code,
    output:
        "results/calibrated/{source}/{method}/seed{seed}.h5",
    params:
        settings=method_settings,
        split=source_split,
    log:
        "logs/calibrate/{source}/{method}/seed{seed}.log",
    benchmark:
        "benchmarks/calibrate/{source}/{method}/seed{seed}.tsv"
    conda:
        method_conda_env
    group:
        "calibrate_evaluate"
    resources:
        mem_mb=lambda wildcards, input: job_memory_mb(input.dump, int(wildcards.seed), "calibrate"),
        runtime=60,
    script:
        "../scripts/calibrate.py"
