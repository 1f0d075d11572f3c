"""Conformal temperature scaling, ConfTS (Xi, Huang, Liu, Feng & Wei, TMLR 2025, "Does confidence calibration
improve conformal prediction?", §5): a temperature fitted for the efficiency of adaptive prediction sets
instead of the log-loss.

The calibration rows are divided once at random into a part A (``fraction`` of them) and a part B. For a
temperature T, τ(T) is the split-conformal threshold (the ⌈(n_A + 1)(1 − α)⌉-th smallest) of the APS scores of
part A's true labels, and the *efficiency gap* of a row of part B is τ(T) − S_T(x, y), S_T the APS score (the
probability mass ranked above the true label plus its own, non-randomised) of σ(z / T). ConfTS minimises the
mean squared gap over part B, which is zero when every true label sits exactly on the threshold: the smallest
sets that still cover. The loss decreases towards T → 0 on many networks (every score tends to 1, and so does τ), so
the fitted T is where the paper's descent stops, not a minimum: as the authors' code does, gradient descent on
log T from log 1.5 with step 0.8, stopped when a step moves log T by less than 0.05 (at most 10,000 steps). The
gradient is that of the exact loss (the order statistic that sets τ held fixed, as automatic differentiation
through a sort does), by a central difference. The fitted map is σ(z / T), as temperature scaling's.
"""

from __future__ import annotations

import math

import numpy as np

from calbench.methods.constraints import Interval
from calbench.methods.registry import register
from calbench.methods.temperature import TemperatureScaling
from calbench.metrics.conformal import conformal_quantile, sort_rows, true_label_scores
from calbench.scores import Scores
from calbench.solvers.temperature_fit import softmax_scaled

#: The authors' descent: start, step size and stopping threshold on log T, and the most steps.
START_T, STEP, STOP, MAX_STEPS = 1.5, 0.8, 0.05, 10_000
#: Central-difference width on log T for the gradient.
H = 1e-5


def efficiency_loss(logits, labels, temperature: float, part_a, part_b, alpha: float) -> float:
    """Xi et al.'s ConfTS loss at ``temperature``: mean over ``part_b`` of (τ − S(x, y))², τ the conformal
    threshold of ``part_a``'s APS scores (module docstring)."""
    probs = softmax_scaled(logits, 1.0 / temperature)
    scores_a = true_label_scores(sort_rows(probs[part_a]), labels[part_a], 1.0)
    scores_b = true_label_scores(sort_rows(probs[part_b]), labels[part_b], 1.0)
    tau = conformal_quantile(scores_a, alpha)
    if not np.isfinite(tau):  # too few rows in part A for this α: every set is full, no gap to measure
        tau = 1.0
    return float(np.mean((tau - scores_b) ** 2))


@register("conf_ts")
class ConformalTemperatureScaling(TemperatureScaling):
    """One temperature, fitted for small APS sets at miscoverage ``alpha`` (Xi et al. 2025); preserves the
    argmax. ``fraction``: the share of the calibration rows whose scores give the threshold; ``seed``: their
    random division. Fitted attribute ``temperature_``."""

    _parameter_constraints = {"alpha": [Interval("real", 0, 1, closed="neither")],
                              "fraction": [Interval("real", 0, 1, closed="neither")],
                              "seed": [Interval("int", 0)]}

    def __init__(self, *, alpha: float = 0.1, fraction: float = 0.5, seed: int = 0):
        self.alpha = alpha
        self.fraction = fraction
        self.seed = seed

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        n = y.size
        if n < 4:
            raise ValueError(f"conf_ts needs at least 4 calibration rows to divide into its two parts; got {n}")
        order = np.random.default_rng([self.seed, 1309]).permutation(n)
        cut = min(max(int(round(self.fraction * n)), 1), n - 1)
        part_a, part_b = order[:cut], order[cut:]
        logits = scores.logits

        def loss(log_t):
            return efficiency_loss(logits, y, math.exp(log_t), part_a, part_b, self.alpha)

        log_t = math.log(START_T)
        for _ in range(MAX_STEPS):  # one softmax and sort of the rows per loss evaluation
            step = STEP * (loss(log_t + H) - loss(log_t - H)) / (2 * H)
            log_t -= step
            if abs(step) < STOP:
                break
        self.temperature_ = float(math.exp(log_t))
