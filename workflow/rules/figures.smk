# Figures (config key `figures`): reliability diagrams and simplex maps from results/calibrated, and
# critical-difference diagrams from the long metrics table → results/figures (docs/figures_and_studies.md).
# Each section's defaults and names are resolved by calbench.config.load; an absent section's rules run no job.


rule reliability_diagram:
    input:
        unpack(spec_input("reliability_diagram")),
        code=script_code("reliability_diagram"),
    output:
        figure=report(
            paths.RELIABILITY_FIGURE,
            caption="../report/reliability.rst",
            category="Reliability diagrams",
            subcategory="{source}",
            labels={"source": "{source}", "target": "{target}"},
        ),
        table=paths.RELIABILITY_TABLE,
    log:
        "logs/figures/reliability/{source}/{target}.log",
    benchmark:
        "benchmarks/figures/reliability/{source}/{target}.tsv"
    wildcard_constraints:
        target="conf|cw",
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=spec_params("reliability_diagram"),
    script:
        "../scripts/reliability_diagram.py"


rule simplex_map:
    input:
        unpack(spec_input("simplex_map")),
        code=script_code("simplex_map"),
    output:
        figure=report(
            paths.SIMPLEX_FIGURE,
            caption="../report/simplex.rst",
            category="Calibration maps",
            labels={"source": "{source}"},
        ),
    log:
        "logs/figures/simplex/{source}.log",
    benchmark:
        "benchmarks/figures/simplex/{source}.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=spec_params("simplex_map"),
    script:
        "../scripts/simplex_map.py"


localrules:
    critical_difference,


rule critical_difference:
    input:
        unpack(spec_input("critical_difference")),
        code=script_code("critical_difference"),
    output:
        figures=[
            report(
                p, caption="../report/critical_difference.rst", category="Critical differences", labels={"metric": m}
            )
            for m, p in CRITICAL_DIFFERENCE.figures.items()
        ],
        table=report(
            CRITICAL_DIFFERENCE.table,
            caption="../report/friedman.rst",
            category="Tables",
        ),
        csv=CRITICAL_DIFFERENCE.csv,
    log:
        "logs/figures/critical_difference.log",
    benchmark:
        "benchmarks/figures/critical_difference.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=spec_params("critical_difference"),
    script:
        "../scripts/critical_difference.py"
