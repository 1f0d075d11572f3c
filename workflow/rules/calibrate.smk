# Fit each method on the calibration split of each source and seed; predict cal and test; save the fitted
# calibrator (docs/saved_calibrators.md) for `calbench apply` / `calbench recommend`.
# lint accepted (Mixed rules and functions in same snakefile): a rule file's own helpers live beside its rules
# (common.smk holds only those several rule files share), so that each file reads as one stage
from calbench.jobs import paths
from calbench.jobs.calibrate import calibrate_arguments


def method_perturbed_cal(wildcards):
    """The perturbed calibration set of the source and seed, for a method that needs it (rule dump_perturbed_cal)."""
    perturbed = calibrate_arguments(config, wildcards.source, wildcards.method, int(wildcards.seed))["perturbed_cal"]
    return [perturbed] if perturbed else []


rule calibrate:
    input:
        dump=paths.DUMP,
        split=source_split_file,
        code=method_code("calibrate"),
        perturbed=method_perturbed_cal,
    output:
        calibrated=paths.CALIBRATED,
        calibrator=paths.CALIBRATOR,
    params:
        settings=method_settings,
        split=source_split,
        scores_kind=source_scores_kind,
    threads: config["calibrate_threads"]  # the CV folds' worker threads (calbench.parallel.share_cores)
    log:
        "logs/calibrate/{source}/{method}/seed{seed}.log",
    benchmark:
        paths.CALIBRATE_BENCHMARK
    conda:
        method_conda_env
    group:
        "calibrate_evaluate"
    resources:
        mem_mb=lambda wildcards, input: job_memory_mb(input.dump, int(wildcards.seed), "calibrate"),
        runtime=60,
    script:
        "../scripts/calibrate.py"
