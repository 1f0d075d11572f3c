"""Squared kernel calibration error (Widmann, Lindsten & Zachariah 2019, §3–4).

With the matrix-valued kernel k(p, p')·I_C, SKCE = E[h((P, Y), (P', Y'))] for independent pairs,
h((p, y), (p', y')) = k(p, p')·⟨e_y − p, e_{y'} − p'⟩, which is 0 exactly when the model is
calibrated (canonical, "strong" calibration). The scalar kernel is the exponential (Laplacian)
kernel k(p, p') = exp(−‖p − p'‖₂ / ν) with ν = 1 — the kernel KCal reports SKCE with
(``ExponentialKernel ⊗ WhiteKernel`` in CalibrationErrors.jl).

* ``skce.ul``: the unbiased linear-time estimator (2/n) Σ_{i ≤ n/2} h(Z_{2i−1}, Z_{2i}) over
  consecutive disjoint pairs (Widmann et al. Eq. 5; "blocksize 2").
* ``skce.uq``: the unbiased quadratic estimator, the mean of h over all pairs i < j (a U-statistic),
  computed in row blocks so memory stays O(block · n).
Both can be negative; their expectation is 0 for a calibrated model.
"""

from __future__ import annotations

import numpy as np

BANDWIDTH = 1.0
BLOCK = 1024


def _residuals(probs, labels):
    probs = np.asarray(probs, dtype=np.float64)
    residual = -probs.copy()
    residual[np.arange(labels.size), labels] += 1.0
    return probs, residual


def skce_ul(probs, labels, bandwidth: float = BANDWIDTH) -> float:
    """Unbiased linear SKCE over consecutive disjoint pairs of instances.

    ⟨e_y − p, e_y' − p'⟩ = 1[y = y'] − p_{y'} − p'_y + ⟨p, p'⟩, so no residual matrix is formed."""
    probs = np.asarray(probs, dtype=np.float64)
    m = probs.shape[0] // 2
    if m == 0:
        raise ValueError("skce.ul needs at least 2 instances")
    p, q, y, z = probs[0:2 * m:2], probs[1:2 * m:2], labels[0:2 * m:2], labels[1:2 * m:2]
    rows = np.arange(m)
    inner = (y == z) - p[rows, z] - q[rows, y] + np.einsum("ij,ij->i", p, q)
    kernel = np.exp(-np.linalg.norm(p - q, axis=1) / bandwidth)
    return float(np.mean(kernel * inner))


def skce_uq(probs, labels, bandwidth: float = BANDWIDTH, block: int = BLOCK) -> float:
    """Unbiased quadratic SKCE: mean of h over all pairs i ≠ j, in row blocks."""
    probs, residual = _residuals(probs, labels)
    n = probs.shape[0]
    if n < 2:
        raise ValueError("skce.uq needs at least 2 instances")
    sq_norm = np.sum(probs**2, axis=1)
    total = 0.0
    for start in range(0, n, block):
        rows = slice(start, min(start + block, n))
        dist2 = sq_norm[rows, None] + sq_norm[None, :] - 2 * probs[rows] @ probs.T
        kernel = np.exp(-np.sqrt(np.maximum(dist2, 0.0)) / bandwidth)
        h = kernel * (residual[rows] @ residual.T)
        total += h.sum() - np.trace(h[:, rows])  # drop the diagonal i = j
    return float(total / (n * (n - 1)))
