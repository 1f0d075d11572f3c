"""PL and PL3: continuous piecewise-linear calibration maps (fit-on-test paper §4.4, §5.1–5.2, App. C.1).

A map with B pieces has knots b_0 = 0 < b_1 < … < b_B = 1 and knot values; it interpolates
linearly between neighbouring knots. Parametrisation (the paper's neural "binning + interpolation"
layers, Fig. 6): bin widths w = softmax(a) with a ∈ R^B, knots b = [0, cumsum(w)_{1..B-1}, 1].

* **PL**: knot values h_j = σ(v_j) ∈ (0, 1), ĉ(p) = linear interpolation of (b_j, h_j) at p.
* **PL3**: piecewise linear in logit–logit space: ĉ(p) = σ(f(logit p)) where f interpolates
  (logit b_j, v_j) with unconstrained v_j (PL3 with one piece is TS with a bias; with two, ≈ beta).

Both start at the identity with equal-mass pieces (knots at the quantiles of the inputs) and are
fitted by cross-entropy (the paper's headline PL^CE, PL3^CE) or squared error (PL^MSE, PL3^MSE).

:class:`PiecewiseLinearCV` is the paper's estimator: the number of pieces B is chosen by 10-fold
CV on the held-out Brier score (even when training with CE), among B = 1 … min(n // 200, 15) + 1,
preferring the smallest B within 0.1 % of the best score (App. C.2, after Tikka & Hollmén 2008);
the prediction is the **mean of the 10 fold models** with that B ("we are not refitting a single
model on all 10 folds"); ``ensemble=False`` refits one model on all data instead (Tables 20–21).

Optimiser (documented deviation): the authors train with minibatch Adam (lr 0.01, batch
min(n/4, 512), ≤ 1500 epochs, early stopping with patience 20 on the training loss). The default
here minimises the same loss over the same family with full-batch L-BFGS and analytic gradients —
deterministic and two orders of magnitude faster; ``optimizer="adam"`` runs the authors' schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
import warnings
from operator import itemgetter

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, logit, softmax

from calbench.folds import kfold_splits
from calbench.maps1d.maps import check_binary
from calbench.optim import NotConvergedWarning, armijo
from calbench.scores import PROB_EPS

LOSSES = ("ce", "mse")
OPTIMIZERS = ("lbfgs", "newton", "adam")
#: Relative tolerance of the "prefer fewer pieces" rule (fit-on-test App. C.2).
TRICK = 0.001
#: L-BFGS stops when the loss improves by less than this (relative); 1e-7 changes the fitted loss by ~1e-5.
FTOL = 1e-7
#: Newton stops when half the Newton decrement (or, at a kink, a step's decrease) is below this × the loss.
TOL = 1e-10
MU0 = 1e-3
KINK_POINTS = 20


def prefer_fewer(scores: np.ndarray, tolerance: float = TRICK) -> int:
    """Index of the smallest candidate whose score is within ``tolerance`` (relative) of the best.

    The fit-on-test paper's rule: among candidates before the arg-min, the smallest one with
    score ≤ (1 + tolerance)·min wins, even if larger ones in between do not qualify.
    """
    scores = np.asarray(scores, dtype=np.float64)
    best = int(np.nanargmin(scores))
    within = np.flatnonzero(scores[: best + 1] <= scores[best] * (1.0 + tolerance))
    return int(within[0])


#: Offset between the input ranges of models fitted together (inputs lie in [0, 1] or [−28, 28]).
_SPAN = 100.0


@dataclass(frozen=True)
class _Folds:
    """F data sets in one array: set f is ``x[start[f]:start[f + 1]]`` (sorted) with targets ``y`` and
    weights 1/n_f; ``key`` = x + ``shift[f]`` (distinct multiples of :data:`_SPAN`) is sorted as a whole, so
    one ``searchsorted`` finds every set's pieces."""

    x: np.ndarray
    y: np.ndarray
    start: np.ndarray
    weight: np.ndarray
    key: np.ndarray
    shift: np.ndarray

    @classmethod
    def of(cls, xs, ys) -> "_Folds":
        """From lists of sorted inputs and their targets."""
        sizes = np.array([x.size for x in xs])
        shift = _SPAN * np.arange(sizes.size)
        x = np.concatenate(xs)
        return cls(x, np.concatenate(ys), np.concatenate([[0], np.cumsum(sizes)]), np.repeat(1.0 / sizes, sizes),
                   x + np.repeat(shift, sizes), shift)

    def take(self, rows) -> "_Folds":
        """The sets ``rows`` (increasing) only."""
        index = np.concatenate([np.arange(self.start[r], self.start[r + 1]) for r in rows])
        sizes = np.diff(self.start)[rows]
        return _Folds(self.x[index], self.y[index], np.concatenate([[0], np.cumsum(sizes)]), self.weight[index],
                      self.key[index], self.shift[rows])


class PiecewiseLinear:
    """One PL (``logit_space=False``) or PL3 (``logit_space=True``) map with ``n_pieces`` pieces."""

    def __init__(self, n_pieces: int = 2, logit_space: bool = False, loss: str = "ce", optimizer: str = "lbfgs",
                 seed: int = 0, max_iter: int = 2000):
        if loss not in LOSSES or optimizer not in OPTIMIZERS or n_pieces < 1:
            raise ValueError(f"PiecewiseLinear: loss must be one of {LOSSES}, optimizer one of {OPTIMIZERS}, "
                             f"n_pieces ≥ 1; got {loss!r}, {optimizer!r}, {n_pieces}")
        self.n_pieces, self.logit_space, self.loss = n_pieces, logit_space, loss
        self.optimizer, self.seed, self.max_iter = optimizer, seed, max_iter

    # -- parametrisation (batched: theta has one row per model) ----------------------------
    def _input(self, p):
        return logit(np.clip(p, PROB_EPS, 1 - PROB_EPS)) if self.logit_space else p

    def _knots(self, theta):
        """Knot positions t (input space) with dt/db and d²t/db², widths w, knot values u with du/dv and
        d²u/dv²; each with one row per model."""
        B = self.n_pieces
        w = softmax(theta[:, :B], axis=1)
        F = theta.shape[0]
        b = np.hstack([np.zeros((F, 1)), np.cumsum(w, axis=1)[:, :-1], np.ones((F, 1))])
        if self.logit_space:
            bc = np.clip(b, PROB_EPS, 1 - PROB_EPS)
            inside = bc == b
            spread = bc * (1 - bc)
            dt = np.where(inside, 1.0 / spread, 0.0)
            d2t = np.where(inside, (2 * bc - 1) / spread**2, 0.0)
            v = theta[:, B:]
            return logit(bc), dt, d2t, w, v, np.ones_like(v), np.zeros_like(v)
        u = expit(theta[:, B:])
        du = u * (1 - u)
        return b, np.ones_like(b), np.zeros_like(b), w, u, du, du * (1 - 2 * u)

    def _init_theta(self, x):
        """Identity map with equal-mass pieces: knots at the quantiles of the inputs x (input space; paper
        App. C.1)."""
        levels = np.linspace(0, 1, self.n_pieces + 1)
        if self.logit_space:
            values = np.quantile(x, levels)
            q = expit(values)
        else:
            q = np.quantile(x, levels)
            values = logit(np.clip(q, 0.001, 0.999))
        widths = np.diff(np.concatenate([[0.0], q[1:]]))
        return np.concatenate([np.log(np.maximum(widths, 1e-12)), values])

    def _interpolate(self, theta, x):
        t, u = (a[0] for a in itemgetter(0, 4)(self._knots(theta[None])))
        k = np.searchsorted(t[1:-1], x, side="left")
        delta = np.maximum(np.diff(t), 1e-12)
        r = np.clip((x - t[k]) / delta[k], 0.0, 1.0)
        return u[k] + (u[k + 1] - u[k]) * r

    # -- loss, gradient and Hessian of F models at once ------------------------------------
    def _evaluate(self, theta, folds: _Folds, hessian=False, kinks=True):
        """Mean loss [F] of each of the F models (rows of ``theta``) on its data set in ``folds``, the gradients
        [F, 2B + 1] and, if ``hessian``, the Hessians [F, 2B + 1, 2B + 1]: exact where no knot sits on a data
        point, plus (``kinks``) the curvature of the kinks that the knots cross (see :meth:`_newton`).

        Within piece k the map is f(x) = u_k + (u_{k+1} − u_k)·r with r = (x − t_k)/(t_{k+1} − t_k), so every
        first and second derivative of f in (t_k, t_{k+1}, u_k, u_{k+1}) is a polynomial of degree ≤ 1 in r:
        the gradient and Hessian need only the per-piece sums of ℓ'·{1, r} and ℓ''·{1, r, r²} (ℓ: the loss
        at a point as a function of f)."""
        B = self.n_pieces
        F = folds.start.size - 1
        x, y, fold_start, weight = folds.x, folds.y, folds.start, folds.weight
        t, dt, d2t, w, u, du, d2u = self._knots(theta)
        inner = np.searchsorted(folds.key, (t[:, 1:-1] + folds.shift[:, None]).ravel())
        starts = np.hstack([fold_start[:-1, None], inner.reshape(F, B - 1), fold_start[1:, None]])
        counts = np.diff(starts, axis=1).ravel()  # points per piece (global piece f·B + k)
        delta = np.maximum(np.diff(t, axis=1), 1e-12)
        slope = np.diff(u, axis=1) / delta
        r = np.clip((x - np.repeat(t[:, :-1].ravel(), counts)) / np.repeat(delta.ravel(), counts), 0.0, 1.0)
        f = np.repeat(u[:, :-1].ravel(), counts) + np.repeat((slope * delta).ravel(), counts) * r
        q = expit(f) if self.logit_space else f
        qc = np.clip(q, PROB_EPS, 1 - PROB_EPS)
        if self.loss == "ce":
            point_loss = -(y * np.log(qc) + (1 - y) * np.log1p(-qc))
            if self.logit_space:
                g, c = q - y, q * (1 - q)
            else:
                spread = qc * (1 - qc)
                g, c = (qc - y) / spread, ((qc - y) ** 2 + y * (1 - y)) / spread**2
        else:
            point_loss = (q - y) ** 2
            if self.logit_space:
                spread = q * (1 - q)
                g, c = 2 * (q - y) * spread, 2 * spread * (spread + (q - y) * (1 - 2 * q))
            else:
                g, c = 2 * (q - y), np.full_like(q, 2.0)
        # per-piece sums of the weighted loss, ℓ'·{1, r} and (Hessian) ℓ''·{1, r, r²}: pieces are contiguous
        columns = np.zeros((x.size + 1, 6 if hessian else 3))  # + a zero row: trailing empty pieces start at n
        g = g * weight
        columns[:-1, 0], columns[:-1, 1] = weight * point_loss, g
        columns[:-1, 2] = g * r
        if hessian:
            c = c * weight
            columns[:-1, 3] = c
            columns[:-1, 4] = c * r
            columns[:-1, 5] = columns[:-1, 4] * r
        sums = np.add.reduceat(columns, starts[:, :-1].ravel(), axis=0)
        sums[counts == 0] = 0.0
        sums = sums.reshape(F, B, -1)
        loss, g0, g1 = sums[:, :, 0].sum(axis=1), sums[:, :, 1], sums[:, :, 2]
        zero = np.zeros((F, 1))
        g_u = np.hstack([g0 - g1, zero]) + np.hstack([zero, g1])  # ∂f/∂u_k = 1 − r, ∂f/∂u_{k+1} = r
        g_t = np.hstack([slope * (g1 - g0), zero]) - np.hstack([zero, slope * g1])  # s(r − 1), −s·r
        # interior knots b_j = Σ_{m<j} w_m(a): ∂b_j/∂a_m = w_m·([m < j] − b_j) =: D[j, m]
        b = np.hstack([zero, np.cumsum(w, axis=1)[:, :-1]])[:, 1:]
        D = w[:, None, :] * ((np.arange(B)[None, :] < np.arange(1, B)[:, None]) - b[:, :, None])
        jac_t = dt[:, 1:-1, None] * D  # ∂t_j/∂a for the interior knots; the end knots are fixed
        grad_a = (g_t[:, None, 1:-1] @ jac_t)[:, 0]
        grad = np.hstack([grad_a, g_u * du])
        if not hessian:
            return loss, grad, None
        a0, a1, a2 = sums[:, :, 3], sums[:, :, 4], sums[:, :, 5]
        # Gauss–Newton part: ∇f = α + β·r in (t_k, t_{k+1}, u_k, u_{k+1})
        s, one, nil = slope, np.ones_like(slope), np.zeros_like(slope)
        alpha = np.stack([-s, nil, one, nil], axis=-1)
        beta = np.stack([s, -s, -one, one], axis=-1)
        ab = alpha[..., :, None] * beta[..., None, :]
        block = (a0[..., None, None] * alpha[..., :, None] * alpha[..., None, :] + a1[..., None, None] * (ab + ab.swapaxes(-1, -2))
                 + a2[..., None, None] * beta[..., :, None] * beta[..., None, :])
        # ℓ'·∇²f: ∂²f/∂t_k² = 2s(r − 1)/Δ, ∂²f/∂t_k∂t_{k+1} = −s(2r − 1)/Δ, ∂²f/∂t_{k+1}² = 2s·r/Δ,
        # ∂²f/∂u_k∂t_k = (1 − r)/Δ, ∂²f/∂u_k∂t_{k+1} = r/Δ, ∂²f/∂u_{k+1}∂t_k = (r − 1)/Δ, ∂²f/∂u_{k+1}∂t_{k+1} = −r/Δ
        second = np.zeros_like(block)
        second[..., 0, 0] = 2 * s * (g1 - g0) / delta
        second[..., 0, 1] = second[..., 1, 0] = -s * (2 * g1 - g0) / delta
        second[..., 1, 1] = 2 * s * g1 / delta
        second[..., 2, 0] = second[..., 0, 2] = (g0 - g1) / delta
        second[..., 2, 1] = second[..., 1, 2] = g1 / delta
        second[..., 3, 0] = second[..., 0, 3] = (g1 - g0) / delta
        second[..., 3, 1] = second[..., 1, 3] = -g1 / delta
        k = np.arange(B)
        index = np.stack([k, k + 1, B + 1 + k, B + 2 + k], axis=-1)  # [B, 4] rows of (t, u)
        hess_c = np.zeros((F, 2 * B + 2, 2 * B + 2))
        np.add.at(hess_c, (np.arange(F)[:, None, None, None], index[None, :, :, None], index[None, :, None, :]),
                  block + second)
        if kinks:
            lo = np.maximum(inner - KINK_POINTS, np.repeat(fold_start[:-1], B - 1))
            hi = np.minimum(inner + KINK_POINTS, np.repeat(fold_start[1:], B - 1))
            window = lo[:, None] + np.arange(2 * KINK_POINTS)
            near = np.sum(np.where(window < hi[:, None], g[np.minimum(window, x.size - 1)], 0.0), axis=1)
            density = near / np.maximum(x[np.maximum(hi - 1, lo)] - x[lo], 1e-12)
            hess_c[:, np.arange(1, B), np.arange(1, B)] += np.diff(slope, axis=1) * density.reshape(F, B - 1)
        # chain rule to θ = (a, v): c = (t, u) with t(a) on the interior knots and u(v)
        jac = np.zeros((F, 2 * B + 2, 2 * B + 1))
        jac[:, 1:B, :B] = jac_t
        jac[:, B + 1:, B:] = du[:, :, None] * np.eye(B + 1)
        hess = jac.swapaxes(1, 2) @ hess_c @ jac
        # Σ_j ∂L/∂t_j·∇²t_j with ∇²t_j = t''·∇b_j∇b_jᵀ + t'·∇²b_j and Σ_j γ_j∇²b_j = diag(d) − w dᵀ − d wᵀ, d = Σ_j γ_j∇b_j
        hess[:, :B, :B] += D.swapaxes(1, 2) @ ((g_t[:, 1:-1] * d2t[:, 1:-1])[:, :, None] * D)
        hess[:, :B, :B] += (grad_a[:, :, None] * np.eye(B) - w[:, :, None] * grad_a[:, None, :]
                            - grad_a[:, :, None] * w[:, None, :])
        hess[:, B:, B:] += (g_u * d2u)[:, :, None] * np.eye(B + 1)
        return loss, grad, hess

    # -- fitting ---------------------------------------------------------------------------
    def sorted_folds(self, ps, ys) -> _Folds:
        """The data sets (ps[f], ys[f]) in input space, each sorted, as one :class:`_Folds` (it depends only on
        ``logit_space``, so maps with any number of pieces can be fitted on it)."""
        data = [check_binary(p, y) for p, y in zip(ps, ys)]
        orders = [np.argsort(p, kind="stable") for p, _ in data]
        return _Folds.of([self._input(p[o]) for (p, _), o in zip(data, orders)], [y[o] for (_, y), o in zip(data, orders)])

    def fit_folds(self, folds: _Folds) -> np.ndarray:
        """Parameters [F, 2B + 1] of F independent maps, one fitted to each data set of ``folds``, from the
        identity start; Newton: all in one batched iteration (the fit-on-test CV fits 10 fold models per B)."""
        starts = np.array([self._init_theta(folds.x[a:b]) for a, b in zip(folds.start[:-1], folds.start[1:])])
        if self.optimizer == "lbfgs":
            return self._lbfgs(starts, folds)
        if self.optimizer == "newton":
            return self._newton(starts, folds)
        return np.array([self._adam(start, folds.take([f])) for f, start in enumerate(starts)])

    def fit_many(self, ps, ys) -> np.ndarray:
        """Parameters [F, 2B + 1] of F independent maps fitted to the data sets (ps[f], ys[f])."""
        return self.fit_folds(self.sorted_folds(ps, ys))

    def _lbfgs(self, theta, folds: _Folds):
        """L-BFGS on the sum of the models' losses (it separates over the models, so one run fits them all)."""
        shape = theta.shape

        def summed(flat):
            loss, grad, _ = self._evaluate(flat.reshape(shape), folds)
            return loss.sum(), grad.ravel()

        result = minimize(summed, theta.ravel(), jac=True, method="L-BFGS-B",
                          options={"maxiter": self.max_iter, "ftol": FTOL})
        if result.nit >= self.max_iter:
            warnings.warn(f"PiecewiseLinear({self.n_pieces} pieces): L-BFGS stopped at max_iter={self.max_iter} "
                          f"before its convergence test; raise max_iter", NotConvergedWarning, stacklevel=3)
        return result.x.reshape(shape)

    def _newton(self, theta, folds: _Folds):
        """Newton's method with Levenberg–Marquardt damping on each model's 2B + 1 parameters, batched over the
        models; a model leaves the batch when it has converged.

        The step solves (|H| + μI) s = −g by eigendecomposition (negative curvature flipped; eigenvalues below
        1e-12·max dropped: the softmax of the widths is invariant to a common shift, so H is singular along it
        and g is zero there). μ falls (÷3) after a step that achieves over 3/4 of the model's predicted
        decrease, rises (×4) below 1/4; a step that does not lower the loss is not taken. The loss has a kink
        wherever a knot crosses a data point, which the exact Hessian of the smooth pieces does not see; its
        knot-diagonal gets that curvature, (s_k − s_{k−1})·Σ w·ℓ' per unit length of the
        2·:data:`KINK_POINTS` points nearest the knot (the Hessian is the model's only; the loss is exact).
        A model has converged when half its Newton decrement gᵀ|H|⁺g is at most :data:`TOL`·loss, or, where
        it rests on a kink (g need not vanish there), when a step lowers the loss by at most :data:`TOL`·loss
        or μ has grown past 1e15·max|eigenvalue| (no step can lower it in floating point)."""
        theta = theta.copy()
        active = np.arange(theta.shape[0])
        data = folds
        value, grad, hess = self._evaluate(theta, data, hessian=True)
        mu = None
        for _ in range(self.max_iter):
            eigenvalues, vectors = np.linalg.eigh(hess)
            size = np.abs(eigenvalues)
            top = size.max(axis=1)
            size = np.where(size > 1e-12 * top[:, None], size, np.inf)
            coefficients = (grad[:, None, :] @ vectors)[:, 0]
            mu = MU0 * top if mu is None else mu
            done = (np.sum(coefficients**2 / size, axis=1) / 2 <= TOL * value) | (mu > 1e15 * top)
            damped = coefficients / (size + mu[:, None])
            step = -(vectors @ damped[:, :, None])[:, :, 0]
            predicted = np.sum(coefficients * damped, axis=1) - np.sum(np.where(np.isinf(size), 0.0, size) * damped**2,
                                                                       axis=1) / 2
            step[done] = 0.0
            new_value, new_grad, new_hess = self._evaluate(theta[active] + step, data, hessian=True)
            gain = value - new_value
            ratio = gain / np.maximum(predicted, np.finfo(float).tiny)
            accept = gain > 0
            done |= accept & (gain <= TOL * value)
            mu = np.where(ratio > 0.75, mu / 3, np.where(ratio < 0.25, mu * 4, mu))
            theta[active[accept]] += step[accept]
            value = np.where(accept, new_value, value)
            grad = np.where(accept[:, None], new_grad, grad)
            hess = np.where(accept[:, None, None], new_hess, hess)
            if done.any():
                keep = ~done
                active, value, grad, hess, mu = active[keep], value[keep], grad[keep], hess[keep], mu[keep]
                if not active.size:
                    return theta
                data = folds.take(active)
        warnings.warn(f"PiecewiseLinear({self.n_pieces} pieces): Newton stopped at max_iter={self.max_iter} before "
                      f"{active.size} of {theta.shape[0]} models converged; raise max_iter", NotConvergedWarning,
                      stacklevel=3)
        return theta

    def fit(self, p, y) -> "PiecewiseLinear":
        self.theta_ = self.fit_many([p], [y])[0]
        return self

    def _adam(self, theta, folds: _Folds, lr=0.01, max_epochs=1500, patience=20):
        """The authors' schedule: Adam(lr 0.01), batch min(n/4, 512), early stop on the epoch training loss."""
        rng = np.random.default_rng(self.seed)
        x, y = folds.x, folds.y
        n = x.size
        batch = max(1, min(n // 4, 512))
        m, v = np.zeros_like(theta), np.zeros_like(theta)
        beta1, beta2, eps, step = 0.9, 0.999, 1e-7, 0
        best, wait = np.inf, 0
        for _ in range(max_epochs):
            order = rng.permutation(n)
            epoch_loss = 0.0
            for start in range(0, n, batch):
                idx = np.sort(order[start:start + batch])  # x is sorted, so sorted indices keep it sorted
                loss, grad, _ = self._evaluate(theta[None], _Folds.of([x[idx]], [y[idx]]))
                loss, grad = loss[0], grad[0]
                step += 1
                m = beta1 * m + (1 - beta1) * grad
                v = beta2 * v + (1 - beta2) * grad**2
                theta = theta - lr * (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + eps)
                epoch_loss += loss * idx.size / n
            if epoch_loss < best:
                best, wait = epoch_loss, 0
            else:
                wait += 1
                if wait >= patience:
                    break
        return theta

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        f = self._interpolate(self.theta_, self._input(p))
        return expit(f) if self.logit_space else f

    def knots(self) -> tuple[np.ndarray, np.ndarray]:
        """Knot positions in probability space and the map's values there (for plots)."""
        t, u = (a[0] for a in itemgetter(0, 4)(self._knots(self.theta_[None])))
        b = expit(t) if self.logit_space else t
        return b, (expit(u) if self.logit_space else u)

    def summary(self) -> dict:
        b, c = self.knots()
        return {"knots": b.tolist(), "values": c.tolist()}


class PiecewiseLinearCV:
    """The fit-on-test paper's PL / PL3 estimator: B by k-fold CV (Brier, 0.1 % rule), fold models averaged."""

    def __init__(self, logit_space: bool = False, loss: str = "ce", seed: int = 0, n_folds: int = 10,
                 max_pieces: int | None = None, ensemble: bool = True, trick: bool = True,
                 optimizer: str = "lbfgs"):
        self.logit_space, self.loss, self.seed, self.n_folds = logit_space, loss, seed, n_folds
        self.max_pieces, self.ensemble, self.trick, self.optimizer = max_pieces, ensemble, trick, optimizer

    def candidates(self, n: int) -> np.ndarray:
        """B = 1 … min(n // 200, 15) + 1 (the paper's range: 1..6 at n = 1000, 1..16 from n = 3000)."""
        top = self.max_pieces if self.max_pieces is not None else min(n // 200, 15) + 1
        return np.arange(1, max(top, 1) + 1)

    def _maps(self, n_pieces, data: _Folds) -> list[PiecewiseLinear]:
        """Maps with ``n_pieces`` fitted on each data set of ``data``, all in one batched optimisation."""
        maps = []
        for theta in PiecewiseLinear(n_pieces, self.logit_space, self.loss, self.optimizer, self.seed).fit_folds(data):
            fitted = PiecewiseLinear(n_pieces, self.logit_space, self.loss, self.optimizer, self.seed)
            fitted.theta_ = theta
            maps.append(fitted)
        return maps

    def fit(self, p, y) -> "PiecewiseLinearCV":
        p, y = check_binary(p, y)
        template = PiecewiseLinear(1, self.logit_space, self.loss, self.optimizer, self.seed)
        if min(self.n_folds, p.size) < 2:  # nothing to cross-validate: one piece fitted on all data
            self.cv_scores_, self.n_pieces_ = np.array([np.nan]), 1
            self.models_ = self._maps(1, template.sorted_folds([p], [y]))
            return self
        folds = list(kfold_splits(p.size, min(self.n_folds, p.size), self.seed))
        training = template.sorted_folds([p[tr] for tr, _ in folds], [y[tr] for tr, _ in folds])  # shared by every B
        candidates = self.candidates(p.size)
        scores, models = [], []
        for n_pieces in candidates:
            fold_models = self._maps(n_pieces, training)
            held_out = [np.mean((m.predict(p[te]) - y[te]) ** 2) for m, (_, te) in zip(fold_models, folds)]
            scores.append(np.mean(held_out))
            models.append(fold_models)
        self.cv_scores_ = np.array(scores)
        chosen = prefer_fewer(self.cv_scores_) if self.trick else int(np.argmin(self.cv_scores_))
        self.n_pieces_ = int(candidates[chosen])
        self.models_ = models[chosen] if self.ensemble else self._maps(self.n_pieces_, template.sorted_folds([p], [y]))
        return self

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        return np.mean([m.predict(p) for m in self.models_], axis=0)

    def summary(self) -> dict:
        return {"n_pieces": self.n_pieces_, "cv_brier": [float(s) for s in self.cv_scores_]}
