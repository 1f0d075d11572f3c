"""Maximum mean calibration error (Kumar, Sarawagi & Jain, ICML 2018, §3).

MMCE is the RKHS norm ‖E[(c − r) φ(r)]‖ of the correctness c = 1[argmax p̂ = y] minus the confidence
r = max p̂, for the Laplacian kernel k(r, r') = exp(−|r − r'| / w), w = 0.4 (the paper's kernel width;
netcal's ``exp(−2.5|r − r'|)``). Its empirical estimate over n rows is

    MMCE = sqrt( (1/n²) Σ_{i,j} (c_i − r_i)(c_j − r_j) k(r_i, r_j) ),

reported as the root (as netcal reports it; the paper's Eq. for the estimate is its square).

The double sum is O(n²) as written; on one-dimensional confidences the Laplacian kernel factorises along
the sorted order, k(r_i, r_j) = exp(−(r_i − r_j)/w) for r_j ≤ r_i, so with a_i = c_i − r_i sorted by r,
F_i = Σ_{j ≤ i} a_j exp(−(r_i − r_j)/w) is a prefix sum of a_j exp(r_j/w) scaled by exp(−r_i/w), and
Σ_{i,j} a_i a_j k = 2 Σ_i a_i F_i − Σ_i a_i²: exact, O(n log n). To keep exp(r/w) finite for any width the
sorted range is cut into spans of at most ``SPAN_WIDTHS`` widths, each summed relative to its first value and
carried into the next by one exponential factor.
"""

from __future__ import annotations

import numpy as np

WIDTH = 0.4
#: Largest (r − r_start)/w inside one span: exp(600) ≈ 4e260 leaves room for sums of 10⁴⁵ rows in float64.
SPAN_WIDTHS = 600.0


def laplacian_quadratic_form(r: np.ndarray, a: np.ndarray, width: float = WIDTH) -> float:
    """Σ_{i,j} a_i a_j exp(−|r_i − r_j| / width), exactly, in O(n log n)."""
    if width <= 0:
        raise ValueError(f"kernel width must be positive, got {width}")
    if np.size(r) == 0:
        raise ValueError("the Laplacian quadratic form needs at least one point")
    order = np.argsort(r)
    r, a = np.asarray(r, dtype=np.float64)[order], np.asarray(a, dtype=np.float64)[order]
    span = np.floor((r - r[0]) / (width * SPAN_WIDTHS)).astype(np.int64)
    starts = np.flatnonzero(np.r_[True, span[1:] != span[:-1]])
    ends = np.r_[starts[1:], r.size]
    carry, total = 0.0, 0.0  # carry: Σ over earlier spans of a_j exp((r_j − origin)/w), origin = this span's start
    previous_origin = r[0]
    for start, end in zip(starts, ends):
        origin = r[start]
        carry *= np.exp(-(origin - previous_origin) / width)
        scaled = np.exp((r[start:end] - origin) / width)
        prefix = carry + np.cumsum(a[start:end] * scaled)
        total += float(np.sum(a[start:end] * prefix / scaled))
        carry, previous_origin = prefix[-1], origin
    return 2.0 * total - float(np.sum(a * a))


def mmce(confidence: np.ndarray, hits: np.ndarray, width: float = WIDTH) -> float:
    """The MMCE estimate sqrt((1/n²) Σ_{i,j} (c_i − r_i)(c_j − r_j) k(r_i, r_j)) of confidences and hits."""
    confidence = np.asarray(confidence, dtype=np.float64)
    square = laplacian_quadratic_form(confidence, np.asarray(hits, dtype=np.float64) - confidence, width)
    return float(np.sqrt(max(square, 0.0)) / confidence.size)
