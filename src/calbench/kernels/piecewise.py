"""Compiled (numba) loss, gradient and L-BFGS of the PL / PL3 maps of :mod:`calbench.maps1d.piecewise`.

A parameter row θ = [a_1..a_B, v_0..v_B] of a map with B pieces (fit-on-test App. C.1, Fig. 6): widths
w = softmax(a), knots b = [0, cumsum(w)_{1..B−1}, 1] (PL3: t = logit(clip(b, ε, 1 − ε)), PL: t = b) and knot
values u = v (PL3) or σ(v) (PL). The map interpolates (t_j, u_j) linearly; PL3 applies σ to the result.

One evaluation of a map's loss is a few passes over its data sorted by input: the pieces are runs of that
order (a binary search per knot), and the per-piece sums of ℓ' and ℓ'·r (r: the point's position in its
piece) give the gradient by the chain rule through knots and widths. No allocation per evaluation (scratch
arrays from :func:`scratch`). Each pass is a loop over a whole array or slice, without calls or branches, which
the compiler turns into vector instructions (a loop over an index range of a larger array keeps numba's
negative-index check per point and stays scalar): PL3's σ with the exp of :mod:`calbench.kernels.vector_exp`,
its exp(−f) written by the interpolation and σ completed in the pass of the sums.
Points are weighted 1/n (the mean loss). CE is on predictions clipped to [ε, 1 − ε] (App. C.1), with the
clipped loss's gradient (0 where q̂ is clipped, as in the authors' Keras code). Its terms: −ln(1 − q̂) by its
series where q̂ < 1e-4 (most points of a one-vs-rest task), else by the vectorised log of
:mod:`calbench.kernels.vector_log` (f is monotone on a piece, so these points are a run at one end of it,
found by a binary search for where f crosses the threshold), and −ln q̂ at the points with y = 1 (their indices
found once per fit) by the same log.

:func:`lbfgs_rows` fits several maps (rows of θ, each on its own data set), each by its own L-BFGS
(Nocedal & Wright 2006, Alg. 7.4–7.5) with a weak-Wolfe bisection line search, which also makes progress on
this loss's kinks (it is not smooth where a knot crosses a data point; Lewis & Overton 2013).

Cost on one core (Xeon with AVX-512; numba's loops use 256-bit vectors): a PL3 CE evaluation on 4,500 points
(a one-vs-rest training fold of 5,000 rows) takes about 19 µs, 4 ns a point, of which the exp is about a
quarter. The CV of ``pl3_ovr`` on CIFAR-100 ResNet-20 (the perf split of seed 0) runs 29 iterations and 51
evaluations a fit on average: about 1 ms a fit, 16 s for its 16,000 fits
(``lbfgs_rows`` under ``python -m cProfile -s tottime -m calbench.perf --only
defaults.cifar100_resnet-20.pl3_ovr``, with OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from calbench.kernels.vector_exp import exp_split
from calbench.kernels.vector_log import log_sum
from calbench.scores import PROB_EPS

#: Line search: sufficient decrease (Armijo) and weak curvature constants, and the trial bound.
ARMIJO, CURVATURE, MAX_TRIALS = 1e-4, 0.9, 40
#: Pairs (s, y) kept by L-BFGS.
MEMORY = 10
#: Iteration states returned by :func:`lbfgs_rows`.
CONVERGED, STALLED, AT_MAX_ITER = 0, 1, 2


#: Rows of the per-knot scratch of :func:`loss_grad` (B + 1 columns; per-piece rows use the first B).
_T, _DT_DB, _W, _U, _DELTA, _RISE, _SUM_G, _SUM_GR, _G_U, _G_T, _G_W = range(11)


@njit(cache=True, nogil=True)
def _fill_knots(row, logit_space, knots):
    """Rows _T, _DT_DB, _W, _U of ``knots``: knot positions t (input space), dt/db, widths w, knot values u."""
    n_pieces = (row.size - 1) // 2
    t, dt_db, w, u = knots[_T], knots[_DT_DB], knots[_W], knots[_U]
    top = row[:n_pieces].max()
    for j in range(n_pieces):
        w[j] = math.exp(row[j] - top)
    w[:n_pieces] /= w[:n_pieces].sum()
    b = 0.0
    for j in range(n_pieces + 1):
        if j == n_pieces:
            b = 1.0
        elif j > 0:
            b += w[j - 1]
        dt_db[j], u[j] = 1.0, row[n_pieces + j]
        if logit_space:
            bc = min(max(b, PROB_EPS), 1.0 - PROB_EPS)
            t[j] = math.log(bc / (1.0 - bc))
            dt_db[j] = 1.0 / (bc * (1.0 - bc)) if bc == b else 0.0
        else:
            t[j] = b
            u[j] = 1.0 / (1.0 + math.exp(-row[n_pieces + j]))


@njit(cache=True, nogil=True)
def knot_params(row, logit_space):
    """Knot positions t (input space), dt/db, widths w and knot values u of one parameter row."""
    n_pieces = (row.size - 1) // 2
    knots = np.empty((4, n_pieces + 1))
    _fill_knots(row, logit_space, knots)
    return knots[_T].copy(), knots[_DT_DB].copy(), knots[_W, :n_pieces].copy(), knots[_U].copy()


@njit(cache=True, nogil=True)
def map_values(row, x, logit_space, out):
    """out ← the map ``row`` at the inputs x (input space, any order): PL's interpolation, PL3's σ of it."""
    n_pieces = (row.size - 1) // 2
    knots = np.empty((4, n_pieces + 1))
    _fill_knots(row, logit_space, knots)
    t, u = knots[_T], knots[_U]
    for i in range(x.size):
        k = 0  # the piece: how many interior knots t_1 … t_{B−1} lie below x
        while k < n_pieces - 1 and t[k + 1] < x[i]:
            k += 1
        r = min(max((x[i] - t[k]) / max(t[k + 1] - t[k], 1e-12), 0.0), 1.0)
        f = u[k] + (u[k + 1] - u[k]) * r
        out[i] = 1.0 / (1.0 + math.exp(-f)) if logit_space else f


@njit(cache=True, nogil=True)
def mean_squared_errors(theta, x, y, start, logit_space):
    """Mean (map f − y)² of map f (row f of ``theta``) on data set f (``x[start[f]:start[f + 1]]``): the
    held-out Brier scores of the fold models."""
    out = np.empty(theta.shape[0])
    values = np.empty(x.size)
    for f in range(theta.shape[0]):
        a, b = start[f], start[f + 1]
        map_values(theta[f], x[a:b], logit_space, values[a:b])
        total = 0.0
        for i in range(a, b):
            total += (values[i] - y[i]) ** 2
        out[f] = total / (b - a)
    return out


@njit(cache=True, nogil=True)
def scratch(size, n_pieces):
    """Work arrays of :func:`loss_grad` for data sets of up to ``size`` points: (points, knots, ends)."""
    return np.empty((3, size)), np.empty((11, n_pieces + 1)), np.empty(n_pieces, np.int64)


#: Below this, −ln(1 − q) is its series q + q²/2 + q³/3 + q⁴/4 (remainder < q⁵/4: 3e-17 relative).
_SERIES_BELOW = 1e-4


@njit(cache=True, nogil=True)
def _interpolate(x, f, start_k, per_unit, value_k, rise_k, sign):
    """f ← sign·(value_k + rise_k·clip((x − start_k)·per_unit, 0, 1)): the map on one piece's points (PL3 takes
    sign −1: the argument of exp(−f))."""
    for i in range(x.size):
        f[i] = sign * (value_k + rise_k * min(max((x[i] - start_k) * per_unit, 0.0), 1.0))


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _piece_sums(q, scale, x, y, start_k, per_unit, lo, hi, logit_space, ce):
    """One piece's Σ ℓ' and Σ ℓ'·r (r = clip((x − t_k)·per_unit, 0, 1)) and Σ ℓ, where CE's Σ ℓ has only the
    series terms: y = 0 outside the points lo:hi (:func:`_log_range` adds those; :func:`loss_grad` the points
    with y = 1). PL3 first completes q̂ ← σ(f) = 1 / (1 + exp(−f)) from the two factors of :func:`exp_split` in
    (q, scale). Without calls or branches, and with the sums reassociated, the compiler turns this loop into
    vector instructions."""
    total, sum_g, sum_gr = 0.0, 0.0, 0.0
    for i in range(q.size):
        if logit_space:
            q[i] = 1.0 / (1.0 + q[i] * scale[i])
        r = min(max((x[i] - start_k) * per_unit, 0.0), 1.0)
        if ce:
            qc = min(max(q[i], PROB_EPS), 1.0 - PROB_EPS)
            series = qc * (1.0 + qc * (0.5 + qc * (1.0 / 3.0 + qc * 0.25)))
            total += series if (y[i] == 0.0) & ((i < lo) | (i >= hi)) else 0.0
            g = q[i] - y[i] if logit_space else (qc - y[i]) / (qc * (1.0 - qc))
            g = g if qc == q[i] else 0.0  # the clipped loss is flat there
        else:
            g = q[i] - y[i]
            total += g * g
            g *= 2.0 * q[i] * (1.0 - q[i]) if logit_space else 2.0
        sum_g += g
        sum_gr += g * r
    return total, sum_g, sum_gr


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _log_range(q, y, args, exponent):
    """Σ −ln(1 − q̂) over the points with y = 0 (q̂ clipped to [ε, 1 − ε]), as log1p(−q̂) = ln u + (−q̂ − (u − 1))/u
    with u = 1 − q̂ rounded (the second term restores the rounding of u); ``args``, ``exponent``: work arrays of
    at least q's size."""
    correction = 0.0
    for i in range(q.size):
        qc = min(max(q[i], PROB_EPS), 1.0 - PROB_EPS)
        u = 1.0 - qc
        negative = y[i] == 0.0
        args[i] = u if negative else 1.0
        correction += (-qc - (u - 1.0)) / u if negative else 0.0
    return -log_sum(args[:q.size], exponent[:q.size]) - correction


@njit(cache=True, nogil=True)
def loss_grad(row, x, y, positives, logit_space, ce, grad, work):
    """Mean loss of the map ``row`` on (x, y) (x sorted, in input space; y 0 or 1; ``positives``: the indices
    where y = 1); its gradient into ``grad``. ``work``: :func:`scratch` for at least x.size points."""
    points, knots, ends = work
    n_pieces, n = (row.size - 1) // 2, x.size
    _fill_knots(row, logit_space, knots)
    t, dt_db, w, u = knots[_T], knots[_DT_DB], knots[_W], knots[_U]
    delta, rise, sum_g, sum_gr = knots[_DELTA], knots[_RISE], knots[_SUM_G], knots[_SUM_GR]
    first = 0
    for k in range(n_pieces):
        delta[k] = max(t[k + 1] - t[k], 1e-12)
        rise[k] = u[k + 1] - u[k]
        # piece k: the points t_k < x ≤ t_{k+1} (the first also x ≤ t_0, the last x > t_B): x[ends[k − 1]:ends[k]]
        ends[k] = first = n if k == n_pieces - 1 else max(first, np.searchsorted(x, t[k + 1], side="right"))
    q, spare, exponent = points[0, :n], points[1, :n], points[2, :n]
    first = 0
    for k in range(n_pieces):  # f = u_k + (u_{k+1} − u_k)·r, r = clip((x − t_k)/Δ_k, 0, 1)
        end = ends[k]
        _interpolate(x[first:end], q[first:end], t[k], 1.0 / delta[k], u[k], rise[k], -1.0 if logit_space else 1.0)
        first = end
    if logit_space:
        exp_split(q, spare)
    total = 0.0
    # q̂ ≥ _SERIES_BELOW, where y = 0 needs a logarithm, on a run at one end of each piece (f is monotone there)
    threshold = math.log(_SERIES_BELOW / (1.0 - _SERIES_BELOW)) if logit_space else _SERIES_BELOW
    first = 0
    for k in range(n_pieces):
        end = ends[k]
        lo, hi = end, end
        if ce:
            if rise[k] == 0.0:
                lo = first if u[k] >= threshold else end
            else:
                cross = t[k] + delta[k] * (threshold - u[k]) / rise[k]  # where f reaches the threshold
                if rise[k] > 0.0:
                    lo = first + np.searchsorted(x[first:end], cross, side="left")
                else:
                    lo, hi = first, first + np.searchsorted(x[first:end], cross, side="right")
        part, sum_g[k], sum_gr[k] = _piece_sums(q[first:end], spare[first:end], x[first:end], y[first:end], t[k],
                                                1.0 / delta[k], lo - first, hi - first, logit_space, ce)
        total += part
        if ce:  # work rows from index 0 to hi − lo ≤ end: scale factors already used
            total += _log_range(q[lo:hi], y[lo:hi], spare, exponent)
        first = end
    if ce:  # −ln q̂ where y = 1
        for j in range(positives.size):
            spare[j] = min(max(q[positives[j]], PROB_EPS), 1.0 - PROB_EPS)
        total -= log_sum(spare[:positives.size], exponent[:positives.size])
    weight = 1.0 / n
    g_u, g_t, g_w = knots[_G_U], knots[_G_T], knots[_G_W]
    g_u[:] = 0.0
    g_t[:] = 0.0
    for k in range(n_pieces):  # f = u_k + (u_{k+1} − u_k)·(x − t_k)/(t_{k+1} − t_k) on piece k
        slope = rise[k] / delta[k]
        g_u[k] += weight * (sum_g[k] - sum_gr[k])
        g_u[k + 1] += weight * sum_gr[k]
        if t[k + 1] - t[k] >= delta[k]:
            g_t[k] += weight * slope * (sum_gr[k] - sum_g[k])
            g_t[k + 1] -= weight * slope * sum_gr[k]
        else:  # Δ_k held at its floor: r depends on t_k through x − t_k only
            g_t[k] -= weight * slope * sum_g[k]
    tail, mean_g_w = 0.0, 0.0  # b_j = Σ_{i<j} w_i for the interior knots j = 1..B−1
    for j in range(n_pieces - 1, -1, -1):
        g_w[j] = tail
        mean_g_w += w[j] * tail
        if j >= 1:
            tail += g_t[j] * dt_db[j]
    for j in range(n_pieces):  # w = softmax(a)
        grad[j] = w[j] * (g_w[j] - mean_g_w)
    for j in range(n_pieces + 1):
        grad[n_pieces + j] = g_u[j] if logit_space else g_u[j] * u[j] * (1.0 - u[j])
    return total * weight


@njit(cache=True, nogil=True)
def summed_loss_grad(theta, x, y, start, logit_space, ce, grad):
    """Σ_f mean loss of map f (row f of ``theta``) on data set f (``x[start[f]:start[f + 1]]``); gradient rows."""
    work = scratch(np.max(start[1:] - start[:-1]), (theta.shape[1] - 1) // 2)
    total = 0.0
    for f in range(theta.shape[0]):
        a, b = start[f], start[f + 1]
        total += loss_grad(theta[f], x[a:b], y[a:b], np.flatnonzero(y[a:b]), logit_space, ce, grad[f], work)
    return total


@njit(cache=True, nogil=True)
def _direction(grad, s_mem, y_mem, rho, count, newest, d, alpha):
    """d ← −H·grad by the L-BFGS two-loop recursion over the ``count`` stored pairs (newest at ``newest``)."""
    memory, size = rho.size, grad.size
    for m in range(size):
        d[m] = -grad[m]
    for i in range(count):
        j = (newest - i) % memory
        alpha[i] = rho[j] * np.dot(s_mem[j], d)
        for m in range(size):
            d[m] -= alpha[i] * y_mem[j, m]
    if count > 0:
        d *= 1.0 / (rho[newest] * np.dot(y_mem[newest], y_mem[newest]))
    for i in range(count - 1, -1, -1):
        j = (newest - i) % memory
        beta = rho[j] * np.dot(y_mem[j], d)
        for m in range(size):
            d[m] += (alpha[i] - beta) * s_mem[j, m]


@njit(cache=True, nogil=True)
def lbfgs(row, x, y, logit_space, ce, max_iter, ftol, gtol):
    """Minimise the mean loss of one map from ``row`` (updated in place). Stops when an iteration lowers the
    loss by ≤ ``ftol`` relative (max(|f|, 1), as scipy's L-BFGS-B), when max |∇| ≤ ``gtol`` (CONVERGED), when no
    step along the direction lowers it (STALLED), or at ``max_iter`` (AT_MAX_ITER). Returns (state, iterations)."""
    size = row.size
    work = scratch(x.size, (size - 1) // 2)
    grad, trial, trial_grad, d = np.empty(size), np.empty(size), np.empty(size), np.empty(size)
    s_mem, y_mem, rho, alpha = np.zeros((MEMORY, size)), np.zeros((MEMORY, size)), np.zeros(MEMORY), np.empty(MEMORY)
    positives = np.flatnonzero(y)
    loss = loss_grad(row, x, y, positives, logit_space, ce, grad, work)
    count, newest = 0, MEMORY - 1
    for iteration in range(max_iter):
        if max(-grad.min(), grad.max()) <= gtol:
            return CONVERGED, iteration
        _direction(grad, s_mem, y_mem, rho, count, newest, d, alpha)
        slope = np.dot(grad, d)
        if slope >= 0.0:  # not a descent direction (rounding): restart from steepest descent
            count = 0
            for j in range(size):
                d[j] = -grad[j]
            slope = np.dot(grad, d)
        step = 1.0 if count > 0 else 1.0 / math.sqrt(-slope)
        low, high, value, accepted = 0.0, np.inf, np.inf, False
        for _ in range(MAX_TRIALS):  # weak Wolfe by bisection
            for j in range(size):
                trial[j] = row[j] + step * d[j]
            value = loss_grad(trial, x, y, positives, logit_space, ce, trial_grad, work)
            if not value <= loss + ARMIJO * step * slope:
                high = step
            elif np.dot(trial_grad, d) < CURVATURE * slope:
                low = step
                if high == np.inf:
                    step *= 2.0
                    continue
            else:
                accepted = True
                break
            step = 0.5 * (low + high)
        if not accepted:  # no Wolfe point within the trials: take the last step that lowered the loss enough
            if low == 0.0:
                return STALLED, iteration
            for j in range(size):
                trial[j] = row[j] + low * d[j]
            value = loss_grad(trial, x, y, positives, logit_space, ce, trial_grad, work)
        newer = (newest + 1) % MEMORY
        for j in range(size):
            s_mem[newer, j], y_mem[newer, j] = trial[j] - row[j], trial_grad[j] - grad[j]
        curvature = np.dot(s_mem[newer], y_mem[newer])
        if curvature > 1e-10 * np.dot(y_mem[newer], y_mem[newer]):  # else the pair is dropped (overwritten)
            newest, rho[newer] = newer, 1.0 / curvature
            count = min(count + 1, MEMORY)
        decrease = (loss - value) / max(abs(loss), abs(value), 1.0)
        row[:], grad[:], loss = trial, trial_grad, value
        if decrease <= ftol:
            return CONVERGED, iteration + 1
    return AT_MAX_ITER, max_iter


@njit(cache=True, nogil=True)
def lbfgs_rows(theta, x, y, start, logit_space, ce, max_iter, ftol, gtol):
    """Fit map f (row f of ``theta``, updated in place) on data set f by :func:`lbfgs`; (states, iterations)."""
    rows = theta.shape[0]
    states, iterations = np.zeros(rows, np.int64), np.zeros(rows, np.int64)
    for f in range(rows):
        a, b = start[f], start[f + 1]
        states[f], iterations[f] = lbfgs(theta[f], x[a:b], y[a:b], logit_space, ce, max_iter, ftol, gtol)
    return states, iterations


def warm_up() -> None:
    """Compile the fits and the loss of PL (probability space) and PL3 (logit space) maps, CE and squared loss."""
    x = np.linspace(0.05, 0.95, 8)
    y = (np.arange(8) % 2).astype(np.float64)
    start = np.array([0, 4, 8], dtype=np.int64)
    for logit_space in (False, True):
        inputs = np.log(x / (1 - x)) if logit_space else x
        for ce in (True, False):
            theta = np.zeros((2, 5))
            knot_params(theta[0].copy(), logit_space)
            mean_squared_errors(theta, inputs, y, start, logit_space)
            summed_loss_grad(theta, inputs, y, start, logit_space, ce, np.empty_like(theta))
            lbfgs_rows(theta, inputs, y, start, logit_space, ce, 3, 1e-9, 1e-9)
