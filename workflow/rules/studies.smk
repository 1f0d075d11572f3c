# Studies (config key `studies`): the learning curve of Mix-n-Match §5.2 (Fig. 6), one job per source and
# method looping over sizes and repeats, then one summary job → results/studies, results/figures.
# The section's defaults and names are resolved by calbench.config.load; None = not run.
# lint accepted (Mixed rules and functions in same snakefile): a rule file's own helpers live beside its rules
# (common.smk holds only those several rule files share), so that each file reads as one stage
from calbench.jobs import paths

LEARNING_CURVE = config["studies"].get("learning_curve")


def learning_curve_jobs():
    if LEARNING_CURVE is None:
        return []
    return [(s, m) for s in LEARNING_CURVE["sources"] for m in LEARNING_CURVE["methods"]
            if method_runs_on(m, SOURCES[s])]


def learning_curve_figures():
    if LEARNING_CURVE is None:
        return []
    return [paths.LEARNING_CURVE_FIGURE.format(source=s) for s in LEARNING_CURVE["sources"]]


def study_files():
    if LEARNING_CURVE is None:
        return []
    return [paths.LEARNING_CURVE_SUMMARY_CSV, paths.LEARNING_CURVE_SUMMARY] + (
        learning_curve_figures()
    )


rule learning_curve:
    input:
        dump=paths.DUMP,
        code=method_code("learning_curve"),
    output:
        paths.LEARNING_CURVE,
    params:
        settings=method_settings,
        split=source_split,
        sizes=section_value(LEARNING_CURVE, "sizes"),
        repeats=section_value(LEARNING_CURVE, "repeats"),
        metrics=section_value(LEARNING_CURVE, "metrics"),
        seed=section_value(LEARNING_CURVE, "seed"),
    wildcard_constraints:
        method=_alternatives(section_value(LEARNING_CURVE, "methods") or []),
    log:
        "logs/studies/learning_curve/{source}/{method}.log",
    benchmark:
        "benchmarks/studies/learning_curve/{source}/{method}.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../scripts/learning_curve.py"

localrules:
    learning_curve_summary,


rule learning_curve_summary:
    input:
        curves=[paths.LEARNING_CURVE.format(source=s, method=m) for s, m in learning_curve_jobs()],
        code=script_code("learning_curve_summary"),
    output:
        csv=paths.LEARNING_CURVE_SUMMARY_CSV,
        table=report(
            paths.LEARNING_CURVE_SUMMARY,
            caption="../report/learning_curve_table.rst",
            category="Learning curves",
        ),
        figures=[
            report(p, caption="../report/learning_curve.rst", category="Learning curves",
                   labels={"source": s})
            for s, p in zip(section_value(LEARNING_CURVE, "sources") or [], learning_curve_figures())
        ],
    params:
        sources=section_value(LEARNING_CURVE, "sources"),
        methods=section_value(LEARNING_CURVE, "methods"),
        metrics=section_value(LEARNING_CURVE, "metrics"),
    log:
        "logs/studies/learning_curve_summary.log",
    benchmark:
        "benchmarks/studies/learning_curve_summary.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/learning_curve_summary.py"
