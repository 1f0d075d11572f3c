# Calibration and prior adaptation under label shift (docs/label_shift.md): the evaluate jobs of sources with
# `label_shift` draw the shifted sets and compute their metrics (rules/evaluate.smk); this rule writes the
# per-strength tables and the adapt-or-not table from the long table and the metrics JSONs' bootstrap resamples.


rule label_shift_report:
    input:
        unpack(spec_input("label_shift_report")),
        code=script_code("label_shift_report"),
    output:
        tables=[
            report(p, caption="../report/label_shift_table.rst", category="Label shift", subcategory="Tables")
            for p in LABEL_SHIFT_REPORT.tables.values()
        ],
        adapt=report(
            LABEL_SHIFT_REPORT.adapt,
            caption="../report/label_shift_table.rst",
            category="Label shift",
            subcategory="Tables",
        ),
    log:
        "logs/label_shift_report.log",
    benchmark:
        "benchmarks/label_shift_report.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        settings=spec_params("label_shift_report"),
    script:
        "../scripts/label_shift_report.py"
