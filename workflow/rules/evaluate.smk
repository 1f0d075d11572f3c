# Metrics of each calibrated output (one flat JSON per source, method and seed), and of the saved calibrator's
# predictions on each shifted test set of the source (docs/shift.md), and of its label-shifted test sets
# (docs/label_shift.md).


rule evaluate:
    input:
        unpack(spec_input("evaluate")),
        code=script_code("evaluate"),
    output:
        output=paths.METRICS,
    log:
        "logs/evaluate/{source}/{method}/seed{seed}.log",
    benchmark:
        paths.EVALUATE_BENCHMARK
    group:
        "calibrate_evaluate"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=job_memory("evaluate"),
        runtime=30,
    params:
        settings=spec_params("evaluate"),
    shell:
        job_command("evaluate", "source", "method", "seed")
