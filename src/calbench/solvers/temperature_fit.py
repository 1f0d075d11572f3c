"""The temperature-scaling fit (Guo et al. 2017; LECE paper §2.5): the β = 1/T minimising the log-loss of σ(β z).

The loss ``mean_i(logsumexp(β z_i) − β z_{i,y_i})`` is convex in β with gradient ``mean(E_p[z] − z_y)`` and
curvature ``mean(Var_p[z]) ≥ 0``, so a safeguarded Newton iteration inside a bracket finds the exact minimiser
(to float64 precision) in a few steps; no step size or starting value to tune. Each evaluation is one compiled
pass over the logits (:mod:`calbench.kernels.scaled_softmax`), and so is the prediction's softmax; row blocks
run on the cores' threads (1,000 classes × 25,000 rows would otherwise run on one core).
"""

from __future__ import annotations

import numpy as np

from calbench.kernels.scaled_softmax import moments_block, softmax_block
from calbench.parallel import thread_map

BETA_MIN, BETA_MAX = 1e-6, 1e6
#: Above this many logits the Newton iteration starts from the β fitted on every m-th row (m chosen to
#: leave about this many), so that the full data pays 2–3 Newton steps instead of 6–10 from β = 1.
SUBSAMPLE_ENTRIES = 1_000_000


#: Row moments Σ_j exp(β d_ij)·d_ij^p (d = z − row max), p ≤ MOMENT_ORDER, kept from the first full-data evaluation (see
#: :func:`_series_root`); the power series in δ they give is truncated after δ^(MOMENT_ORDER − 2).
MOMENT_ORDER = 7
#: The series stands in for the data only where |δ| ≤ SERIES_RADIUS·β (its relative error there is below
#: about SERIES_RADIUS^(MOMENT_ORDER − 1), as exp(β d)·|d|^p ≤ (p / (e β))^p for d ≤ 0).
SERIES_RADIUS = 0.01


#: Logits per block of rows of the compiled passes (16 MB): the blocks run on the cores' threads.
BLOCK_ENTRIES = 1 << 21


def _in_blocks(kernel, z: np.ndarray, *args, block_entries: int = BLOCK_ENTRIES) -> None:
    """``kernel(start, stop, *args)`` over blocks of z's rows of about ``block_entries`` logits, on the cores'
    threads (each block writes its own rows of the output)."""
    n, rows = z.shape[0], max(1, block_entries // z.shape[1])
    thread_map(lambda start: kernel(start, min(start + rows, n), *args), range(0, n, rows))


def _row_moments(beta: float, z: np.ndarray, top: np.ndarray, order: int, block_entries: int = BLOCK_ENTRIES
                 ) -> np.ndarray:
    """Per row Σ_j exp(β d_ij)·d_ij^p for p = 0..order ([order + 1, n]), d = z − ``top`` (the row max)."""
    moments = np.empty((order + 1, z.shape[0]))
    _in_blocks(moments_block, z, beta, z, top, moments, block_entries=block_entries)
    return moments


def softmax_scaled(z: np.ndarray, beta: float, block_entries: int = BLOCK_ENTRIES) -> np.ndarray:
    """σ(β z) row-wise, float64."""
    z = np.ascontiguousarray(z, dtype=np.float64)
    probs = np.empty_like(z)
    _in_blocks(softmax_block, z, beta, z, probs, block_entries=block_entries)
    return probs


def _gradient_curvature(moments: np.ndarray, z_true: np.ndarray, delta: float = 0.0) -> tuple[float, float]:
    """Gradient mean(E_p[z] − z_y) and curvature mean(Var_p[z]) at β + δ from the row moments M_p at β.

    δ = 0 is exact; otherwise Σ_j e^{(β+δ) z} z^k = Σ_m δ^m/m! · M_{m+k}, truncated after the moments held."""
    terms = moments.shape[0] - 2
    coef = np.cumprod(np.concatenate([[1.0], np.full(terms - 1, delta) / np.arange(1, terms)]))
    s0, s1, s2 = (coef @ moments[k:k + terms] for k in range(3))
    mean_z = s1 / s0
    var_z = s2 / s0 - mean_z**2
    return float(np.mean(mean_z - z_true)), float(np.mean(np.maximum(var_z, 0.0)))


def _series_root(beta: float, moments: np.ndarray, z_true: np.ndarray, tol: float) -> float | None:
    """The root of the series gradient near β by Newton steps (O(n) each, no pass over the data), or None
    where it leaves the radius in which the series holds. A proposal only: the caller evaluates the data
    there."""
    delta = 0.0
    for _ in range(50):
        g, h = _gradient_curvature(moments, z_true, delta)
        if not h > 0:
            return None
        step = g / h
        delta -= step
        if abs(delta) > SERIES_RADIUS * beta:
            return None
        if abs(step) <= tol * beta:
            return beta + delta
    return None


def fit_inverse_temperature(z: np.ndarray, y: np.ndarray, tol: float = 1e-12, max_iter: int = 200,
                            subsample_entries: int = SUBSAMPLE_ENTRIES, block_entries: int = BLOCK_ENTRIES) -> float:
    """The β = 1/T minimising the log-loss of σ(β z), clamped to [1e-6, 1e6].

    Large inputs start from the β of a row subsample (every m-th row). The first evaluation on the data
    keeps the row moments of exp(β z), whose power series gives the gradient near β: its root (found
    without further passes over the data) is where the data are evaluated next. The stopping test is on
    the full data either way, so the start and the series change the iterations, not the answer (beyond
    ``tol``)."""
    beta = 1.0
    stride = -(-z.size // subsample_entries)
    if stride > 1 and z.shape[0] // stride >= 100:
        beta = fit_inverse_temperature(np.ascontiguousarray(z[::stride]), y[::stride], tol, max_iter,
                                       subsample_entries, block_entries)
    z = np.ascontiguousarray(z, dtype=np.float64)
    top = z.max(axis=1)
    z_true = z[np.arange(y.size), y] - top
    lo, hi = BETA_MIN, BETA_MAX
    for iteration in range(max_iter):
        moments = _row_moments(beta, z, top, MOMENT_ORDER if iteration == 0 else 2, block_entries)
        g, h = _gradient_curvature(moments, z_true)
        if g > 0:
            hi = beta
        else:
            lo = beta
        if abs(g) <= tol * max(1.0, abs(beta) * h) or hi / lo < 1 + 1e-14:
            break
        step = beta - g / h if h > 0 else np.nan
        if iteration == 0:
            step = _series_root(beta, moments, z_true, tol) or step
        beta = step if lo < step < hi else np.sqrt(lo * hi)  # bisect in log space when Newton leaves the bracket
    return float(np.clip(beta, BETA_MIN, BETA_MAX))
