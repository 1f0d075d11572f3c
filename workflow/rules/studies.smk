# Studies (config key `studies`): the learning curve of Mix-n-Match §5.2 (Fig. 6), one job per source and
# method looping over sizes and repeats, then one summary job → results/studies, results/figures.
# The section's defaults and names are resolved by calbench.config.load; an absent section's rules run no job.


rule learning_curve:
    input:
        unpack(spec_input("learning_curve")),
        code=method_code("learning_curve"),
    output:
        output=paths.LEARNING_CURVE,
    log:
        "logs/studies/learning_curve/{source}/{method}.log",
    benchmark:
        "benchmarks/studies/learning_curve/{source}/{method}.tsv"
    wildcard_constraints:
        method=_alternatives(LEARNING_CURVE_SUMMARY.methods),
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        settings=spec_params("learning_curve"),
    script:
        "../scripts/learning_curve.py"


localrules:
    learning_curve_summary,


rule learning_curve_summary:
    input:
        unpack(spec_input("learning_curve_summary")),
        code=script_code("learning_curve_summary"),
    output:
        csv=LEARNING_CURVE_SUMMARY.csv,
        table=report(
            LEARNING_CURVE_SUMMARY.table,
            caption="../report/learning_curve_table.rst",
            category="Learning curves",
        ),
        figures=[
            report(p, caption="../report/learning_curve.rst", category="Learning curves", labels={"source": s})
            for s, p in LEARNING_CURVE_SUMMARY.figures.items()
        ],
    log:
        "logs/studies/learning_curve_summary.log",
    benchmark:
        "benchmarks/studies/learning_curve_summary.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=spec_params("learning_curve_summary"),
    script:
        "../scripts/learning_curve_summary.py"
