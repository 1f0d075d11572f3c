# Fit each method on the calibration split of each source and seed; predict cal and test; save the fitted
# calibrator (docs/saved_calibrators.md) for `calbench apply` / `calbench recommend`.


rule calibrate:
    input:
        dump="results/dumps/{source}.h5",
        code=method_code,
    output:
        calibrated="results/calibrated/{source}/{method}/seed{seed}.h5",
        calibrator="results/calibrators/{source}/{method}/seed{seed}.safetensors",
    params:
        settings=method_settings,
        split=source_split,
        scores_kind=source_scores_kind,
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
