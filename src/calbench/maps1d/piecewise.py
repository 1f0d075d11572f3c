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
here minimises the same loss over the same family with full-batch L-BFGS and analytic gradients, each
fold model by its own run, compiled (:mod:`calbench.kernels.piecewise`) — deterministic and orders of
magnitude faster; ``optimizer="adam"`` runs the authors' schedule.

Around the fits the CV does little per (B, fold): the data are sorted once for every B, every B's starting knots
come from one ``np.quantile`` call per fold, the held-out Brier scores of a B's fold models from one compiled call
(:func:`calbench.kernels.piecewise.mean_squared_errors`), and maps are built for the chosen B only. Cost of
``pl3_ovr`` (100 classes, 5,000 rows: 16,000 fits of 4,500 points): about 18 CPU-s on one core (16–21 s over
repeated runs on a shared machine), 90 % of it in the compiled fits (``OMP_NUM_THREADS=1 python -m calbench.perf
--only defaults.cifar100_resnet-20.pl3_ovr``; under ``python -m cProfile -s tottime`` the fits are ``lbfgs_rows``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from calbench.convergence import NotConvergedWarning
from calbench.fitted_state import Array, Choice, Instance, ListOf, Scalar
from calbench.folds import kfold_splits
from calbench.maps1d.maps import check_binary
from calbench.scores import PROB_EPS

LOSSES = ("ce", "mse")
OPTIMIZERS = ("lbfgs", "adam")
#: Relative tolerance of the "prefer fewer pieces" rule (fit-on-test App. C.2).
TRICK = 0.001
#: L-BFGS stops when the loss improves by less than this (relative); 1e-7 changes the fitted loss by ~1e-5.
FTOL = 1e-7
#: ... or when every partial derivative of the mean loss is at most this (scipy's L-BFGS-B default).
GTOL = 1e-5


def prefer_fewer(scores: np.ndarray, tolerance: float = TRICK) -> int:
    """Index of the smallest candidate whose score is within ``tolerance`` (relative) of the best.

    The fit-on-test paper's rule: among candidates before the arg-min, the smallest one with
    score ≤ (1 + tolerance)·min wins, even if larger ones in between do not qualify.
    """
    scores = np.asarray(scores, dtype=np.float64)
    best = int(np.nanargmin(scores))
    within = np.flatnonzero(scores[: best + 1] <= scores[best] * (1.0 + tolerance))
    return int(within[0])


@dataclass(frozen=True)
class _Folds:
    """F data sets in one array: set f is ``x[start[f]:start[f + 1]]`` (sorted, in input space) with targets ``y``."""

    x: np.ndarray
    y: np.ndarray
    start: np.ndarray

    @classmethod
    def of(cls, xs, ys) -> "_Folds":
        """From lists of sorted inputs and their targets (0 or 1)."""
        sizes = np.array([x.size for x in xs])
        return cls(np.concatenate(xs), np.concatenate(ys).astype(np.float64), np.concatenate([[0], np.cumsum(sizes)]))

    def quantiles(self, levels) -> np.ndarray:
        """[F, len(levels)]: np.quantile of each data set at ``levels`` (each level is computed on its own, so one
        call for the levels of every candidate B gives the same knots as a call per B)."""
        return np.array([np.quantile(self.x[a:b], levels) for a, b in zip(self.start[:-1], self.start[1:])])

    def take(self, rows) -> "_Folds":
        """The sets ``rows`` only."""
        return _Folds.of([self.x[self.start[r]:self.start[r + 1]] for r in rows],
                         [self.y[self.start[r]:self.start[r + 1]] for r in rows])


class PiecewiseLinear:
    """One PL (``logit_space=False``) or PL3 (``logit_space=True``) map with ``n_pieces`` pieces."""

    #: The slope and knot parameters: 2B + 1 of them for B pieces.
    _fitted_state = {"theta_": Array(float, ("2*n_pieces+1",))}

    #: Its settings, checked when a saved map is loaded (PL and PL3 differ in ``logit_space`` alone).
    _declared_settings = {"n_pieces": Scalar(int, within="[1, inf)"), "logit_space": Choice(True, False),
                          "loss": Choice(*LOSSES), "optimizer": Choice(*OPTIMIZERS), "seed": Scalar(int),
                          "max_iter": Scalar(int, within="[1, inf)")}

    def __init__(self, n_pieces: int = 2, logit_space: bool = False, loss: str = "ce", optimizer: str = "lbfgs",
                 seed: int = 0, max_iter: int = 1000):
        if loss not in LOSSES or optimizer not in OPTIMIZERS or n_pieces < 1:
            raise ValueError(f"PiecewiseLinear: loss must be one of {LOSSES}, optimizer one of {OPTIMIZERS}, "
                             f"n_pieces ≥ 1; got {loss!r}, {optimizer!r}, {n_pieces}")
        self.n_pieces, self.logit_space, self.loss = n_pieces, logit_space, loss
        self.optimizer, self.seed, self.max_iter = optimizer, seed, max_iter

    # -- parametrisation (batched: theta has one row per model) ----------------------------
    def _input(self, p):
        return logit(np.clip(p, PROB_EPS, 1 - PROB_EPS)) if self.logit_space else p

    def _knots(self, theta):
        """Knot positions t (input space), dt/db, widths w and knot values u of the parameter row ``theta``."""
        from calbench.kernels.piecewise import knot_params  # lazy: numba only where a PL map is used

        return knot_params(np.ascontiguousarray(theta, dtype=np.float64), self.logit_space)

    def levels(self) -> np.ndarray:
        """The quantile levels of the equal-mass knots: 0, 1/B, …, 1."""
        return np.linspace(0, 1, self.n_pieces + 1)

    def _starts(self, quantiles):
        """Identity maps with equal-mass pieces (paper App. C.1): parameter rows [F, 2B + 1] from rows [F, B + 1] of
        input quantiles at :meth:`levels` (the knots)."""
        if self.logit_space:
            values = quantiles
            q = expit(values)
        else:
            q = quantiles
            values = logit(np.clip(q, 0.001, 0.999))
        widths = np.diff(np.concatenate([np.zeros((q.shape[0], 1)), q[:, 1:]], axis=1), axis=1)
        return np.concatenate([np.log(np.maximum(widths, 1e-12)), values], axis=1)

    def _init_theta(self, x):
        """The identity start on the inputs x (input space)."""
        return self._starts(np.quantile(x, self.levels())[None])[0]

    def _values(self, x):
        """The map at the inputs x (input space): :func:`calbench.kernels.piecewise.map_values`."""
        from calbench.kernels.piecewise import map_values

        out = np.empty(x.size)
        map_values(np.ascontiguousarray(self.theta_, dtype=np.float64), np.ascontiguousarray(x), self.logit_space, out)
        return out

    # -- loss and gradient of F models at once ---------------------------------------------
    def _loss_grad(self, theta, folds: _Folds):
        """Σ_f mean loss of model f (row f of ``theta``) on data set f of ``folds``, and the gradient [F, 2B + 1]
        (one compiled pass over each sorted data set: :func:`calbench.kernels.piecewise.loss_grad`)."""
        from calbench.kernels.piecewise import summed_loss_grad

        theta = np.ascontiguousarray(theta, dtype=np.float64)
        grad = np.empty_like(theta)
        loss = summed_loss_grad(theta, folds.x, folds.y, folds.start, self.logit_space, self.loss == "ce", grad)
        return loss, grad

    # -- fitting ---------------------------------------------------------------------------
    def sorted_folds(self, ps, ys) -> _Folds:
        """The data sets (ps[f], ys[f]) in input space, each sorted, as one :class:`_Folds` (it depends only on
        ``logit_space``, so maps with any number of pieces can be fitted on it)."""
        data = [check_binary(p, y) for p, y in zip(ps, ys)]
        orders = [np.argsort(p, kind="stable") for p, _ in data]
        return _Folds.of([self._input(p[o]) for (p, _), o in zip(data, orders)],
                         [y[o] for (_, y), o in zip(data, orders)])

    def fit_folds(self, folds: _Folds, quantiles=None) -> np.ndarray:
        """Parameters [F, 2B + 1] of F independent maps, one fitted to each data set of ``folds``, from the
        identity start (the fit-on-test CV fits 10 fold models per B, on data sorted once for every B);
        ``quantiles``: the data sets' quantiles at :meth:`levels`, where already computed."""
        starts = self._starts(folds.quantiles(self.levels()) if quantiles is None else quantiles)
        if self.optimizer == "lbfgs":
            return self._lbfgs(starts, folds)
        return np.array([self._adam(start, folds.take([f])) for f, start in enumerate(starts)])

    def fit_many(self, ps, ys) -> np.ndarray:
        """Parameters [F, 2B + 1] of F independent maps fitted to the data sets (ps[f], ys[f])."""
        return self.fit_folds(self.sorted_folds(ps, ys))

    def _lbfgs(self, theta, folds: _Folds):
        """Each model by its own L-BFGS (:func:`calbench.kernels.piecewise.lbfgs`), stopping on a relative
        decrease ≤ :data:`FTOL` or max |∇| ≤ :data:`GTOL`; one that reaches ``max_iter`` first warns."""
        from calbench.kernels.piecewise import AT_MAX_ITER, lbfgs_rows

        theta = np.array(theta, dtype=np.float64)
        states, _ = lbfgs_rows(theta, folds.x, folds.y, folds.start, self.logit_space, self.loss == "ce",
                               self.max_iter, FTOL, GTOL)
        capped = int(np.sum(states == AT_MAX_ITER))
        if capped:
            warnings.warn(f"PiecewiseLinear({self.n_pieces} pieces): L-BFGS stopped at max_iter={self.max_iter} "
                          f"before its convergence test in {capped} of {states.size} fits; raise max_iter",
                          NotConvergedWarning, stacklevel=3)
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
        return self._values(self._input(p))

    def knots(self) -> tuple[np.ndarray, np.ndarray]:
        """Knot positions in probability space and the map's values there (for plots)."""
        t, _, _, u = self._knots(self.theta_)
        b = expit(t) if self.logit_space else t
        return b, (expit(u) if self.logit_space else u)

    def summary(self) -> dict:
        b, c = self.knots()
        return {"knots": b.tolist(), "values": c.tolist()}


class PiecewiseLinearCV:
    """The fit-on-test paper's PL / PL3 estimator: B by k-fold CV (Brier, 0.1 % rule), fold models averaged."""

    _fitted_state = {"cv_scores_": Array(float, ("k",)), "n_pieces_": Scalar(int),
                     "models_": ListOf(Instance(PiecewiseLinear))}

    #: Its settings, checked when a saved map is loaded.
    _declared_settings = {"logit_space": Choice(True, False), "loss": Choice(*LOSSES), "seed": Scalar(int),
                          "n_folds": Scalar(int, within="[2, inf)"),
                          "max_pieces": Scalar(int, none=True, within="[1, inf)"), "ensemble": Choice(True, False),
                          "trick": Choice(True, False), "optimizer": Choice(*OPTIMIZERS)}

    def __init__(self, logit_space: bool = False, loss: str = "ce", seed: int = 0, n_folds: int = 10,
                 max_pieces: int | None = None, ensemble: bool = True, trick: bool = True,
                 optimizer: str = "lbfgs"):
        self.logit_space, self.loss, self.seed, self.n_folds = logit_space, loss, seed, n_folds
        self.max_pieces, self.ensemble, self.trick, self.optimizer = max_pieces, ensemble, trick, optimizer

    def candidates(self, n: int) -> np.ndarray:
        """B = 1 … min(n // 200, 15) + 1 (the paper's range: 1..6 at n = 1000, 1..16 from n = 3000)."""
        top = self.max_pieces if self.max_pieces is not None else min(n // 200, 15) + 1
        return np.arange(1, max(top, 1) + 1)

    def _map(self, n_pieces, theta=None) -> PiecewiseLinear:
        """A map with this estimator's settings and ``n_pieces`` pieces (parameters ``theta``, where given)."""
        fitted = PiecewiseLinear(n_pieces, self.logit_space, self.loss, self.optimizer, self.seed)
        if theta is not None:
            fitted.theta_ = theta
        return fitted

    def fit(self, p, y) -> "PiecewiseLinearCV":
        from calbench.kernels.piecewise import mean_squared_errors

        p, y = check_binary(p, y)
        template = self._map(1)
        if min(self.n_folds, p.size) < 2:  # nothing to cross-validate: one piece fitted on all data
            self.cv_scores_, self.n_pieces_ = np.empty(0), 1  # no CV ran: no scores
            self.models_ = [self._map(1, template.fit_folds(template.sorted_folds([p], [y]))[0])]
            return self
        folds = list(kfold_splits(p.size, min(self.n_folds, p.size), self.seed))
        training = template.sorted_folds([p[tr] for tr, _ in folds], [y[tr] for tr, _ in folds])  # shared by every B
        held_out = template.sorted_folds([p[te] for _, te in folds], [y[te] for _, te in folds])
        candidates = self.candidates(p.size)
        levels = [self._map(n_pieces).levels() for n_pieces in candidates]
        quantiles = training.quantiles(np.concatenate(levels))  # every B's starting knots, one call per fold
        bounds = np.cumsum([0] + [level.size for level in levels])
        scores, thetas = [], []
        for n_pieces, a, b in zip(candidates, bounds[:-1], bounds[1:]):
            # 10 fold models, each by its own L-BFGS in one compiled call; their held-out Brier scores in another
            theta = self._map(n_pieces).fit_folds(training, quantiles[:, a:b])
            scores.append(np.mean(mean_squared_errors(theta, held_out.x, held_out.y, held_out.start, self.logit_space)))
            thetas.append(theta)
        self.cv_scores_ = np.array(scores)
        chosen = prefer_fewer(self.cv_scores_) if self.trick else int(np.argmin(self.cv_scores_))
        self.n_pieces_ = int(candidates[chosen])
        if not self.ensemble:
            thetas[chosen] = self._map(self.n_pieces_).fit_folds(template.sorted_folds([p], [y]))
        self.models_ = [self._map(self.n_pieces_, theta) for theta in thetas[chosen]]
        return self

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        x = self.models_[0]._input(p)
        return np.mean([m._values(x) for m in self.models_], axis=0)

    def summary(self) -> dict:
        return {"n_pieces": self.n_pieces_, "cv_brier": [float(s) for s in self.cv_scores_]}
