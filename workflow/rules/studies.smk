# Studies (config key `studies`): the learning curve of Mix-n-Match §5.2 (Fig. 6), one job per source and
# method looping over sizes and repeats, then one summary job → results/studies, results/figures.
# The section's defaults and names are resolved by calbench.config.load; None = not run.
from calbench.jobs import paths

LEARNING_CURVE = config["studies"].get("learning_curve")


def learning_curve_jobs():
    return [(s, m) for s in LEARNING_CURVE["sources"] for m in LEARNING_CURVE["methods"]
            if method_runs_on(m, SOURCES[s])]


def learning_curve_figures():
    return [paths.LEARNING_CURVE_FIGURE.format(source=s) for s in LEARNING_CURVE["sources"]]


def study_files():
    if LEARNING_CURVE is None:
        return []
    return [paths.LEARNING_CURVE_SUMMARY_CSV, paths.LEARNING_CURVE_SUMMARY] + (
        learning_curve_figures()
    )


if LEARNING_CURVE is not None:

    localrules:
        learning_curve_summary,

    rule learning_curve:
        input:
            dump=paths.DUMP,
            code=method_code("learning_curve"),
        output:
            paths.LEARNING_CURVE,
        params:
            settings=method_settings,
            split=source_split,
            sizes=LEARNING_CURVE["sizes"],
            repeats=LEARNING_CURVE["repeats"],
            metrics=LEARNING_CURVE["metrics"],
            seed=LEARNING_CURVE["seed"],
        wildcard_constraints:
            method=_alternatives(LEARNING_CURVE["methods"]),
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
                for s, p in zip(LEARNING_CURVE["sources"], learning_curve_figures())
            ],
        params:
            sources=LEARNING_CURVE["sources"],
            methods=LEARNING_CURVE["methods"],
            metrics=LEARNING_CURVE["metrics"],
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
