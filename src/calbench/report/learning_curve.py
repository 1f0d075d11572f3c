"""Learning curves: calibration error and accuracy versus calibration-set size (Mix-n-Match §5.2, Fig. 6).

Spec kcal_mixnmatch.md §3.2: the evaluation set is fixed (the test split of one seed); for each size n_c
(from 128 upward) the method is fitted on ``repeats`` independent draws of n_c rows, without replacement,
from that seed's calibration split, and every metric is computed on the whole evaluation set. The paper
uses 100 repeats and log-spaced n_c; both are config values here. Each draw ``r`` at size ``n`` uses
the generator ``numpy.random.default_rng([seed, n, r])`` and the method gets seed ``r``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calbench.data import splits, store
from calbench.methods.registry import build_method
from calbench.metrics import evaluate, lookup
from calbench.report.plotting import plt, save_figure
from calbench.scores import Scores

COLUMNS = ["source", "method", "size", "repeat", "metric", "value"]


def learning_curve(dump, method: str, settings: dict, sizes, repeats: int, metrics, seed: int = 0,
                   split: dict | None = None, source: str = "") -> pd.DataFrame:
    """Long table (:data:`COLUMNS`) of every metric for every size and repeat."""
    data = splits.load_split(dump, seed, split)
    cal, test = data["cal"], data["test"]
    pool = cal["labels"].size
    if max(sizes) > pool:
        raise ValueError(f"studies.learning_curve.sizes: {max(sizes)} exceeds the {pool} calibration rows of "
                         f"{source or dump} (seed {seed}); use sizes up to {pool} or a larger calibration split")
    wanted = [m for m in metrics if "true_probs" in test or not lookup(m)[0].needs_true_probs]
    test_scores = Scores(test["logits"], test.get("embeddings"))
    train = None
    rows = []
    for size in sizes:
        for repeat in range(repeats):
            rows_drawn = np.sort(np.random.default_rng([seed, size, repeat]).choice(pool, size, replace=False))
            estimator = build_method(method, settings, repeat)
            if "train" in estimator.needs and train is None:
                part = store.read_group(dump, "train")
                train = (Scores(part["logits"], part.get("embeddings")), part["labels"])
            embeddings = cal.get("embeddings")
            estimator.fit(Scores(cal["logits"][rows_drawn], None if embeddings is None else embeddings[rows_drawn]),
                          cal["labels"][rows_drawn], train=train)
            values = evaluate(estimator.predict_proba(test_scores), test["labels"], wanted,
                              true_probs=test.get("true_probs"), seed=repeat)
            rows += [(source, method, size, repeat, m, v) for m, v in values.items()]
    return pd.DataFrame(rows, columns=COLUMNS)


def summarise(long: pd.DataFrame) -> pd.DataFrame:
    """Mean and std (ddof=0) over repeats per source, method, size and metric."""
    grouped = long.groupby(["source", "method", "metric", "size"], sort=False)["value"]
    return grouped.agg(mean="mean", std=lambda v: v.std(ddof=0), repeats="size").reset_index()


def markdown(summary: pd.DataFrame, metrics, methods) -> str:
    """One table per source and metric: rows = sizes, columns = methods, cells mean ± std (table scale)."""
    lines = ["# Learning curves (mean ± std over repeated calibration draws; fixed evaluation set)", ""]
    for source, per_source in summary.groupby("source", sort=False):
        for metric_id in [m for m in metrics if m in set(per_source["metric"])]:
            family, _ = lookup(metric_id)
            sub = per_source[per_source["metric"] == metric_id]
            mean = sub.pivot(index="size", columns="method", values="mean") * family.scale
            std = sub.pivot(index="size", columns="method", values="std") * family.scale
            cols = [m for m in methods if m in mean.columns]
            scale = f", ×{family.scale:g}" if family.scale != 1 else ""
            lines += [f"## {source}: {metric_id}{scale} ({family.direction})",
                      "", "| n_cal | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
            lines += [f"| {size} | " + " | ".join(f"{mean.at[size, m]:.{family.decimals}f} ± "
                                                 f"{std.at[size, m]:.{family.decimals}f}" for m in cols) + " |"
                      for size in mean.index]
            lines.append("")
    return "\n".join(lines)


def learning_curve_figure(summary: pd.DataFrame, source: str, metrics, methods, path) -> None:
    """One panel per metric (rows), mean over repeats with a ±1 std band, log-scaled n_cal."""
    sub = summary[summary["source"] == source]
    shown = [m for m in metrics if m in set(sub["metric"])]
    fig, axes = plt.subplots(len(shown), 1, figsize=(6, 2.8 * len(shown)), sharex=True, squeeze=False,
                             layout="constrained")
    for ax, metric_id in zip(axes[:, 0], shown):
        family, _ = lookup(metric_id)
        for method in [m for m in methods if m in set(sub["method"])]:
            line = sub[(sub["metric"] == metric_id) & (sub["method"] == method)].sort_values("size")
            mean, std = line["mean"] * family.scale, line["std"] * family.scale
            ax.plot(line["size"], mean, marker="o", markersize=3, label=method)
            ax.fill_between(line["size"], mean - std, mean + std, alpha=0.2)
        scale = f" ×{family.scale:g}" if family.scale != 1 else ""
        ax.set(ylabel=f"{metric_id}{scale}", xscale="log")
        ax.grid(True, which="both", linewidth=0.3)
    sizes = sorted(set(sub["size"]))
    axes[-1, 0].set_xticks(sizes, [str(s) for s in sizes], rotation=45)
    axes[-1, 0].minorticks_off()
    axes[-1, 0].set_xlabel("calibration-set size n_cal (log scale)")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"{source}: learning curves (mean ± std over repeats)")
    save_figure(fig, path)
