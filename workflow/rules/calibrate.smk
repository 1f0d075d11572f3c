# Fit each method on the calibration split of each source and seed; predict cal and test; save the fitted
# calibrator (docs/saved_calibrators.md) for `calbench apply` / `calbench recommend`.


rule calibrate:
    input:
        unpack(spec_input("calibrate")),
        code=method_code("calibrate"),
    output:
        calibrated=paths.CALIBRATED,
        calibrator=paths.CALIBRATOR,
    log:
        "logs/calibrate/{source}/{method}/seed{seed}.log",
    benchmark:
        paths.CALIBRATE_BENCHMARK
    group:
        "calibrate_evaluate"
    conda:
        method_conda_env
    threads: config["calibrate_threads"]  # the CV folds' worker threads (calbench.parallel.share_cores)
    resources:
        mem_mb=job_memory("calibrate"),
        runtime=60,
    params:
        settings=spec_params("calibrate"),
    shell:
        job_command("calibrate", "source", "method", "seed")
