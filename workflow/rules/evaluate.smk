# Metrics of each calibrated output (one flat JSON per source, method and seed), and of the saved calibrator's
# predictions on each shifted test set of the source (docs/shift.md), and of its label-shifted test sets
# (docs/label_shift.md).
from calbench.jobs import paths


rule evaluate:
    input:
        calibrated=paths.CALIBRATED,
        dump=paths.DUMP,
        code=script_code("evaluate"),
        shifts=source_shift_file,
        calibrator=source_shift_calibrator,
    output:
        paths.METRICS,
    params:
        metrics=METRICS,
        split=source_split,
        bootstrap=config["bootstrap"],
        test_sets=source_test_sets,
        label_shift=source_label_shift,
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
