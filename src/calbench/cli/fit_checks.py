"""What ``calbench validate`` checks of the data beside the config, so that a config that validates runs: the
refusals of ``fit`` that depend on the data (a calibration part without some class, for the methods that fit per
class: a fixed part, or the part a pooled source's split draws for each seed; more CV folds than calibration rows;
``venn_abers_ovo`` with more classes than its ``max_classes``) and metric bin counts above the test rows."""

from __future__ import annotations

import numpy as np


def _sizes(entry: dict) -> dict | None:
    """``{"cal": rows, "test": rows, "classes": C, "cal_labels": {part: labels}}`` of a synthetic or import source
    (the calibration labels of a fixed part, ``None``, or of a pooled source's split of each seed, ``seed s``, as
    the split job draws it: :func:`calbench.data.splits.pool_split`; none for a synthetic source, whose data are
    drawn by the dump); None where it depends on a model run or the files cannot be read (validate reports those
    already)."""
    from calbench.data import importers
    from calbench.data.synthetic import sizes

    if entry["type"] == "synthetic":  # a task's own class count where the entry gives none (lece3: 3)
        return {"cal": entry["n_cal"], "test": entry["n_test"], "classes": sizes(entry["task"], entry)[0],
                "cal_labels": {}}
    if entry["type"] != "import":
        return None
    import warnings

    try:
        with warnings.catch_warnings():  # the file checks before these reported the files' warnings once
            warnings.simplefilter("ignore")
            groups = importers.read_files(entry["format"], entry["files"], entry["scores"], "sources")
    except (OSError, ValueError):
        return None
    if "all" in groups:
        return _pool_sizes(groups["all"], entry)
    if not {"cal", "test"} <= set(groups):
        return None
    return {"cal": len(groups["cal"]["labels"]), "test": len(groups["test"]["labels"]),
            "classes": groups["cal"]["logits"].shape[1], "cal_labels": {None: np.asarray(groups["cal"]["labels"])}}


def _pool_sizes(pool: dict, entry: dict) -> dict | None:
    """:func:`_sizes` of a pooled source: each seed's split as the split job draws it (its smallest parts count)."""
    from calbench.data.splits import pool_split

    if not entry.get("split"):
        return None  # the layout check names the missing split
    labels = np.asarray(pool["labels"])
    cal = {f"seed {seed}": labels[pool_split(pool, seed, entry["split"])[0]] for seed in entry["seeds"]}
    smallest = min(part.size for part in cal.values())
    return {"cal": smallest, "test": labels.size - max(part.size for part in cal.values()),
            "classes": pool["logits"].shape[1], "cal_labels": cal}


def _coverage_problems(where: str, method: str, sizes: dict, split: dict | None) -> list[str]:
    """The calibration parts without some class, for a method that fits per class: the fixed part, or each seed's
    split of a pooled source (naming the seed and the fix)."""
    from calbench.methods.base import missing_classes_text

    problems = []
    for part, labels in sizes["cal_labels"].items():
        if (text := missing_classes_text(labels, sizes["classes"])) is None:
            continue
        if part is None:
            problems.append(f"{where}: method {method} needs calibration examples of every class, but {text}")
            continue
        size = f"cal_size: {split['cal_size']}" if split.get("cal_size") else f"cal_fraction: {split['cal_fraction']}"
        fix = ("a larger split.cal_size (or cal_fraction)" if split["stratify"]
               else "split.stratify: true or a larger split.cal_size (or cal_fraction)")
        problems.append(f"{where}: method {method} needs calibration examples of every class, but the split of "
                        f"{part} ({size}) draws a calibration part where {text}; set {fix}")
    return problems


def _stages(estimator):
    """Every calibrator of a built method: chain steps, a grid search and its estimator."""
    yield estimator
    for step in getattr(estimator, "steps", []):
        yield from _stages(step)
    if hasattr(estimator, "estimator"):
        yield from _stages(estimator.estimator)


def _method_problems(where: str, method: str, estimator, sizes: dict, split: dict | None) -> list[str]:
    from calbench.methods.base import MissingClass
    from calbench.methods.tuning import GridSearch
    from calbench.methods.venn_abers import VennAbersOneVsOne

    problems = []
    for stage in _stages(estimator):
        if isinstance(stage, GridSearch) and stage.folds > sizes["cal"]:
            problems.append(f"{where}: method {method}: cv.folds = {stage.folds}, more than the {sizes['cal']} "
                            "calibration rows; lower cv.folds")
        if isinstance(stage, VennAbersOneVsOne) and sizes["classes"] > stage.max_classes:
            problems.append(f"{where}: method {method}: {sizes['classes']} classes, over max_classes = "
                            f"{stage.max_classes}; use venn_abers or set max_classes: {sizes['classes']}")
        if stage.on_missing_class is MissingClass.REFUSE:
            problems += _coverage_problems(where, method, sizes, split)
    return list(dict.fromkeys(problems))


def fit_problems(config: dict) -> list[str]:
    """One line per data-dependent refusal the run would meet (module docstring), for every source and method of a
    loaded config whose files read."""
    from calbench.config import method_runs_on
    from calbench.methods.registry import chain_settings, make
    from calbench.metrics.registry import bin_count, lookup

    problems = []
    for name, entry in config["sources"].items():
        sizes = _sizes(entry)
        if sizes is None:
            continue
        where = f"sources.{name}"
        for method in config["methods"]:
            if method_runs_on(method, entry):
                settings = chain_settings(method, config["method_settings"])
                built = make(method, **settings) if "+" in method else make(method, **settings[method])
                problems += _method_problems(where, method, built, sizes, entry.get("split"))
        for metric in config["metrics"]:
            bins = bin_count(lookup(metric)[1])
            if bins is not None and bins > sizes["test"]:
                problems.append(f"{where}: metric {metric}: {bins:,} bins for {sizes['test']:,} test rows (most "
                                "bins would stay empty); use at most as many bins as test rows")
    return problems
