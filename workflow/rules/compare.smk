# Our aggregated results beside a paper's published table (config key `paper_comparison`).


localrules:
    paper_comparison,


rule paper_comparison:
    input:
        unpack(spec_input("paper_comparison")),
        code=script_code("paper_comparison"),
    output:
        output=PAPER_COMPARISON.output,
    log:
        "logs/paper_comparison.log",
    benchmark:
        "benchmarks/paper_comparison.tsv"
    conda:
        "../../envs/calbench.yaml"
    params:
        settings=spec_params("paper_comparison"),
    script:
        "../scripts/paper_comparison.py"
