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

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit, softmax

from calbench.convergence import NotConvergedWarning
from calbench.folds import kfold_splits
from calbench.maps1d.maps import check_binary
from calbench.scores import PROB_EPS

LOSSES = ("ce", "mse")
OPTIMIZERS = ("lbfgs", "adam")
#: Relative tolerance of the "prefer fewer pieces" rule (fit-on-test App. C.2).
TRICK = 0.001
#: L-BFGS stops when the loss improves by less than this (relative); 1e-7 changes the fitted loss by ~1e-5.
FTOL = 1e-7


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
    one ``searchsorted`` finds every set's pieces. ``positive``: the indices where y = 1; ``work``: scratch
    rows of n + 1 values that every loss evaluation reuses (a fresh array of tens of thousands of values
    costs page faults each time)."""

    x: np.ndarray
    y: np.ndarray
    start: np.ndarray
    weight: np.ndarray
    key: np.ndarray
    shift: np.ndarray
    positive: np.ndarray
    work: np.ndarray

    @classmethod
    def of(cls, xs, ys) -> "_Folds":
        """From lists of sorted inputs and their targets (0 or 1)."""
        sizes = np.array([x.size for x in xs])
        shift = _SPAN * np.arange(sizes.size)
        x, y = np.concatenate(xs), np.concatenate(ys)
        return cls(x, y, np.concatenate([[0], np.cumsum(sizes)]), np.repeat(1.0 / sizes, sizes),
                   x + np.repeat(shift, sizes), shift, np.flatnonzero(y), np.empty((5, x.size + 1)))

    def take(self, rows) -> "_Folds":
        """The sets ``rows`` only."""
        return _Folds.of([self.x[self.start[r]:self.start[r + 1]] for r in rows],
                         [self.y[self.start[r]:self.start[r + 1]] for r in rows])


class PiecewiseLinear:
    """One PL (``logit_space=False``) or PL3 (``logit_space=True``) map with ``n_pieces`` pieces."""

    def __init__(self, n_pieces: int = 2, logit_space: bool = False, loss: str = "ce", optimizer: str = "lbfgs",
                 seed: int = 0, max_iter: int = 200):
        if loss not in LOSSES or optimizer not in OPTIMIZERS or n_pieces < 1:
            raise ValueError(f"PiecewiseLinear: loss must be one of {LOSSES}, optimizer one of {OPTIMIZERS}, "
                             f"n_pieces ≥ 1; got {loss!r}, {optimizer!r}, {n_pieces}")
        self.n_pieces, self.logit_space, self.loss = n_pieces, logit_space, loss
        self.optimizer, self.seed, self.max_iter = optimizer, seed, max_iter

    # -- parametrisation (batched: theta has one row per model) ----------------------------
    def _input(self, p):
        return logit(np.clip(p, PROB_EPS, 1 - PROB_EPS)) if self.logit_space else p

    def _knots(self, theta):
        """Knot positions t (input space), dt/db, widths w and knot values u; each with one row per model."""
        B = self.n_pieces
        w = softmax(theta[:, :B], axis=1)
        F = theta.shape[0]
        b = np.hstack([np.zeros((F, 1)), np.cumsum(w, axis=1)[:, :-1], np.ones((F, 1))])
        if self.logit_space:
            bc = np.clip(b, PROB_EPS, 1 - PROB_EPS)
            return logit(bc), np.where(bc == b, 1.0 / (bc * (1 - bc)), 0.0), w, theta[:, B:]
        return b, np.ones_like(b), w, expit(theta[:, B:])

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
        t, _, _, u = (a[0] for a in self._knots(theta[None]))
        k = np.searchsorted(t[1:-1], x, side="left")
        delta = np.maximum(np.diff(t), 1e-12)
        r = np.clip((x - t[k]) / delta[k], 0.0, 1.0)
        return u[k] + (u[k + 1] - u[k]) * r

    # -- loss and gradient of F models at once ---------------------------------------------
    def _loss_grad(self, theta, folds: _Folds):
        """Σ_f mean loss of model f (row f of ``theta``) on data set f of ``folds``, and the gradient [F, 2B + 1].

        The points of a piece are contiguous in the sorted data: the per-piece sums of ℓ' and ℓ'·r are
        differences of cumulative sums. Per-point arrays live in ``folds.work`` (operations with ``out=``)."""
        B = self.n_pieces
        F = folds.start.size - 1
        x, y, fold_start, weight = folds.x, folds.y, folds.start, folds.weight
        n = x.size
        r, tmp, q, qc = folds.work[:4, :n]
        cum = folds.work[4]
        t, dt_db, w, u = self._knots(theta)
        inner = np.searchsorted(folds.key, (t[:, 1:-1] + folds.shift[:, None]).ravel())
        starts = np.hstack([fold_start[:-1, None], inner.reshape(F, B - 1), fold_start[1:, None]])
        seg_start, seg_end = starts[:, :-1].ravel(), starts[:, 1:].ravel()
        piece = np.repeat(np.arange(F * B), seg_end - seg_start)  # global piece f·B + k of each point
        delta = np.maximum(np.diff(t, axis=1), 1e-12)
        slope = np.diff(u, axis=1) / delta
        np.take(t[:, :-1].ravel(), piece, out=r)  # r = clip((x − t_k)/Δ_k, 0, 1)
        np.subtract(x, r, out=r)
        np.divide(r, np.take(delta.ravel(), piece, out=tmp), out=r)
        np.clip(r, 0.0, 1.0, out=r)
        np.multiply(np.take((slope * delta).ravel(), piece, out=tmp), r, out=tmp)  # f = u_k + (u_{k+1} − u_k)·r
        f = np.add(np.take(u[:, :-1].ravel(), piece, out=q), tmp, out=tmp)
        q = expit(f, out=q) if self.logit_space else f
        np.clip(q, PROB_EPS, 1 - PROB_EPS, out=qc)
        # CE: −ln q̂ where y = 1, −ln(1 − q̂) where y = 0 (y is 0 or 1)
        if self.loss == "ce":
            log_lik = np.log1p(np.negative(qc, out=cum[:n]), out=cum[:n])
            log_lik[folds.positive] = np.log(qc[folds.positive])
            loss = -np.sum(np.multiply(weight, log_lik, out=log_lik))
            if self.logit_space:
                g = np.subtract(q, y, out=q)
            else:
                g = np.divide(qc - y, qc * (1 - qc), out=q)
        else:
            g = np.subtract(q, y, out=cum[:n])
            loss = np.sum(weight * g**2)
            g = 2 * g * (q * (1 - q) if self.logit_space else 1.0)
        np.multiply(g, weight, out=g)
        cum[0] = 0.0
        np.cumsum(g, out=cum[1:])
        sum_g = (cum[seg_end] - cum[seg_start]).reshape(F, B)
        np.cumsum(np.multiply(g, r, out=r), out=cum[1:])
        sum_gr = (cum[seg_end] - cum[seg_start]).reshape(F, B)
        zero = np.zeros((F, 1))
        g_u = np.hstack([sum_g - sum_gr, zero]) + np.hstack([zero, sum_gr])
        g_t = np.hstack([slope * (sum_gr - sum_g), zero]) - np.hstack([zero, slope * sum_gr])
        g_b = (g_t * dt_db)[:, 1:-1]  # interior knots b_1..b_{B-1}
        g_w = np.hstack([np.cumsum(g_b[:, ::-1], axis=1)[:, ::-1], zero])  # b_j = Σ_{i<j} w_i
        g_a = w * (g_w - np.sum(w * g_w, axis=1, keepdims=True))
        g_v = g_u if self.logit_space else g_u * u * (1 - u)
        return loss, np.hstack([g_a, g_v])

    # -- fitting ---------------------------------------------------------------------------
    def sorted_folds(self, ps, ys) -> _Folds:
        """The data sets (ps[f], ys[f]) in input space, each sorted, as one :class:`_Folds` (it depends only on
        ``logit_space``, so maps with any number of pieces can be fitted on it)."""
        data = [check_binary(p, y) for p, y in zip(ps, ys)]
        orders = [np.argsort(p, kind="stable") for p, _ in data]
        return _Folds.of([self._input(p[o]) for (p, _), o in zip(data, orders)],
                         [y[o] for (_, y), o in zip(data, orders)])

    def fit_folds(self, folds: _Folds) -> np.ndarray:
        """Parameters [F, 2B + 1] of F independent maps, one fitted to each data set of ``folds``, from the
        identity start (the fit-on-test CV fits 10 fold models per B, on data sorted once for every B)."""
        starts = np.array([self._init_theta(folds.x[a:b]) for a, b in zip(folds.start[:-1], folds.start[1:])])
        if self.optimizer == "lbfgs":
            return self._lbfgs(starts, folds)
        return np.array([self._adam(start, folds.take([f])) for f, start in enumerate(starts)])

    def fit_many(self, ps, ys) -> np.ndarray:
        """Parameters [F, 2B + 1] of F independent maps fitted to the data sets (ps[f], ys[f])."""
        return self.fit_folds(self.sorted_folds(ps, ys))

    def _lbfgs(self, theta, folds: _Folds):
        """L-BFGS on the sum of the models' losses (it separates over the models, so one run fits them all)."""
        from scipy.optimize import minimize  # lazy: metrics and methods that fit no PL map skip its import

        shape = theta.shape

        def summed(flat):
            loss, grad = self._loss_grad(flat.reshape(shape), folds)
            return loss, grad.ravel()

        result = minimize(summed, theta.ravel(), jac=True, method="L-BFGS-B",
                          options={"maxiter": self.max_iter, "ftol": FTOL})
        if result.nit >= self.max_iter:
            warnings.warn(f"PiecewiseLinear({self.n_pieces} pieces): L-BFGS stopped at max_iter={self.max_iter} "
                          f"before its convergence test; raise max_iter", NotConvergedWarning, stacklevel=3)
        return result.x.reshape(shape)

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
                loss, grad = self._loss_grad(theta[None], _Folds.of([x[idx]], [y[idx]]))
                grad = grad[0]
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
        t, _, _, u = (a[0] for a in self._knots(self.theta_[None]))
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
