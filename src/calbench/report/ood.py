"""Tables and figures of out-of-distribution detection (docs/shift.md; Ovadia et al., NeurIPS 2019, §4.1 and
Fig. 3), from the evaluate_ood jobs' records ``{name: {auroc.maxprob, …, curve: {…}}}`` per source, method, seed."""

from __future__ import annotations

import pandas as pd

from calbench.report.plotting import plt, save_figure

#: The table's columns: (record key, heading, higher is better).
COLUMNS = (("auroc.maxprob", "AUROC max prob", True), ("auroc.entropy", "AUROC entropy", True),
           ("fpr95.maxprob", "FPR@95 max prob", False), ("fpr95.entropy", "FPR@95 entropy", False))


#: Line styles of the OOD sets in the figure's last panel.
STYLES = ("-", "--", ":", "-.")


def ood_long(records: dict[tuple[str, str, int], dict]) -> pd.DataFrame:
    """Rows (source, method, seed, ood set, metric, value) of the records keyed (source, method, seed)."""
    rows = [(source, method, seed, name, key, value)
            for (source, method, seed), record in records.items() for name, values in record.items()
            for key, value in values.items() if key != "curve"]
    return pd.DataFrame(rows, columns=["source", "method", "seed", "ood", "metric", "value"])


def ood_markdown(long: pd.DataFrame, method_order=None) -> str:
    """Per source and OOD set: methods × AUROC and FPR at 95 % TPR of the max probability and the negative
    entropy, as the mean over seeds with the range over seeds in brackets."""
    lines = ["### Out-of-distribution detection (in-distribution test rows = positives; AUROC: higher is better, "
             "FPR@95: the share of OOD rows above the threshold that keeps 95 % of the test rows, lower is better; "
             "mean over seeds [min, max])", ""]
    stats = long.groupby(["source", "ood", "method", "metric"])["value"].agg(["mean", "min", "max", "count"])
    for (source, name), table in stats.groupby(level=["source", "ood"]):
        seeds = int(table["count"].max())
        lines += [f"**{source}, OOD set {name}** ({seeds} seed{'s' if seeds > 1 else ''})", "",
                  "| method | " + " | ".join(heading for _, heading, _ in COLUMNS) + " |",
                  "|---|" + "---|" * len(COLUMNS)]
        table = table.droplevel(["source", "ood"])
        methods = table.index.get_level_values("method").unique()
        for method in [m for m in (method_order or methods) if m in methods]:
            cells = []
            for key, _, _ in COLUMNS:
                row = table.loc[(method, key)]
                cells.append(f"{row['mean']:.3f} [{row['min']:.3f}, {row['max']:.3f}]")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def curve_frame(records: dict[tuple[str, str, int], dict], source: str) -> pd.DataFrame:
    """The seed-mean Fig. 3 curves of ``source``: (method, ood, threshold, accuracy, in_share, out_share)."""
    parts = [pd.DataFrame(values["curve"]).assign(method=method, ood=name, seed=seed)
             for (src, method, seed), record in records.items() if src == source
             for name, values in record.items()]
    frame = pd.concat(parts, ignore_index=True)
    return (frame.groupby(["method", "ood", "threshold"], as_index=False)[["accuracy", "in_share", "out_share"]]
            .mean())


def ood_figure(records, source: str, path, method_order=None) -> pd.DataFrame:
    """Ovadia et al.'s Fig. 3 for ``source``: the accuracy of the test rows whose max probability is at least τ,
    and the shares of test and out-of-distribution rows at or above τ, against τ; one line per method (mean over
    seeds), one line style per OOD set."""
    frame = curve_frame(records, source)
    methods = [m for m in (method_order or frame["method"].unique()) if m in set(frame["method"])]
    sets = sorted(frame["ood"].unique())
    colours = dict(zip(methods, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), layout="constrained")
    for method in methods:
        own = frame[(frame["method"] == method) & (frame["ood"] == sets[0])]
        axes[0].plot(own["threshold"], own["accuracy"], color=colours[method], label=method)
        axes[1].plot(own["threshold"], own["in_share"], color=colours[method])
        for style, name in zip(STYLES, sets):
            part = frame[(frame["method"] == method) & (frame["ood"] == name)]
            axes[2].plot(part["threshold"], part["out_share"], color=colours[method], linestyle=style)
    axes[0].set(xlabel="confidence threshold τ", ylabel="accuracy on test rows with max prob ≥ τ",
                title="accuracy vs confidence")
    axes[1].set(xlabel="confidence threshold τ", ylabel="share of test rows with max prob ≥ τ",
                title="test rows kept", ylim=(0, 1.02))
    axes[2].set(xlabel="confidence threshold τ", ylabel="share of OOD rows with max prob ≥ τ",
                title="OOD rows kept", ylim=(0, 1.02))
    axes[2].legend([plt.Line2D([], [], color="black", linestyle=style) for style, _ in zip(STYLES, sets)],
                   [f"OOD set {name}" for name in sets], fontsize=8)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{source}: confidence on test and out-of-distribution inputs (mean over seeds)")
    save_figure(fig, path)
    return frame.assign(source=source)[["source", "method", "ood", "threshold", "accuracy", "in_share", "out_share"]]
