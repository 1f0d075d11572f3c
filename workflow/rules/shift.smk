# Calibration under dataset shift (docs/shift.md): the shifted test sets of each source with `shifts` →
# results/shifts/{source}.h5 (its calibrate jobs never read it, so adding a shift reruns no calibration; the
# evaluate jobs apply the saved calibrators to it), the out-of-distribution sets of each source with `ood`, then
# the shift and OOD tables and figures.


rule dump_shifts_model:
    input:
        unpack(spec_input("dump_shifts_model")),
        code=script_code("dump_shifts_model"),
    output:
        output=paths.SHIFTS,
    log:
        "logs/shifts/{source}.log",
    benchmark:
        "benchmarks/shifts/{source}.tsv"
    wildcard_constraints:
        source=_alternatives([s for s in SHIFT_SOURCES if s in MODEL_SOURCES]),
    conda:
        "../../envs/torch.yaml"
    threads: model_threads
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=120,
    params:
        settings=spec_params("dump_shifts_model"),
    script:
        "../scripts/dump_shifts_model.py"


rule dump_shifts_source:
    input:
        unpack(spec_input("dump_shifts_source")),
        code=script_code("dump_shifts_source"),
    output:
        shifts=paths.SHIFTS,
    log:
        "logs/shifts/{source}.log",
    benchmark:
        "benchmarks/shifts/{source}.tsv"
    wildcard_constraints:
        source=_alternatives([s for s in SHIFT_SOURCES if s in DATA_SOURCES]),
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        settings=spec_params("dump_shifts_source"),
    script:
        "../scripts/dump_shifts_source.py"


rule dump_ood_model:
    input:
        unpack(spec_input("dump_ood_model")),
        code=script_code("dump_ood"),
    output:
        output=paths.OOD,
    log:
        "logs/ood/{source}.log",
    benchmark:
        "benchmarks/ood/{source}.tsv"
    wildcard_constraints:
        source=_alternatives([s for s in OOD_SOURCES if s in MODEL_SOURCES]),
    conda:
        "../../envs/torch.yaml"
    threads: model_threads
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=60,
    params:
        settings=spec_params("dump_ood_model"),
    script:
        "../scripts/dump_ood.py"


rule dump_ood_source:
    input:
        unpack(spec_input("dump_ood_source")),
        code=script_code("dump_ood"),
    output:
        ood=paths.OOD,
    log:
        "logs/ood/{source}.log",
    benchmark:
        "benchmarks/ood/{source}.tsv"
    wildcard_constraints:
        source=_alternatives([s for s in OOD_SOURCES if s in DATA_SOURCES]),
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        settings=spec_params("dump_ood_source"),
    script:
        "../scripts/dump_ood.py"


rule evaluate_ood:
    input:
        unpack(spec_input("evaluate_ood")),
        code=script_code("evaluate_ood"),
    output:
        output=paths.OOD_METRICS,
    log:
        "logs/evaluate_ood/{source}/{method}/seed{seed}.log",
    benchmark:
        "benchmarks/evaluate_ood/{source}/{method}/seed{seed}.tsv"
    wildcard_constraints:
        source=_alternatives(OOD_SOURCES),
    conda:
        method_conda_env
    resources:
        mem_mb=2000,
        runtime=30,
    script:
        "../scripts/evaluate_ood.py"


# Re-applies every saved calibrator of the shifted sources to their shifted sets and resamples their test rows
# (report/shift.py): a cluster job, not a local rule.
rule shift_report:
    input:
        unpack(spec_input("shift_report")),
        code=script_code("shift_report"),
    output:
        tables=[
            report(p, caption="../report/shift_table.rst", category="Shift", subcategory="Tables")
            for p in SHIFT_REPORT.tables.values()
        ],
        ranking=report(
            SHIFT_REPORT.ranking,
            caption="../report/shift_ranking.rst",
            category="Shift",
            subcategory="Tables",
        ),
        figures=[
            report(p, caption="../report/shift_figure.rst", category="Shift", subcategory="Figures")
            for p in SHIFT_REPORT.figures.values()
        ],
        csv=list(SHIFT_REPORT.csv.values()),
        intervals=SHIFT_REPORT.intervals,
    log:
        "logs/shift_report.log",
    benchmark:
        "benchmarks/shift_report.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        settings=spec_params("shift_report"),
    script:
        "../scripts/shift_report.py"


localrules:
    ood_report,


rule ood_report:
    input:
        unpack(spec_input("ood_report")),
        code=script_code("ood_report"),
    output:
        table=report(OOD_REPORT.table, caption="../report/ood_table.rst", category="Shift", subcategory="Tables"),
        figures=[
            report(p, caption="../report/ood_figure.rst", category="Shift", subcategory="Figures")
            for p in OOD_REPORT.figures.values()
        ],
        csv=list(OOD_REPORT.csv.values()),
    log:
        "logs/ood_report.log",
    benchmark:
        "benchmarks/ood_report.tsv"
    conda:
        "../../envs/calbench.yaml"
    params:
        settings=spec_params("ood_report"),
    script:
        "../scripts/ood_report.py"
