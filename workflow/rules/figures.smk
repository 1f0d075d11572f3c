# Figures (config key `figures`): reliability diagrams and simplex maps from results/calibrated, and
# critical-difference diagrams from the long metrics table → results/figures (docs/figures_and_studies.md).
# Each section's defaults and names are resolved by calbench.config.load; None = not drawn.
from calbench.jobs import paths

RELIABILITY = config["figures"].get("reliability")
SIMPLEX = config["figures"].get("simplex")
CRITICAL_DIFFERENCE = config["figures"].get("critical_difference")


def figure_seed(source):
    """Figures show the first seed of each source (the LECE paper draws seed 0)."""
    return source_seeds(source)[0]


def figure_methods(section, source):
    return [m for m in section["methods"] if method_runs_on(m, SOURCES[source])]


def figure_calibrated(section, source):
    seed = figure_seed(source)
    return [paths.CALIBRATED.format(source=source, method=m, seed=seed) for m in figure_methods(section, source)]


def reliability_inputs(wildcards):
    return figure_calibrated(RELIABILITY, wildcards.source)


def reliability_methods(wildcards):
    return figure_methods(RELIABILITY, wildcards.source)


def simplex_inputs(wildcards):
    return figure_calibrated(SIMPLEX, wildcards.source)


def simplex_methods(wildcards):
    return figure_methods(SIMPLEX, wildcards.source)


def figure_seed_of(wildcards):
    return figure_seed(wildcards.source)


def cd_figure_paths():
    return {m: paths.CRITICAL_DIFFERENCE_FIGURE.format(metric=m) for m in CRITICAL_DIFFERENCE["metrics"]}


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


if RELIABILITY is not None:

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
