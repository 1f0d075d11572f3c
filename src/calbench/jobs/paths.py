"""The output paths of the workflow's jobs, one template each: the rules (workflow/rules/*.smk: outputs with
wildcards, and the target lists filled with ``.format``) and ``python -m calbench dump|calibrate|evaluate`` both
fill them (``DUMP.format(source=...)``). Logs and benchmarks, which no other rule reads, stay beside their rule."""

import json

DUMP = "results/dumps/{source}.h5"
SHIFTS = "results/shifts/{source}.h5"
PERTURBED_CAL = "results/perturbed_cal/{source}/seed{seed}.h5"
MODEL = "results/models/{source}/model.pt"
IMAGE_MANIFEST = "results/manifests/{source}.tsv"
#: The content digests of a source's data files (calbench.data.digests), the input of the rules that read them.
SOURCE_DIGEST = "results/digests/{source}.tsv"
SPLIT = "results/splits/{source}/seed{seed}.test_rows.npy"
CALIBRATED = "results/calibrated/{source}/{method}/seed{seed}.h5"
CALIBRATOR = "results/calibrators/{source}/{method}/seed{seed}.safetensors"
METRICS = "results/metrics/{source}/{method}/seed{seed}.json"
CALIBRATE_BENCHMARK = "benchmarks/calibrate/{source}/{method}/seed{seed}.tsv"
EVALUATE_BENCHMARK = "benchmarks/evaluate/{source}/{method}/seed{seed}.tsv"
METRICS_LONG = "results/tables/metrics_long.csv"
SUMMARY = "results/tables/summary.md"
AVERAGE_RANKS = "results/tables/average_ranks.md"
INTERVALS = "results/tables/intervals.csv"
METRIC_TABLE = "results/tables/{metric}.md"
RUNTIME = "results/tables/runtime.md"
PAPER_COMPARISON = "results/tables/paper_comparison.md"
RELIABILITY_FIGURE = "results/figures/reliability/{source}/{target}.png"
RELIABILITY_TABLE = "results/figures/reliability/{source}/{target}.csv"
SIMPLEX_FIGURE = "results/figures/simplex/{source}.png"
CRITICAL_DIFFERENCE_FIGURE = "results/figures/critical_difference/{metric}.png"
FRIEDMAN_TABLE = "results/tables/friedman.md"
FRIEDMAN_CSV = "results/tables/friedman.csv"
LEARNING_CURVE = "results/studies/learning_curve/{source}/{method}.csv"
LEARNING_CURVE_SUMMARY_CSV = "results/studies/learning_curve/summary.csv"
LEARNING_CURVE_SUMMARY = "results/studies/learning_curve/summary.md"
LEARNING_CURVE_FIGURE = "results/figures/learning_curve/{source}.png"
SHIFT_TABLE = "results/tables/shift/{metric}.md"
SHIFT_RANKING = "results/tables/shift/ranking.md"
SHIFT_INTERVALS = "results/tables/shift/intervals.csv"
SHIFT_FIGURE = "results/figures/shift/{source}.png"
SHIFT_FIGURE_CSV = "results/figures/shift/{source}.csv"
OOD = "results/ood/{source}.h5"
OOD_METRICS = "results/ood/{source}/{method}/seed{seed}.json"
OOD_TABLE = "results/tables/ood.md"
OOD_FIGURE = "results/figures/ood/{source}.png"
OOD_FIGURE_CSV = "results/figures/ood/{source}.csv"
LABEL_SHIFT_TABLE = "results/tables/label_shift/{metric}.md"


def as_params(value):
    """A config slice as the rules' params hold it (canonical JSON, sorted keys) and read back: the argument builders
    pass this form, so that a job runs the same whether its arguments come from a builder or from its params, and
    the order a config writes keys in changes nothing (a grid's keys, for one)."""
    return json.loads(json.dumps(value, sort_keys=True))


def split_file(config: dict, source: str, seed: int) -> str | None:
    """A pooled source's drawn test rows for ``seed`` (rule draw_split); ``None`` for sources with fixed parts."""
    return SPLIT.format(source=source, seed=seed) if config["sources"][source].get("split") else None


def draw_split_arguments(config: dict, source: str, seed: int) -> dict:
    """The arguments of :func:`calbench.data.splits.write_test_index` (rule draw_split) from the resolved config."""
    return {"dump_path": DUMP.format(source=source), "seed": seed,
            "split": as_params(config["sources"][source]["split"]), "output": SPLIT.format(source=source, seed=seed)}
