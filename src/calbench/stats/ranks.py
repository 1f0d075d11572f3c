"""Friedman test and critical differences over sources (Dirichlet paper §4.1 and Supp. C; Demšar 2006).

Spec lece_dirichlet.md §2.10: rank the k methods on each of the N sources (ties share the averaged rank),
then the Friedman statistic χ²_F = 12N/(k(k+1))·[Σ_j R_j² − k(k+1)²/4] with R_j the average ranks,
divided by the usual tie correction (which the paper's reported statistic needs), χ² with k − 1 degrees
of freedom. Where p < ``friedman_alpha`` (0.005 in the Dirichlet paper), a post-hoc
test gives the critical difference CD = q_α·√(k(k+1)/(6N)) (Demšar 2006 §3.2.2):

* ``bonferroni-dunn`` (the Dirichlet paper's): q_α = z_{1−α/(2(k−1))}, every method against the best one;
  Demšar's Table 5(b), e.g. q_0.05 = 2.638 for k = 7;
* ``nemenyi``: q_α = (studentized range quantile at 1 − α, k groups, ∞ df)/√2, all pairs; Demšar's
  Table 5(a), e.g. q_0.05 = 2.949 for k = 7.

The test ranks methods on the sources where every compared method ran, and says nothing on a few sources: with
N = 2 and 20 methods the CD spans most of the rank axis. It is run only on :data:`MIN_SOURCES` sources or more
(Demšar 2006 §3.2.2 asks for "enough" data sets; the χ² approximation of χ²_F is poor for N < 5 at small k), the
methods that ran on fewer sources left out and named (:func:`comparable_ranks`); below that the tables say
:data:`TOO_FEW` and the workflow draws no diagram.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is not imported by the rule files that read MIN_SOURCES
    import pandas as pd

#: Sources with every compared method below which no Friedman test or critical-difference diagram is made.
MIN_SOURCES = 5
TOO_FEW = "too few sources to rank methods across sources: read the per-source best groups"

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


def rank_test(ranks: pd.DataFrame, metric_id: str, test: str = "bonferroni-dunn", alpha: float = 0.05,
              friedman_alpha: float = 0.005) -> RankTest | None:
    """Friedman and CD of a rank matrix (rows sources, columns methods: :func:`comparable_ranks`, whose ranks are
    on the tables' displayed means); None with fewer than 2 methods or :data:`MIN_SOURCES` sources."""
    if ranks.shape[1] < 2 or ranks.shape[0] < MIN_SOURCES:
        return None
    statistic, p_value = friedman(ranks.to_numpy())
    n, k = ranks.shape
    return RankTest(metric_id, ranks.mean(axis=0).sort_values(), n, statistic, p_value,
                    critical_difference(k, n, alpha, test), test, alpha, friedman_alpha,
                    bool(p_value < friedman_alpha))


def comparable_ranks(ranks: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rank matrix (rows sources, columns methods; NaN where a method did not run) restricted to the methods
    that ran on every source, re-ranked among them (ties share the averaged rank), and the methods left out. A
    source on which fewer than half the methods ran is left out first, so that it does not exclude the others."""
    ranks = ranks.loc[ranks.notna().sum(axis=1) * 2 >= ranks.shape[1]]
    ran_everywhere = ranks.notna().all(axis=0)
    kept = ranks.loc[:, ran_everywhere]
    return kept.rank(axis=1, method="average"), [m for m in ranks.columns if not ran_everywhere[m]]


def best_group(verdicts: pd.DataFrame, metric_id: str) -> dict[str, str] | None:
    """``{method: "k/N"}``: the sources (of the N resampled sources the method ran on: a method that needs
    embeddings runs on fewer) on which the paired bootstrap of the test rows
    (:mod:`calbench.stats.paired`, the tables' ``intervals.csv``) ties the method with the best; None
    where ``metric_id`` was not resampled."""
    rows = verdicts[(verdicts["metric"] == metric_id)]
    if rows.empty or rows["p_value"].isna().all():
        return None
    per_method = rows.groupby("method")
    tied, total = per_method["tied_with_best"].sum(), per_method["source"].nunique()
    return {method: f"{int(tied[method])}/{int(total[method])}" for method in tied.index}
