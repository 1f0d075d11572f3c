# Figures (config key `figures`): reliability diagrams and simplex maps from results/calibrated, and
# critical-difference diagrams from the long metrics table → results/figures (docs/figures_and_studies.md).
# Each section's defaults and names are resolved by calbench.config.load; None = not drawn.
# lint accepted (Mixed rules and functions in same snakefile): a rule file's own helpers live beside its rules
# (common.smk holds only those several rule files share), so that each file reads as one stage
from calbench.jobs import paths

RELIABILITY = config["figures"].get("reliability")
SIMPLEX = config["figures"].get("simplex")
CRITICAL_DIFFERENCE = config["figures"].get("critical_difference")


def figure_seed(source):
    """Simplex maps show the first seed of each source (the LECE paper draws seed 0)."""
    return source_seeds(source)[0]


def figure_methods(section, source):
    return [m for m in section["methods"] if method_runs_on(m, SOURCES[source])]


def figure_calibrated(section, source):
    seed = figure_seed(source)
    return [paths.CALIBRATED.format(source=source, method=m, seed=seed) for m in figure_methods(section, source)]


def reliability_seeds(wildcards):
    """Reliability diagrams pool the chosen seeds (default: every seed of the source)."""
    return RELIABILITY.get("seeds") or source_seeds(wildcards.source)


def reliability_inputs(wildcards):
    return [paths.CALIBRATED.format(source=wildcards.source, method=m, seed=seed)
            for m in figure_methods(RELIABILITY, wildcards.source) for seed in reliability_seeds(wildcards)]


def reliability_methods(wildcards):
    return figure_methods(RELIABILITY, wildcards.source)


def class_names(wildcards):
    """The source's ``class_names`` (figures name the classes by them), or None."""
    return SOURCES[wildcards.source].get("class_names")


def simplex_inputs(wildcards):
    return figure_calibrated(SIMPLEX, wildcards.source)


def simplex_methods(wildcards):
    return figure_methods(SIMPLEX, wildcards.source)


def figure_seed_of(wildcards):
    return figure_seed(wildcards.source)


def cd_figure_paths():
    metrics = section_value(CRITICAL_DIFFERENCE, "metrics") or []
    return {m: paths.CRITICAL_DIFFERENCE_FIGURE.format(metric=m) for m in metrics}


def figure_files():
    files = []
    if RELIABILITY is not None:
        files += [path.format(source=s, target=t) for s in RELIABILITY["sources"] for t in RELIABILITY["targets"]
                  for path in (paths.RELIABILITY_FIGURE, paths.RELIABILITY_TABLE)]
    if SIMPLEX is not None:
        files += [paths.SIMPLEX_FIGURE.format(source=s) for s in SIMPLEX["sources"]]
    if CRITICAL_DIFFERENCE is not None:
        files += list(cd_figure_paths().values()) + [paths.FRIEDMAN_TABLE, paths.FRIEDMAN_CSV]
    return files


rule reliability_diagram:
    input:
        calibrated=reliability_inputs,
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
    params:
        methods=reliability_methods,
        seeds=reliability_seeds,
        bins=section_value(RELIABILITY, "bins"),
        scheme=section_value(RELIABILITY, "scheme"),
        axis=section_value(RELIABILITY, "axis"),
        max_classes=section_value(RELIABILITY, "max_classes"),
        class_names=class_names,
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


rule simplex_map:
    input:
        calibrated=simplex_inputs,
        dump=paths.DUMP,
        code=script_code("simplex_map"),
    output:
        report(
            paths.SIMPLEX_FIGURE,
            caption="../report/simplex.rst",
            category="Calibration maps",
            labels={"source": "{source}"},
        ),
    params:
        methods=simplex_methods,
        seed=figure_seed_of,
        split=source_split,
        divisions=section_value(SIMPLEX, "divisions"),
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


localrules:
    critical_difference,


rule critical_difference:
    input:
        long=paths.METRICS_LONG,
        intervals=paths.INTERVALS,
        code=script_code("critical_difference"),
    output:
        figures=[
            report(p, caption="../report/critical_difference.rst", category="Critical differences",
                   labels={"metric": m})
            for m, p in cd_figure_paths().items()
        ],
        table=report(
            paths.FRIEDMAN_TABLE,
            caption="../report/friedman.rst",
            category="Tables",
        ),
        csv=paths.FRIEDMAN_CSV,
    params:
        metrics=section_value(CRITICAL_DIFFERENCE, "metrics"),
        test=section_value(CRITICAL_DIFFERENCE, "test"),
        alpha=section_value(CRITICAL_DIFFERENCE, "alpha"),
        friedman_alpha=section_value(CRITICAL_DIFFERENCE, "friedman_alpha"),
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
