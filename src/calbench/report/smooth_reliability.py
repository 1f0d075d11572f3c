"""The smooth reliability curve and its bootstrap band (Błasiok & Nakkiran 2023, "Smooth ECE"), and the binned
curve's consistency bars (Bröcker & Smith 2007, "Increasing the reliability of reliability diagrams").

Smooth curve: the residuals r_i = y_i − f_i are kernel-smoothed in the coordinate u the figure draws (u = f on a
linear axis, u = logit f on a logit axis, relplot's ``LogitGaussianKernel`` convention); the curve is
μ(t) = f(t) + Σ_i K_σ(t, u_i) r_i / Σ_i K_σ(t, u_i). On the linear axis K is the Gaussian reflected at 0 and 1 and
σ is the paper's fixed point σ* = smECE_σ* (§4; smECE_σ = ∫ |Σ_i K_σ(t, f_i) r_i| / n dt), so the curve is the
one whose weighted distance to the diagonal is the smECE; on the logit axis σ is Silverman's rule on the u_i.
The instances are first rounded to a grid of :data:`GRID` cells (as relplot does), which makes the bootstrap
cheap at any number of instances: a resample draws each cell's count of y = 0 and y = 1 instances from a Poisson
law (the Poisson bootstrap, Hanley & MacGibbon 2006), and the band is the pointwise quantiles of the resampled
curves.

Consistency bars: Bröcker & Smith resample the forecasts and draw outcomes from them, under the hypothesis that
the forecasts are calibrated. With the bins held fixed and the forecasts of bin k resampled within it, each
surrogate outcome is Bernoulli(p̄_k) and independent, so the bin's surrogate frequency is Binomial(n_k, p̄_k)/n_k
exactly: the bars are its quantiles, without Monte Carlo. A bin average outside its bar is more miscalibrated than
sampling noise explains at that level.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import bdtr, bdtrik, expit, logit

#: Cells of the grid the instances are rounded to, points of the mesh the curve is evaluated on, bootstrap resamples.
GRID, MESH, RESAMPLES = 400, 200, 200
#: The curve is drawn where the instances near a point (within the kernel's window) hold at least this many of the
#: rarer outcome at the curve's frequency: elsewhere it would rest on one or two events.
MIN_EVENTS = 2.0
#: Where a logit axis ends at the most: probabilities within 10⁻⁶ of 0 or 1 are drawn on its edge.
LOGIT_CLIP = 1e-6
#: The bisection for σ* stops when its bracket is this narrow in ln σ (σ* to 10⁻⁷ of itself, far below a pixel).
BANDWIDTH_TOLERANCE = 1e-7


def to_axis(scores: np.ndarray, logit_axis: bool) -> np.ndarray:
    """The drawn coordinate u of probabilities: themselves, or their logit (clipped to :data:`LOGIT_CLIP`)."""
    if not logit_axis:
        return np.asarray(scores, dtype=np.float64)
    return logit(np.clip(scores, LOGIT_CLIP, 1 - LOGIT_CLIP))


def from_axis(u: np.ndarray, logit_axis: bool) -> np.ndarray:
    return expit(u) if logit_axis else u


def choose_logit_axis(scores: np.ndarray) -> bool:
    """``auto``: a logit axis when more than half of the scores lie within 0.05 of 0 or 1 (an accurate network's
    confidences, or the classwise scores of many classes), where a linear axis would crowd them into one bin."""
    return bool(np.mean((scores < 0.05) | (scores > 0.95)) > 0.5)


def axis_range(scores: np.ndarray, logit_axis: bool) -> tuple[float, float]:
    """Limits (in u) that hold 99 % of the scores: [0, 1] on a linear axis; on a logit axis one decade beyond the
    0.5 % and 99.5 % quantiles (a distance d from 0 or 1 becomes d / 10), within ±logit(1 − :data:`LOGIT_CLIP`)."""
    if not logit_axis:
        return 0.0, 1.0
    lo, hi = np.quantile(np.clip(scores, LOGIT_CLIP, 1 - LOGIT_CLIP), [0.005, 0.995])
    lo, hi = max(lo / 10, LOGIT_CLIP), 1 - max((1 - hi) / 10, LOGIT_CLIP)
    return float(logit(lo)), float(logit(hi))


def _gaussian(t: np.ndarray, centres: np.ndarray, sigma: float, reflect: bool) -> np.ndarray:
    """Kernel matrix ``[len(t), len(centres)]``: the Gaussian density of t around each centre (reflected at 0
    and 1 when ``reflect``, so that it integrates to one over [0, 1])."""
    return _gaussian_of(_squared_distances(t, centres, reflect), sigma)


def _squared_distances(t: np.ndarray, centres: np.ndarray, reflect: bool) -> np.ndarray:
    """``[1 or 3, len(t), len(centres)]``: the squared distances of t to each centre (and, when ``reflect``, to the
    centre's mirror images at 0 and 1), computed once for every σ."""
    images = [centres, -centres, 2 - centres] if reflect else [centres]
    return np.stack([(t[:, None] - image[None, :]) ** 2 for image in images])


def _gaussian_of(squared: np.ndarray, sigma: float) -> np.ndarray:
    """The summed Gaussian densities of :func:`_squared_distances`'s distances at bandwidth σ; beyond 9σ, where the
    density is below 10⁻¹⁷ of its peak, it is 0 (and its exponential is not evaluated)."""
    exponent = squared * (-0.5 / sigma**2)
    density = np.exp(exponent, out=np.zeros_like(exponent), where=exponent > -40.5)
    return density.sum(axis=0) / (sigma * np.sqrt(2 * np.pi))


class GriddedPairs:
    """Instances ``(scores, hits)`` rounded to :data:`GRID` cells of [u_lo, u_hi]: per cell and outcome, the count
    and the mean score."""

    def __init__(self, scores: np.ndarray, hits: np.ndarray, logit_axis: bool, limits: tuple[float, float]):
        self.logit_axis, self.limits = logit_axis, limits
        u = np.clip(to_axis(scores, logit_axis), *limits)
        width = (limits[1] - limits[0]) / GRID
        cell = np.minimum(((u - limits[0]) / width).astype(np.int64), GRID - 1)
        index = cell + GRID * hits.astype(np.int64)
        self.counts = np.bincount(index, minlength=2 * GRID).reshape(2, GRID).astype(np.float64)
        score_sums = np.bincount(index, weights=scores, minlength=2 * GRID).reshape(2, GRID)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_scores = np.where(self.counts > 0, score_sums / self.counts, 0.0)
        #: Residual y − f of one instance in each (outcome, cell).
        self.residuals = np.array([0.0, 1.0])[:, None] - mean_scores
        self.centres = limits[0] + width * (np.arange(GRID) + 0.5)
        self.n = float(self.counts.sum())

    def mesh(self) -> np.ndarray:
        return np.linspace(*self.limits, MESH)

    def bandwidth(self) -> float:
        """σ* of smECE on a linear axis (bisection in log σ); Silverman's rule 0.9·min(sd, IQR/1.34)·n^(−1/5) on a
        logit axis."""
        weights = self.counts.sum(axis=0)
        if self.logit_axis:
            mean = np.average(self.centres, weights=weights)
            sd = np.sqrt(np.average((self.centres - mean) ** 2, weights=weights))
            cdf = np.cumsum(weights) / self.n
            iqr = self.centres[np.searchsorted(cdf, 0.75)] - self.centres[np.searchsorted(cdf, 0.25)]
            spread = min(sd, iqr / 1.34) if iqr > 0 else sd
            return float(max(0.9 * spread * self.n ** -0.2, 2 * (self.limits[1] - self.limits[0]) / GRID))
        mesh = self.mesh()
        residual_mass = (self.counts * self.residuals).sum(axis=0)
        held = residual_mass != 0  # empty cells add nothing to any smECE_σ
        squared = _squared_distances(mesh, self.centres[held], reflect=True)
        low, high = np.log(1e-4), np.log(1.0)
        while high - low > BANDWIDTH_TOLERANCE:
            sigma = np.exp((low + high) / 2)
            smece = np.trapezoid(np.abs(_gaussian_of(squared, sigma) @ residual_mass[held]), mesh) / self.n
            low, high = (np.log(sigma), high) if smece > sigma else (low, np.log(sigma))
        return float(np.exp((low + high) / 2))

    def curves(self, sigma: float, resamples: int = RESAMPLES, seed: int = 0):
        """The smooth curve on the mesh, its bootstrap band (2.5 % and 97.5 % quantiles) and the kernel density of
        the instances (per unit of u), each ``[MESH]``; the curve is NaN where the instances near
        hold fewer than :data:`MIN_EVENTS` of the rarer outcome (at the curve's own frequency)."""
        mesh = self.mesh()
        kernel = _gaussian(mesh, self.centres, sigma, reflect=not self.logit_axis)
        rng = np.random.default_rng(seed)
        counts = np.concatenate([self.counts[None], rng.poisson(self.counts, (resamples, 2, GRID))])
        near = counts.sum(axis=1) @ kernel.T  # [1 + R, MESH]
        with np.errstate(invalid="ignore", divide="ignore"):
            smoothed = (counts * self.residuals).sum(axis=1) @ kernel.T / near
        curves = from_axis(mesh, self.logit_axis) + smoothed
        window = near[0] * sigma * np.sqrt(2 * np.pi)  # instances within the kernel's window
        rarer = np.clip(np.minimum(curves[0], 1 - curves[0]), 0, None)  # the rarer outcome's smoothed frequency
        curve = np.where(window * rarer >= MIN_EVENTS, curves[0], np.nan)
        with warnings.catch_warnings():  # a mesh point that no resample reaches has no band (and no curve)
            warnings.simplefilter("ignore", RuntimeWarning)
            low, high = np.nanquantile(curves[1:], [0.025, 0.975], axis=0)
        return curve, np.where(np.isnan(curve), np.nan, low), np.where(np.isnan(curve), np.nan, high), near[0] / self.n


def consistency_bars(counts: np.ndarray, mean_scores: np.ndarray, level: float = 0.95):
    """Bröcker & Smith's consistency bars of bins with ``counts`` n_k and mean scores p̄_k: the (1 − level)/2 and
    (1 + level)/2 quantiles of Binomial(n_k, p̄_k)/n_k (NaN for empty bins)."""
    n = np.maximum(counts, 1)
    p = np.clip(np.nan_to_num(mean_scores), 0.0, 1.0)
    low, high = (binomial_quantile(q, n, p) / n for q in ((1 - level) / 2, (1 + level) / 2))
    empty = counts == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def binomial_quantile(q: float, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The q-quantile of Binomial(n, p), 0 < q < 1: the least k with P(X ≤ k) ≥ q. ``bdtrik`` inverts the CDF in a
    continuous k; the quantile is its ceiling, or the integer below where the CDF already reaches q there (what
    scipy.stats.binom.ppf returns, without importing scipy.stats: ~0.5 CPU-s of each figure job)."""
    n, p = np.broadcast_arrays(np.asarray(n, dtype=np.float64), np.asarray(p, dtype=np.float64))
    inner = (p > 0) & (p < 1)
    with np.errstate(invalid="ignore"):
        k = np.ceil(bdtrik(q, n, np.where(inner, p, 0.5)))
    below = np.maximum(k - 1, 0)
    k = np.where(bdtr(below, n.astype(np.int64), np.where(inner, p, 0.5)) >= q, below, k)  # an integer n: no warning
    return np.where(inner, np.clip(k, 0, n), np.where(p >= 1, n, 0.0))
