# The cost of each method: fit/predict seconds and peak memory → results/tables/runtime.md.


localrules:
    runtime_table,


rule runtime_table:
    input:
        unpack(spec_input("runtime_table")),
        code=script_code("runtime"),
    output:
        output=report(
            RUNTIME.output,
            caption="../report/runtime.rst",
            category="Tables",
        ),
    log:
        "logs/runtime_table.log",
    benchmark:
        "benchmarks/runtime_table.tsv"
    conda:
        "../../envs/calbench.yaml"
    params:
        settings=spec_params("runtime_table"),
    script:
        "../scripts/runtime.py"
