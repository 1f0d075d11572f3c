"""Spline recalibration (Gupta, Rahimi, Ajanthan, Mensink, Sminchisescu & Hartley, ICLR 2021, §4).

Sort the N calibration scores f_1 ≤ … ≤ f_N with targets y_i ∈ {0, 1}; at the fractiles t_i = (i − 1)/(N − 1) the
cumulative accuracy and score are S̃_i = Σ_{k≤i} y_k / N and h̃_i = Σ_{k≤i} f_k / N. A cubic spline s(t) with
``knots`` equally spaced knots on [0, 1] is fitted by least squares to S̃_i − h̃_i; its derivative estimates the
calibration error at each fractile, so the recalibrated score of calibration point i is γ(f_i) = f_i + s′(t_i) (the
derivative of the cumulative accuracy, S̃′ = h̃′ + s′ with h̃′ = f). A new score is mapped by linear interpolation
between the calibration scores (γ averaged over tied scores; the nearest end value outside them) and clipped to
[0, 1].

The spline is a natural cubic spline (second derivative 0 at both ends, the paper's choice) or, with ``runout``, a
parabolic (M₀ = M₁) or cubic (M₀ = 2M₁ − M₂) run-out spline, the alternatives of the authors' code. Its second
derivatives M at the knots follow from the knot values by the continuity of s′ (the tridiagonal system
M_{j−1} + 4M_j + M_{j+1} = 6(v_{j−1} − 2v_j + v_{j+1})/δ²) and the two end conditions, so s, and s′, are linear in
the knot values and the least-squares fit is one ``lstsq`` of an N × ``knots`` design matrix (t_i = linspace(0, 1, N)
as the authors' code).

``interpolation="authors_code"`` evaluates new scores as the authors' ``interpolated_function`` does: between the
calibration scores a < s < b it returns ((b − s)·γ(b) + (s − a)·γ(a)) / (b − a), the weights of linear
interpolation swapped (γ(b) at s → a), a score equal to b gets the γ of the point before it, and tied calibration
scores keep one γ per point (the last of the lower run, the first of the upper).
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Array, Choice, Scalar
from calbench.maps1d.maps import check_binary

RUNOUTS = ("natural", "parabolic", "cubic")
INTERPOLATIONS = ("linear", "authors_code")


def second_derivatives(knots: int, runout: str) -> np.ndarray:
    """The ``knots`` × ``knots`` matrix taking knot values v to the spline's second derivatives M = T v."""
    delta = 1.0 / (knots - 1)
    system, rhs = np.zeros((knots, knots)), np.zeros((knots, knots))
    for j in range(1, knots - 1):  # continuity of s′ at the interior knots
        system[j, j - 1:j + 2] = (1.0, 4.0, 1.0)
        rhs[j, j - 1:j + 2] = np.array([1.0, -2.0, 1.0]) * 6.0 / delta**2
    end = {"natural": (1.0, 0.0, 0.0), "parabolic": (1.0, -1.0, 0.0), "cubic": (1.0, -2.0, 1.0)}[runout]
    width = min(3, knots)
    system[0, :width] = end[:width]
    system[-1, knots - width:] = end[:width][::-1]
    return np.linalg.solve(system, rhs)


def basis(t: np.ndarray, knots: int, runout: str) -> tuple[np.ndarray, np.ndarray]:
    """Matrices [len(t), knots] taking the knot values to s(t) and to s′(t) (t in [0, 1])."""
    delta = 1.0 / (knots - 1)
    j = np.clip(np.floor(t / delta).astype(np.int64), 0, knots - 2)
    x = t - j * delta
    rows = np.arange(t.size)
    on_m = np.zeros((t.size, knots))  # coefficients of M (value), of v (value), of M and v (derivative)
    on_v = np.zeros((t.size, knots))
    d_on_m = np.zeros((t.size, knots))
    d_on_v = np.zeros((t.size, knots))
    rest = delta - x
    on_m[rows, j] = rest**3 / (6 * delta) - delta * rest / 6
    on_m[rows, j + 1] = x**3 / (6 * delta) - delta * x / 6
    on_v[rows, j] = rest / delta
    on_v[rows, j + 1] = x / delta
    d_on_m[rows, j] = -rest**2 / (2 * delta) + delta / 6
    d_on_m[rows, j + 1] = x**2 / (2 * delta) - delta / 6
    d_on_v[rows, j] = -1.0 / delta
    d_on_v[rows, j + 1] = 1.0 / delta
    to_m = second_derivatives(knots, runout)
    return on_m @ to_m + on_v, d_on_m @ to_m + d_on_v


class Spline:
    """The spline recalibration map of one binary problem; ``knots`` ≥ 2 equally spaced knots, ``runout`` one of
    :data:`RUNOUTS`, ``interpolation`` one of :data:`INTERPOLATIONS`."""

    #: Per distinct calibration value: the mean (``interpolation="linear"``), or else the first and last, of the
    #: recalibrated values.
    _fitted_state = {"x_": Array(float, ("n",)), "knot_values_": Array(float, ("knots",)),
                     **{name: Array(float, ("n",), optional=True) for name in ("mean_", "first_", "last_")}}

    #: Its settings, checked when a saved map is loaded.
    _declared_settings = {"knots": Scalar(int, within="[2, inf)"), "runout": Choice(*RUNOUTS),
                          "interpolation": Choice(*INTERPOLATIONS)}

    def __init__(self, knots: int = 6, runout: str = "natural", interpolation: str = "linear"):
        self.knots, self.runout, self.interpolation = knots, runout, interpolation

    def fit(self, p, y) -> "Spline":
        p, y = check_binary(p, y)
        order = np.argsort(p, kind="stable")
        f, hits = p[order], y[order]
        n = f.size
        t = np.linspace(0.0, 1.0, n)
        value, slope = basis(t, self.knots, self.runout)
        knot_values = np.linalg.lstsq(value, np.cumsum(hits - f) / n, rcond=None)[0]
        gamma = f + slope @ knot_values
        self.x_, first, counts = np.unique(f, return_index=True, return_counts=True)
        if self.interpolation == "linear":  # only what the evaluation reads: one-vs-rest at 1,000 classes keeps 1,000
            self.mean_ = np.add.reduceat(gamma, first) / counts
        else:
            self.first_, self.last_ = gamma[first], gamma[first + counts - 1]
        self.knot_values_ = knot_values
        return self

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        x = self.x_
        if self.interpolation == "linear":
            return np.clip(np.interp(p, x, self.mean_), 0.0, 1.0)
        upper = np.clip(np.searchsorted(x, p, side="left"), 1, max(x.size - 1, 1))  # first calibration score ≥ p
        lower = upper - 1
        below, above = np.maximum(p - x[np.minimum(lower, x.size - 1)], 0.0), x[np.minimum(upper, x.size - 1)] - p
        span = np.where(below + above > 0, below + above, 1.0)
        inside = (above * self.first_[np.minimum(upper, x.size - 1)] + below * self.last_[lower]) / span
        out = np.where(p >= x[-1], self.last_[-1], np.where(p <= x[0], self.first_[0], inside))
        return np.clip(out, 0.0, 1.0)

    def summary(self) -> dict:
        return {"knot_values": [round(float(v), 6) for v in self.knot_values_]}
