# Calibration under dataset shift (docs/shift.md): the shifted test sets of each source with `shifts` →
# results/shifts/{source}.h5 (its calibrate jobs never read it, so adding a shift reruns no calibration; the
# evaluate jobs apply the saved calibrators to it), then the shift tables and figures from the long table.
from calbench.config import method_needs, shift_sets
from calbench.data.inputs import ood_files
from calbench.jobs import paths
from calbench.methods import make

SHIFT_SOURCES = [s for s in SOURCES if SOURCES[s].get("shifts")]
OOD_SOURCES = [s for s in SOURCES if SOURCES[s].get("ood")]
# Sources with label-shifted test sets (docs/label_shift.md): drawn inside their evaluate jobs, from the calibrated
# test outputs, with the saved calibrator's outputs on the calibration split for the adaptation.
LABEL_SHIFT_SOURCES = [s for s in SOURCES if SOURCES[s].get("label_shift")]


def source_shift_file(wildcards):
    return [paths.SHIFTS.format(source=wildcards.source)] if wildcards.source in SHIFT_SOURCES else []


def source_shift_calibrator(wildcards):
    """The saved calibrator, which the evaluate job applies to the shifted sets and, with a label shift, to the
    calibration split (none without either)."""
    shifted = wildcards.source in SHIFT_SOURCES or wildcards.source in LABEL_SHIFT_SOURCES
    return [paths.CALIBRATOR.format(**wildcards)] if shifted else []


def source_label_shift(wildcards):
    return canonical(SOURCES[wildcards.source].get("label_shift"))


def source_test_sets(wildcards):
    return shift_sets(SOURCES[wildcards.source])


def shifted_entry(wildcards):
    return canonical({k: v for k, v in SOURCES[wildcards.source].items() if k not in ("ood", "label_shift")})


def ood_entry(wildcards):
    return canonical({k: v for k, v in SOURCES[wildcards.source].items() if k not in ("shifts", "label_shift")})


def ood_data(wildcards):
    """The files of an import source's out-of-distribution sets: inputs of its OOD dump."""
    return ood_files(SOURCES[wildcards.source])


rule dump_shifts_model:
    input:
        code=script_code("dump_shifts_model"),
        weights=model_weights,
        data=source_data,
    output:
        paths.SHIFTS,
    params:
        entry=shifted_entry,
        cache_dir=config["downloads_dir"],
    wildcard_constraints:
        source=_alternatives([s for s in SHIFT_SOURCES if s in MODEL_SOURCES]),
    threads: model_threads
    log:
        "logs/shifts/{source}.log",
    benchmark:
        "benchmarks/shifts/{source}.tsv"
    conda:
        "../../envs/torch.yaml"
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=120,
    script:
        "../scripts/dump_shifts_model.py"


def perturb_settings(wildcards):
    """The `perturb` stage's levels and clipping (Tomani et al. 2021; docs/shift.md)."""
    stage = make("perturb", **chain_settings(config, "perturb")["perturb"])
    return {"levels": stage.levels, "clip": stage.clip}


def method_perturbed_cal(wildcards):
    """A chain starting with `perturb` fits on the perturbed calibration images of its (model) source and seed."""
    if "perturbed_cal" not in method_needs(wildcards.method):
        return []
    return [paths.PERTURBED_CAL.format(source=wildcards.source, seed=wildcards.seed)]


rule dump_perturbed_cal:
    input:
        code=script_code("dump_perturbed_cal"),
        weights=model_weights,
        split=source_split_file,
        data=source_data,
    output:
        paths.PERTURBED_CAL,
    params:
        entry=source_entry,
        perturb=perturb_settings,
        cache_dir=config["downloads_dir"],
    wildcard_constraints:
        source=_alternatives(MODEL_SOURCES),
    threads: model_threads
    log:
        "logs/perturbed_cal/{source}/seed{seed}.log",
    benchmark:
        "benchmarks/perturbed_cal/{source}/seed{seed}.tsv"
    conda:
        "../../envs/torch.yaml"
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=120,
    script:
        "../scripts/dump_perturbed_cal.py"


rule dump_shifts_source:
    input:
        code=script_code("dump_shifts_source"),
        dump=paths.DUMP,
        data=shift_data,
    output:
        paths.SHIFTS,
    params:
        entry=shifted_entry,
        cache_dir=config["downloads_dir"],
    wildcard_constraints:
        source=_alternatives([s for s in SHIFT_SOURCES if s in DATA_SOURCES]),
    log:
        "logs/shifts/{source}.log",
    benchmark:
        "benchmarks/shifts/{source}.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=2000,
        runtime=30,
    script:
        "../scripts/dump_shifts_source.py"


rule dump_ood_model:
    input:
        code=script_code("dump_ood"),
        weights=model_weights,
        data=source_data,
    output:
        paths.OOD,
    params:
        entry=ood_entry,
        cache_dir=config["downloads_dir"],
    wildcard_constraints:
        source=_alternatives([s for s in OOD_SOURCES if s in MODEL_SOURCES]),
    threads: model_threads
    log:
        "logs/ood/{source}.log",
    benchmark:
        "benchmarks/ood/{source}.tsv"
    conda:
        "../../envs/torch.yaml"
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=60,
    script:
        "../scripts/dump_ood.py"


rule dump_ood_source:
    input:
        code=script_code("dump_ood"),
        dump=paths.DUMP,
        data=ood_data,
    output:
        paths.OOD,
    params:
        entry=ood_entry,
        cache_dir=config["downloads_dir"],
    wildcard_constraints:
        source=_alternatives([s for s in OOD_SOURCES if s in DATA_SOURCES]),
    log:
        "logs/ood/{source}.log",
    benchmark:
        "benchmarks/ood/{source}.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=2000,
        runtime=30,
    script:
        "../scripts/dump_ood.py"


rule evaluate_ood:
    input:
        ood=paths.OOD,
        calibrated=paths.CALIBRATED,
        calibrator=paths.CALIBRATOR,
        code=script_code("evaluate_ood"),
    output:
        paths.OOD_METRICS,
    wildcard_constraints:
        source=_alternatives(OOD_SOURCES),
    log:
        "logs/evaluate_ood/{source}/{method}/seed{seed}.log",
    benchmark:
        "benchmarks/evaluate_ood/{source}/{method}/seed{seed}.tsv"
    conda:
        method_conda_env
    resources:
        mem_mb=2000,
        runtime=30,
    script:
        "../scripts/evaluate_ood.py"


OOD_KEYS = [(s, m, seed) for s in OOD_SOURCES for m in METHODS for seed in source_seeds(s)
            if method_runs_on(m, SOURCES[s])]


SHIFT_TABLES = [paths.SHIFT_TABLE.format(metric=m) for m in METRICS]
SHIFT_FIGURES = [paths.SHIFT_FIGURE.format(source=s) for s in SHIFT_SOURCES]


# The evaluate jobs of the shifted sources: the shift report resamples their test rows (report/shift.py).
SHIFT_KEYS = [(s, m, seed) for s, m, seed in jobs() if s in SHIFT_SOURCES]


def shift_outputs():
    ood = [paths.OOD_TABLE] + [paths.OOD_FIGURE.format(source=s) for s in OOD_SOURCES] if OOD_SOURCES else []
    shift = SHIFT_TABLES + [paths.SHIFT_RANKING, paths.SHIFT_INTERVALS] + SHIFT_FIGURES
    return (shift if SHIFT_SOURCES else []) + ood


if SHIFT_SOURCES:

    localrules:
        shift_report,

    rule shift_report:
        input:
            long=paths.METRICS_LONG,
            code=script_code("shift_report"),
            metrics=[paths.METRICS.format(source=s, method=m, seed=seed) for s, m, seed in SHIFT_KEYS],
            calibrated=[paths.CALIBRATED.format(source=s, method=m, seed=seed) for s, m, seed in SHIFT_KEYS],
            calibrators=[paths.CALIBRATOR.format(source=s, method=m, seed=seed) for s, m, seed in SHIFT_KEYS],
            shifts=[paths.SHIFTS.format(source=s) for s in SHIFT_SOURCES],
        output:
            tables=[
                report(p, caption="../report/shift_table.rst", category="Shift", subcategory="Tables")
                for p in SHIFT_TABLES
            ],
            ranking=report(
                paths.SHIFT_RANKING,
                caption="../report/shift_ranking.rst",
                category="Shift",
                subcategory="Tables",
            ),
            figures=[
                report(p, caption="../report/shift_figure.rst", category="Shift", subcategory="Figures")
                for p in SHIFT_FIGURES
            ],
            csv=[paths.SHIFT_FIGURE_CSV.format(source=s) for s in SHIFT_SOURCES],
            intervals=paths.SHIFT_INTERVALS,
        params:
            metrics=METRICS,
            methods=METHODS,
            sources=SHIFT_SOURCES,
        log:
            "logs/shift_report.log",
        benchmark:
            "benchmarks/shift_report.tsv"
        conda:
            "../../envs/calbench.yaml"
        script:
            "../scripts/shift_report.py"


if OOD_SOURCES:

    localrules:
        ood_report,

    rule ood_report:
        input:
            records=[paths.OOD_METRICS.format(source=s, method=m, seed=seed) for s, m, seed in OOD_KEYS],
            code=script_code("ood_report"),
        output:
            table=report(paths.OOD_TABLE, caption="../report/ood_table.rst", category="Shift", subcategory="Tables"),
            figures=[
                report(paths.OOD_FIGURE.format(source=s), caption="../report/ood_figure.rst", category="Shift",
                       subcategory="Figures")
                for s in OOD_SOURCES
            ],
            csv=[paths.OOD_FIGURE_CSV.format(source=s) for s in OOD_SOURCES],
        params:
            jobs=[list(key) for key in OOD_KEYS],
            sources=OOD_SOURCES,
            methods=METHODS,
        log:
            "logs/ood_report.log",
        benchmark:
            "benchmarks/ood_report.tsv"
        conda:
            "../../envs/calbench.yaml"
        script:
            "../scripts/ood_report.py"
