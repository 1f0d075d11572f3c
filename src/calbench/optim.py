"""Optimisation helpers shared by the parametric fits (affine-softmax maps, PL/PL3 maps)."""

from __future__ import annotations

import numpy as np


class NotConvergedWarning(RuntimeWarning):
    """A fit stopped at its iteration bound (``max_iter``) before its convergence test was met."""


def armijo(evaluate, theta, step, value, decrease):
    """Backtracking from the full (Newton) step until the objective falls by 1e-4·t·``decrease`` (Armijo),
    halving t down to 1e-10; returns t and ``evaluate``'s outputs (value first) at θ + t·step.

    Batched: ``value`` and ``decrease`` may be arrays [F] of independent problems (the rows of ``theta`` and
    ``step``, which ``evaluate`` maps to F values), each with its own t."""
    t = np.ones(np.shape(value))
    while True:
        out = evaluate(theta + t[..., None] * step)
        accepted = (out[0] <= value - 1e-4 * t * decrease) | (t < 1e-10)
        if np.all(accepted):
            return (t, *out)
        t = np.where(accepted, t, t / 2)
