# Figures (config key `figures`): reliability diagrams and simplex maps from results/calibrated, and
# critical-difference diagrams from the long metrics table → results/figures (docs/figures_and_studies.md).
# Helpers: report_common.smk.


if RELIABILITY is not None:

    rule reliability_diagram:
        input:
            calibrated=reliability_inputs,
            code=package_files(_calbench_report),
        output:
            figure=report(
                "results/figures/reliability/{source}/{target}.png",
                caption="../report/reliability.rst",
                category="Reliability diagrams",
                subcategory="{source}",
                labels={"source": "{source}", "target": "{target}"},
            ),
            table="results/figures/reliability/{source}/{target}.csv",
        params:
            methods=reliability_methods,
            bins=RELIABILITY["bins"],
            scheme=RELIABILITY["scheme"],
            max_classes=RELIABILITY["max_classes"],
        wildcard_constraints:
            target="conf|cw",
        log:
            "logs/figures/reliability/{source}/{target}.log",
        benchmark:
            "benchmarks/figures/reliability/{source}/{target}.tsv"
        conda:
            "../../envs/calbench.yaml"
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../scripts/reliability_diagram.py"


if SIMPLEX is not None:

    rule simplex_map:
        input:
            calibrated=simplex_inputs,
            dump="results/dumps/{source}.h5",
            code=package_files(_calbench_report),
        output:
            report(
                "results/figures/simplex/{source}.png",
                caption="../report/simplex.rst",
                category="Calibration maps",
                labels={"source": "{source}"},
            ),
        params:
            methods=simplex_methods,
            seed=figure_seed_of,
            split=source_split,
            divisions=SIMPLEX["divisions"],
        log:
            "logs/figures/simplex/{source}.log",
        benchmark:
            "benchmarks/figures/simplex/{source}.tsv"
        conda:
            "../../envs/calbench.yaml"
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../scripts/simplex_map.py"


if CRITICAL_DIFFERENCE is not None:

    localrules:
        critical_difference,

    rule critical_difference:
        input:
            long="results/tables/metrics_long.csv",
            code=package_files(_calbench_report),
        output:
            figures=[
                report(p, caption="../report/critical_difference.rst", category="Critical differences",
                       labels={"metric": m})
                for m, p in cd_figure_paths().items()
            ],
            table=report(
                "results/tables/friedman.md",
                caption="../report/friedman.rst",
                category="Tables",
            ),
            csv="results/tables/friedman.csv",
        params:
            metrics=CRITICAL_DIFFERENCE["metrics"],
            test=CRITICAL_DIFFERENCE["test"],
            alpha=CRITICAL_DIFFERENCE["alpha"],
            friedman_alpha=CRITICAL_DIFFERENCE["friedman_alpha"],
        log:
            "logs/figures/critical_difference.log",
        benchmark:
            "benchmarks/figures/critical_difference.tsv"
        conda:
            "../../envs/calbench.yaml"
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../scripts/critical_difference.py"
