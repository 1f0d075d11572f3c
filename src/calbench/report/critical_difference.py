"""Critical-difference diagrams (Demšar 2006, Fig. 1; the Dirichlet paper's Supp. C): the drawing of a
:class:`calbench.stats.ranks.RankTest`, whose statistics live in :mod:`calbench.stats.ranks`."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection

from calbench.report.plotting import plt, save_figure
from calbench.stats.ranks import RankTest


def _cliques(avg: np.ndarray, cd: float) -> list[tuple[int, int]]:
    """Maximal runs [i, j] of sorted ranks whose spread is below the CD (Nemenyi groups)."""
    runs = [(i, int(np.searchsorted(avg, avg[i] + cd, side="left")) - 1) for i in range(avg.size)]
    runs = [(i, j) for i, j in runs if j > i]
    return [(i, j) for i, j in runs if not any(a <= i and j <= b and (a, b) != (i, j) for a, b in runs)]


def draw_cd(ax, result: RankTest, group: dict[str, str] | None = None) -> None:
    """Demšar-style diagram: rank axis (1 on the left), names hung from their average rank, CD bar; with
    ``group`` (:func:`calbench.stats.ranks.best_group`) each name also says on how many sources it is tied with
    the best."""
    names, avg = list(result.average_ranks.index), result.average_ranks.to_numpy()
    k = len(names)
    left = (k + 1) // 2
    ax.set(xlim=(0.4, k + 0.6), ylim=(-0.6 * (left + 0.7), 1.6))
    ax.axis("off")
    ax.hlines(0, 1, k, color="black", linewidth=1)
    ax.vlines(np.arange(1, k + 1), 0, 0.15, color="black", linewidth=1)
    for r in range(1, k + 1):
        ax.text(r, 0.25, str(r), ha="center", va="bottom", fontsize=8)
    on_left = np.arange(k) < left
    depth = -0.6 * (np.where(on_left, np.arange(k), np.arange(k)[::-1]) + 1)
    end = np.where(on_left, 0.5, k + 0.5)
    hangers = np.stack([np.stack([avg, avg, end], 1), np.stack([np.zeros(k), depth, depth], 1)], axis=2)
    ax.add_collection(LineCollection(hangers, colors="black", linewidths=0.8))  # one artist, not one per method
    for name, rank, y, x, is_left in zip(names, avg, depth, end, on_left):
        tied = f", best group {group.get(name, '0')}" if group else ""
        ax.text(x - 0.05 if is_left else x + 0.05, y, f"{name} ({rank:.2f}{tied})", ha="right" if is_left else "left",
                va="center", fontsize=8)
    ax.plot([1, 1 + result.cd], [1.1, 1.1], color="black", linewidth=1.5)
    ax.vlines([1, 1 + result.cd], 1.0, 1.2, color="black", linewidth=1.5)
    ax.text(1 + result.cd / 2, 1.25, f"CD = {result.cd:.2f}", ha="center", va="bottom", fontsize=8)
    if not result.significant:
        return
    if result.test == "nemenyi":
        for level, (i, j) in enumerate(_cliques(avg, result.cd)):
            y = -0.15 - 0.12 * level
            ax.plot([avg[i] - 0.03, avg[j] + 0.03], [y, y], color="tab:red", linewidth=3)
    else:
        reach = avg[0] + result.cd
        ax.plot([max(avg[0] - result.cd, 1), reach], [-0.15, -0.15], color="tab:red", linewidth=3)
        ax.text(reach + 0.05, -0.15, f"within one CD of {names[0]}", va="center", fontsize=8, color="tab:red")


def cd_figure(result: RankTest, path, group: dict[str, str] | None = None, left_out=()) -> None:
    """The diagram of one metric, titled with the Friedman result; ``group``: see :func:`draw_cd`; ``left_out``:
    the methods that ran on fewer sources, named under the figure."""
    k = len(result.average_ranks)
    # width grows slower than the height with k: a wide run stays within a 3:1 figure
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * k + 3), 1.6 + 0.35 * k))
    note = ("\nin parentheses: average rank, sources on which a paired bootstrap of the test rows ties the method "
            "with the best (Holm)") if group else ""
    ax.set_title(f"{result.metric}: N = {result.n} sources, k = {k} methods, Friedman χ²_F = "
                 f"{result.statistic:.2f}\n{result.verdict()}{note}", fontsize=9)
    draw_cd(ax, result, group)
    if left_out:
        fig.text(0.5, 0.01, f"left out (ran on fewer sources): {', '.join(left_out)}", ha="center", fontsize=8)
    save_figure(fig, path)
