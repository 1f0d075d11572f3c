# The cost of each method: fit/predict seconds and peak memory → results/tables/runtime.md.


localrules:
    runtime_table,


rule runtime_table:
    input:
        calibrated=[f"results/calibrated/{s}/{m}/seed{seed}.h5" for s, m, seed in jobs()],
        calibrate_benchmarks=[f"benchmarks/calibrate/{s}/{m}/seed{seed}.tsv" for s, m, seed in jobs()],
        evaluate_benchmarks=[f"benchmarks/evaluate/{s}/{m}/seed{seed}.tsv" for s, m, seed in jobs()],
    output:
        report(
            "results/tables/runtime.md",
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
