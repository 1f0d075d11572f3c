"""Friedman test and critical-difference diagrams over sources (Dirichlet paper §4.1 and Supp. C; Demšar 2006).

Spec lece_dirichlet.md §2.10: rank the k methods on each of the N sources (ties share the averaged rank),
then the Friedman statistic χ²_F = 12N/(k(k+1))·[Σ_j R_j² − k(k+1)²/4] with R_j the average ranks,
divided by the usual tie correction (which the paper's reported statistic needs), χ² with k − 1 degrees
of freedom. Where p < ``friedman_alpha`` (0.005 in the Dirichlet paper), a post-hoc
test gives the critical difference CD = q_α·√(k(k+1)/(6N)) (Demšar 2006 §3.2.2):

* ``bonferroni-dunn`` (the Dirichlet paper's): q_α = z_{1−α/(2(k−1))}, every method against the best one;
  Demšar's Table 5(b), e.g. q_0.05 = 2.638 for k = 7;
* ``nemenyi``: q_α = (studentized range quantile at 1 − α, k groups, ∞ df)/√2, all pairs; Demšar's
  Table 5(a), e.g. q_0.05 = 2.949 for k = 7.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection

from calbench.report.plotting import plt, save_figure
from calbench.report.tables import summary

TESTS = ("bonferroni-dunn", "nemenyi")


def friedman(ranks, tie_correction: bool = True) -> tuple[float, float]:
    """χ²_F and its p-value from a rank matrix ``[N, k]`` (rows = datasets, columns = methods).

    With ``tie_correction`` χ²_F is divided by 1 − Σ(t³ − t)/(N k (k² − 1)), t the size of each group of
    tied ranks (as ``scipy.stats.friedmanchisquare``): this reproduces the Dirichlet paper's Supp. Table 4
    (73.8, p = 6.71e-14); the uncorrected formula of Demšar (2006) gives 73.2 there.
    """
    from scipy import stats  # lazy: the other figure jobs import this module but need no scipy.stats (~0.4 s)

    ranks = np.asarray(ranks, dtype=np.float64)
    n, k = ranks.shape
    if n < 1 or k < 2:
        raise ValueError(f"Friedman test: needs at least 1 dataset and 2 methods, got a {n} x {k} rank matrix")
    avg = ranks.mean(axis=0)
    statistic = 12 * n / (k * (k + 1)) * (np.sum(avg**2) - k * (k + 1) ** 2 / 4)
    if tie_correction:
        tied = (ranks[:, :, None] == ranks[:, None, :]).sum(axis=2)  # size of the tie group of each entry
        correction = 1 - np.sum(tied**2 - 1) / (n * k * (k * k - 1))
        statistic = statistic / correction if correction > 0 else 0.0
    return float(statistic), float(stats.chi2.sf(statistic, k - 1))


def critical_value(k: int, alpha: float = 0.05, test: str = "bonferroni-dunn") -> float:
    """q_α of Demšar (2006) Table 5 for ``k`` methods."""
    from scipy import stats  # lazy, as in friedman

    if test == "bonferroni-dunn":
        return float(stats.norm.ppf(1 - alpha / (2 * (k - 1))))
    if test == "nemenyi":
        return float(stats.studentized_range.ppf(1 - alpha, k, np.inf) / np.sqrt(2))
    raise ValueError(f"critical-difference test must be one of {TESTS}, got {test!r}")


def critical_difference(k: int, n: int, alpha: float = 0.05, test: str = "bonferroni-dunn") -> float:
    """CD = q_α·√(k(k+1)/(6N)): the least average-rank difference that is significant."""
    return critical_value(k, alpha, test) * np.sqrt(k * (k + 1) / (6 * n))


@dataclass(frozen=True)
class RankTest:
    """Friedman test and post-hoc CD of one metric."""

    metric: str
    average_ranks: pd.Series  # method → average rank, best first
    n: int
    statistic: float
    p_value: float
    cd: float
    test: str
    alpha: float
    friedman_alpha: float
    significant: bool

    def verdict(self) -> str:
        """The test, its α and its outcome in words ("Friedman p = 0.044: not significant at α = 0.005, ...")."""
        if not self.significant:
            return (f"Friedman p = {self.p_value:.3g}: not significant at α = {self.friedman_alpha:g}, "
                    "the methods are not ranked apart")
        return (f"Friedman p = {self.p_value:.3g}: significant at α = {self.friedman_alpha:g}; {self.test} "
                f"CD = {self.cd:.2f} at α = {self.alpha:g}: average ranks further apart than the CD differ")


def rank_test(long: pd.DataFrame, metric_id: str, test: str = "bonferroni-dunn", alpha: float = 0.05,
              friedman_alpha: float = 0.005) -> RankTest | None:
    """Ranks over the sources that have every method, Friedman, CD; None if < 2 methods.

    Methods are ranked on the displayed (rounded) means as in the tables, ties share the averaged rank.
    """
    ranks = summary(long, metric_id, ties="average")[2].dropna(axis=0, how="any")
    if ranks.shape[1] < 2 or ranks.shape[0] < 1:
        return None
    statistic, p_value = friedman(ranks.to_numpy())
    n, k = ranks.shape
    return RankTest(metric_id, ranks.mean(axis=0).sort_values(), n, statistic, p_value,
                    critical_difference(k, n, alpha, test), test, alpha, friedman_alpha,
                    bool(p_value < friedman_alpha))


def _cliques(avg: np.ndarray, cd: float) -> list[tuple[int, int]]:
    """Maximal runs [i, j] of sorted ranks whose spread is below the CD (Nemenyi groups)."""
    runs = [(i, int(np.searchsorted(avg, avg[i] + cd, side="left")) - 1) for i in range(avg.size)]
    runs = [(i, j) for i, j in runs if j > i]
    return [(i, j) for i, j in runs if not any(a <= i and j <= b and (a, b) != (i, j) for a, b in runs)]


def best_group(verdicts: pd.DataFrame, metric_id: str) -> dict[str, str] | None:
    """``{method: "k/N"}``: the sources (of the N resampled sources the method ran on: a method that needs
    embeddings runs on fewer) on which the paired bootstrap of the test rows
    (:mod:`calbench.report.paired_bootstrap`, the tables' ``intervals.csv``) ties the method with the best; None
    where ``metric_id`` was not resampled."""
    rows = verdicts[(verdicts["metric"] == metric_id)]
    if rows.empty or rows["p_value"].isna().all():
        return None
    per_method = rows.groupby("method")
    tied, total = per_method["tied_with_best"].sum(), per_method["source"].nunique()
    return {method: f"{int(tied[method])}/{int(total[method])}" for method in tied.index}


def draw_cd(ax, result: RankTest, group: dict[str, str] | None = None) -> None:
    """Demšar-style diagram: rank axis (1 on the left), names hung from their average rank, CD bar; with
    ``group`` (:func:`best_group`) each name also says on how many sources it is tied with the best."""
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


def cd_figure(result: RankTest | None, path, metric_id: str, group: dict[str, str] | None = None) -> None:
    """The diagram of one metric, titled with the Friedman result (or a note when it cannot be drawn); ``group``:
    see :func:`draw_cd`."""
    if result is None:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, f"{metric_id}: needs 2+ methods on a common source", ha="center", va="center")
        save_figure(fig, path)
        return
    k = len(result.average_ranks)
    # width grows slower than the height with k: a wide run stays within a 3:1 figure
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * k + 3), 1.6 + 0.35 * k))
    note = ("\nin parentheses: average rank, sources on which a paired bootstrap of the test rows ties the method "
            "with the best (Holm)") if group else ""
    ax.set_title(f"{metric_id}: N = {result.n} sources, k = {k} methods, Friedman χ²_F = {result.statistic:.2f}\n"
                 f"{result.verdict()}{note}", fontsize=9)
    draw_cd(ax, result, group)
    save_figure(fig, path)
