"""LECE and LECD: non-parametric calibration from the k nearest calibration points.

Valk & Kull, *Assuming Locally Equal Calibration Errors for Non-Parametric Multiclass Calibration*
(TMLR), Algorithm 1 and §3.2 (docs/methods_nonparametric.md). For a query p̂ and the k = ⌊q·n⌋
calibration predictions nearest to it (KL divergence d_KL(p̂, p̂ᵢ) with the query first, or the
Euclidean distance):

* LECE: ĉ = p̂ − (p̄ − ȳ), the neighbours' mean calibration error subtracted from p̂;
* LECD: ĉ = ȳ, the neighbours' mean one-hot label (the classical kNN estimate);

then every class with p̂ᵢ ≤ t or ĉᵢ ≤ t keeps p̂ᵢ, and the vector is renormalised.

Speed (docs/methods_nonparametric.md, docs/runtime.md): d_KL(a, b) = Σ a ln a − a·ln b, the first term
constant per query, so neighbour order needs only −a·ln b (Euclidean: one matrix product per block of
queries). Every term of −a·ln b is ≥ 0, so a peaked query's few largest classes bound each
pool row's score from both sides; other queries take a float32 product with its error bound. Rows whose
bounds straddle a rank boundary are re-scored in float64 (the same neighbours as float64;
:mod:`calbench.kernels.neighbour_sums`), and the neighbour sums of several k at once are one compiled
cache-blocked pass over the pool's targets. Queries are processed in blocks so memory stays bounded for
any test size. During the grid search the whole set's pool is built once, one distance computation and
one partial ordering per fold serve every (q, t), and the CV loss of each (q, t) comes from per-row sums
(:func:`thresholded_losses`), no output matrix formed. A prediction with t > 0 sums the neighbours only
at the classes with p̂ⱼ > t (the others keep p̂ⱼ).
"""

from __future__ import annotations

import copy

import numpy as np

from calbench.fitted_state import Array, Instance, Scalar
from calbench.kernels import neighbour_sums
from calbench.maps1d.one_vs_rest import renormalise
from calbench.methods.base import Calibrator
from calbench.methods.constraints import Interval, Options, check_settings
from calbench.methods.registry import register
from calbench.metrics.proper import NLL_EPS
from calbench.parallel import thread_map
from calbench.scores import Derivation, Scores

#: The paper's grid (§4.2.2), verbatim: neighbourhood proportions q and thresholds t.
PAPER_GRID = {
    "q": [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.1, 0.2, 1.0],
    "t": [0.0, 0.00125, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.05, 0.10, 1.0],
}
DISTANCES = ("kl", "euclidean")
#: Pool rows per block while the pool is built (bounds its temporary float64 arrays).
BUILD_ROWS = 1024
#: Distance-matrix entries per block of queries (2**22 float64 = 32 MiB, plus as much for indices).
BLOCK_ENTRIES = 2**22
#: A prediction block sums its neighbours only at the entries with p̂ > t (the others keep p̂) when they are
#: at most this share of the block (peaked predictions: a few classes per row); else every class, densely.
SPARSE_SHARE = 1 / 8


def neighbour_count(q: float, n: int) -> int:
    """k = ⌊q·n⌋ of the current pool (the authors' ``int(n·q)``), at least one neighbour."""
    return max(1, int(q * n))


class NeighbourPool:
    """Calibration predictions and per-point targets; sums targets over each query's k nearest.

    ``targets(probs, labels)`` gives the targets of pool rows with probabilities ``probs`` (which it may
    overwrite) and labels ``labels`` (p̂ᵢ − yᵢ for LECE, yᵢ for LECD): a module-level function, so that a saved
    pool names it. The pool is built by blocks of :data:`BUILD_ROWS` rows, so no float64 copy of the whole
    pool's probabilities is made; the targets are kept as column chunks for the compiled cache-blocked kernel
    (:mod:`calbench.kernels.neighbour_sums`). A CV fold's pool is the whole set's pool :meth:`restricted` to
    the fold's training rows. A saved pool (:mod:`calbench.persist`) holds only what defines it, the logits,
    labels and settings, and is built again on loading: the same arrays, a file of 1/5 the size. A pool fitted
    inside a chain (``ts+lece``) saves the chain's input logits and earlier steps instead of its own logits
    (``scores.derived_from``) where replaying them gives its logits bit for bit: float32-exact dump logits
    stay float32 in the file, where the temperature-scaled ones would take float64. (The pool then keeps a
    reference to the chain's input logits, which the caller usually holds anyway.)
    """

    def __init__(self, scores: Scores, labels: np.ndarray, targets, distance: str, eps: float):
        logits = scores.logits
        self.n, self.width = n, classes = logits.shape
        self.labels, self.targets, self.distance, self.eps = labels, targets, distance, eps  # what defines it
        self.derived_from = scores.derived_from
        self.total = np.zeros(classes)
        self.logit_scale = 0.0
        kl = distance == "kl"
        # KL: score bounds from float32 −ln p̂ (by class), re-checked in float64 (from the logits) near rank boundaries
        self.cols32 = np.empty((classes, n), dtype=np.float32) if kl else None  # by class: −ln max(p̂, eps)
        self.col_max = np.empty(n, dtype=np.float32) if kl else None
        self.rows, self.offset = (None, None) if kl else (np.empty((n, classes)), np.empty(n))
        self.logits, self.log_norm = logits, (np.empty(n) if kl else None)
        self.chunks = neighbour_sums.empty_chunks(n, classes)
        self.members = None  # the rows of chunks, logits and log_norm that are this pool's (None: all, in order)
        for start in range(0, n, BUILD_ROWS):
            rows = slice(start, start + BUILD_ROWS)
            probs = scores.subset(rows).probs
            if kl:  # −a·ln b orders the pool like d_KL(a, b) for a fixed query a
                log_rows = np.clip(probs, eps, 1.0)
                log_rows32 = np.negative(np.log(log_rows, out=log_rows)).astype(np.float32)
                self.cols32[:, rows], self.col_max[rows] = log_rows32.T, log_rows32.max(axis=1)
                # ln Σ exp(z) = z_top − ln p̂_top, exact for the softmax's largest entry
                top, index, block_logits = np.argmax(probs, axis=1), np.arange(probs.shape[0]), logits[rows]
                self.log_norm[rows] = block_logits[index, top] - np.log(probs[index, top])
                self.logit_scale = max(self.logit_scale, np.max(np.abs(block_logits), initial=0.0,
                                                                where=np.isfinite(block_logits)))
            else:  # ‖a − b‖² = ‖a‖² − 2a·b + ‖b‖², the first term constant per query
                self.rows[rows] = -2.0 * probs
                self.offset[rows] = np.einsum("ij,ij->i", probs, probs)
            block = targets(probs, labels[rows])
            self.total += block.sum(axis=0)
            neighbour_sums.put_rows(self.chunks, start, block)
        if kl:  # the largest finite |logit| + |log-normaliser| (the float64 re-check's rounding)
            self.logit_scale += np.abs(self.log_norm).max(initial=0.0)

    @staticmethod
    def build_bytes(n: int, classes: int) -> int:
        """An upper bound on the bytes building a pool of ``n`` rows × ``classes`` allocates: the float64 logits and
        target chunks (padded to whole chunks), the float32 log-probabilities, the per-row vectors, and one
        block's temporaries (:data:`BUILD_ROWS` rows)."""
        padded = -(-classes // neighbour_sums.CHUNK_COLUMNS) * neighbour_sums.CHUNK_COLUMNS
        return 8 * n * padded + 24 * n * classes + 40 * n + 48 * min(n, BUILD_ROWS) * classes

    def defining_rows(self) -> dict:
        """What defines this pool besides its owner's settings, for :mod:`calbench.persist`: its labels, and its
        logits or, fitted inside a chain, the chain's input logits and earlier steps where replaying them gives
        the logits bit for bit. :meth:`LECE._set_state` builds the pool again from them."""
        if self.members is not None:
            raise TypeError("a CV fold's restricted pool is not saved; save the calibrator that owns the whole pool")
        derivation = self.derived_from
        if derivation is not None and np.array_equal(derivation.replay(), self.logits):
            return {"labels": self.labels,
                    "derived_from": {"steps": list(derivation.steps), "logits": derivation.logits}}
        return {"labels": self.labels, "logits": self.logits}

    @staticmethod
    def scores_of(rows: dict) -> Scores:
        """The scores of saved :meth:`defining_rows` (the derivation replayed), checked against the labels; the
        logits' dtype is checked before any cast (float only)."""
        derived = rows.get("derived_from")
        logits = derived["logits"] if derived is not None else rows["logits"]
        if not isinstance(logits, np.ndarray) or logits.dtype.kind != "f":
            raise ValueError(f"pool logits: expected a float array, got {getattr(logits, 'dtype', type(logits))}")
        if derived is not None:
            derivation = Derivation(tuple(derived["steps"]), logits.astype(np.float64, copy=False))
            scores = Scores(derivation.replay()).with_derivation(derivation)
        else:
            scores = Scores(logits)
        labels = rows["labels"]
        valid = labels.dtype.kind in "iu" and labels.shape == (scores.n,)
        if not (valid and np.all((labels >= 0) & (labels < scores.num_classes))):
            raise ValueError(f"pool labels: expected {scores.n} integer labels in [0, {scores.num_classes}), got "
                             f"{labels.dtype} {labels.shape}")
        return scores

    def restricted(self, rows: np.ndarray) -> "NeighbourPool":
        """This pool limited to its rows ``rows``, in that order (a CV fold's training part), sharing the targets,
        logits and normalisers instead of building them again; only the distance rows are copied."""
        pool = copy.copy(self)
        rows = np.asarray(rows, dtype=np.int64)
        left_out = np.ones(self.n, dtype=bool)
        left_out[rows] = False
        pool.n, pool.members = rows.size, self._shared_rows(rows)
        pool.total = self.total - neighbour_sums.row_sums(self.chunks, self._shared_rows(np.flatnonzero(left_out)),
                                                           self.width)
        if self.cols32 is not None:
            pool.cols32, pool.col_max = self.cols32.take(rows, axis=1), self.col_max[rows]  # C order
        else:
            pool.rows, pool.offset = self.rows[rows], self.offset[rows]
        return pool

    def _shared_rows(self, rows: np.ndarray) -> np.ndarray:
        """The rows of the shared arrays (chunks, logits, log_norm) holding this pool's rows ``rows``."""
        return rows if self.members is None else self.members[rows]

    def nearest_by_band(self, queries: np.ndarray, ends) -> np.ndarray:
        """``[b, ends[-1]]`` pool rows nearest to each query, positions ``ends[j−1]:ends[j]`` holding the
        neighbours of ranks ``ends[j−1] … ends[j] − 1`` (rows of the shared arrays: :meth:`_shared_rows`)."""
        if self.cols32 is not None:
            nearest = neighbour_sums.nearest_kl_by_band(queries, self.cols32, self.col_max, self.logits, self.log_norm,
                                                        ends, self.eps, self.logit_scale, self.members)
        else:  # Euclidean: ‖b‖² − 2a·b per query a
            nearest = nearest_by_band(queries @ self.rows.T + self.offset, ends)
        return self._shared_rows(nearest)

    def neighbour_sums(self, queries: np.ndarray, ks) -> list[np.ndarray]:
        """For each k in ``ks``, the ``[b, T]`` sums of targets over each query's k nearest points."""
        ks = [min(k, self.n) for k in ks]
        partial = sorted(set(k for k in ks if k < self.n))
        out = {self.n: np.broadcast_to(self.total, (queries.shape[0], self.width))}
        if not partial:
            return [out[k] for k in ks]
        nearest = self.nearest_by_band(queries, partial)
        running = neighbour_sums.cumulative_band_sums(self.chunks, self.width, nearest, partial)
        out.update((k, running[:, j]) for j, k in enumerate(partial))
        return [out[k] for k in ks]

    def neighbour_sums_at(self, queries: np.ndarray, k: int, needed: np.ndarray) -> np.ndarray:
        """The sums of targets over each query's k nearest points (k < n) at the entries where ``needed``
        ``[b, T]`` is True, in the order of ``np.nonzero(needed)``."""
        return neighbour_sums.column_sums(self.chunks, self.nearest_by_band(queries, [k]), needed)


def nearest_by_band(scores: np.ndarray, ends) -> np.ndarray:
    """``[b, ends[-1]]`` indices of each row's ``ends[-1]`` smallest scores, ordered so that positions
    ``ends[j−1]:ends[j]`` hold the neighbours of ranks ``ends[j−1] … ends[j] − 1`` (ties broken arbitrarily)."""
    k_max = ends[-1]
    nearest = np.argpartition(scores, k_max - 1, axis=1)[:, :k_max]
    if len(ends) > 1:
        near_scores = np.take_along_axis(scores, nearest, axis=1)
        nearest = np.take_along_axis(nearest, np.argsort(near_scores, axis=1), axis=1)
    return nearest


def block_rows(n_pool: int) -> int:
    """Queries per block so that a block's distance matrix has about :data:`BLOCK_ENTRIES` entries."""
    return max(1, BLOCK_ENTRIES // max(n_pool, 1))


def threshold_and_renormalise(p: np.ndarray, estimate: np.ndarray, t: float) -> np.ndarray:
    """Algorithm 1 lines 7–8: keep p̂ᵢ where p̂ᵢ ≤ t or ĉᵢ ≤ t, then divide by the row sum."""
    keep = (p <= t) | (estimate <= t)
    return renormalise(np.where(keep, p, estimate))


def thresholded_losses(p: np.ndarray, estimate: np.ndarray, y: np.ndarray, thresholds, scoring: str) -> np.ndarray:
    """``[len(thresholds), b]``: per row, the log-loss or Brier score of Algorithm 1's output (lines 7–8,
    :func:`threshold_and_renormalise`) at each threshold t, without forming the outputs.

    Class j takes ĉⱼ instead of p̂ⱼ exactly where u = min(p̂ⱼ, ĉⱼ) > t (then ĉⱼ > 0, so the clipping of
    :func:`~calbench.maps1d.one_vs_rest.renormalise` never applies to non-negative p̂): the row sum is
    Σ p̂ + Σ_{u > t} (ĉ − p̂), and Σ out² likewise. Thresholds after the smallest use only the entries
    with u above the second smallest (few for peaked predictions: u ≤ p̂).
    """
    rows, classes = np.arange(y.size), p.shape[1]
    u = np.minimum(p, estimate)
    change = estimate - p
    change_sq = estimate**2 - p**2 if scoring == "brier" else None
    p_y, c_y, u_y = p[rows, y], estimate[rows, y], u[rows, y]
    base, base_sq = p.sum(axis=1), np.einsum("ij,ij->i", p, p)
    order = np.argsort(thresholds)
    if len(thresholds) > 1:  # the entries that any threshold after the smallest replaces
        row_of, col_of = np.nonzero(u > thresholds[order[1]])
        sparse_u, sparse_change = u[row_of, col_of], change[row_of, col_of]
        sparse_change_sq = change_sq[row_of, col_of] if change_sq is not None else None
    out = np.empty((len(thresholds), y.size))
    for position, index in enumerate(order):
        t = thresholds[index]
        if position == 0:
            replaced = u > t
            total = base + np.einsum("ij,ij->i", change, replaced)
            total_sq = base_sq + np.einsum("ij,ij->i", change_sq, replaced) if change_sq is not None else None
        else:
            hit = sparse_u > t
            total = base + np.bincount(row_of[hit], sparse_change[hit], minlength=y.size)
            total_sq = (base_sq + np.bincount(row_of[hit], sparse_change_sq[hit], minlength=y.size)
                        if change_sq is not None else None)
        valid = total > 0  # renormalise: an all-zero row becomes uniform
        safe = np.where(valid, total, 1.0)
        p_true = np.where(valid, np.where(u_y > t, c_y, p_y) / safe, 1.0 / classes)
        if scoring == "nll":
            out[index] = -np.log(np.clip(p_true, NLL_EPS, None))
        elif scoring == "brier":
            out[index] = np.where(valid, total_sq / safe**2, 1.0 / classes) - 2 * p_true + 1.0
        else:
            raise ValueError(f"cv.scoring: expected 'nll' or 'brier', got {scoring!r}")
    return out


@register("lece")
class LECE(Calibrator):
    """Locally equal calibration errors (LECE paper Algorithm 1).

    Parameters
    ----------
    q : neighbourhood size as a proportion of the calibration set, k = ⌊q·n⌋ (paper: q = 0.1,
        k = 500 in the synthetic experiment).
    t : threshold on both p̂ᵢ and the calibrated ĉᵢ ("≤"); 0 only prevents negative outputs,
        1 gives the identity.
    distance : ``"kl"`` (d_KL(query, point), the paper's LECE) or ``"euclidean"`` (LECE_euc ablation).
    eps : probabilities are clipped to ``[eps, 1]`` before the logarithm of the KL divergence
        (authors' code: 1e-30; the paper's +∞ for p̂'ᵢ = 0 becomes a large finite distance).

    Tuned by 10-fold CV on log-loss over the paper's (q, t) grid unless the config sets ``grid``.
    """

    #: The neighbour count and the pool of the n calibration rows (None where t = 1: the identity).
    _fitted_state = {"pool_": Instance(NeighbourPool, none=True, fields={
        "labels": Array(int, ("n",), within="[0, C)"), "logits": Array(float, ("n", "C"))}),
        "k_": Scalar(int, within="[1, n]")}

    default_grid = PAPER_GRID
    default_cv = {"folds": 10, "scoring": "nll"}
    _parameter_constraints = {"q": [Interval("real", 0, 1, closed="right")], "t": [Interval("real", 0, 1)],
                              "distance": [Options(*DISTANCES)], "eps": [Interval("real", 0, 1, closed="right")]}

    def __init__(self, *, q: float = 0.1, t: float = 0.0, distance: str = "kl", eps: float = 1e-30):
        self.q = q
        self.t = t
        self.distance = distance
        self.eps = eps

    @staticmethod
    def _targets(probs: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per calibration point: the calibration error p̂ᵢ − yᵢ (written over ``probs``)."""
        probs[np.arange(y.size), y] -= 1.0
        return probs

    def _estimate(self, p: np.ndarray, mean_target: np.ndarray) -> np.ndarray:
        """ĉ = p̂ − CE with CE the neighbours' mean p̄ − ȳ."""
        return p - mean_target

    def _pool(self, scores: Scores, y: np.ndarray) -> NeighbourPool:
        return NeighbourPool(scores, y, self._targets, self.distance, self.eps)

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        self.pool_ = self._pool(scores, y) if self.t < 1.0 else None  # t = 1: the identity, no neighbours
        self.k_ = neighbour_count(self.q, y.size)

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        """Each block of outputs made from its block of estimates (no full-size estimate is held). With
        t = 1 every class keeps p̂ᵢ ≤ 1 (Algorithm 1 line 7), so no neighbours are needed."""
        check_settings(self._parameter_constraints, self.get_params(deep=False))  # set_params after fit
        if self.t >= 1.0:
            return renormalise(scores.probs)
        out = np.empty(scores.logits.shape)

        def finish(rows, p, k, estimate):
            out[rows] = threshold_and_renormalise(p, estimate, self.t)

        self._block_estimates(self.pool_, scores, [self.k_], finish, keep_below=self.t)
        return out

    def _settings(self, points: list[dict], pool: NeighbourPool) -> list[tuple[int, float]]:
        """(k, t) of each hyperparameter point (``q``/``t`` default to the estimator's own)."""
        settings = [(p.get("q", self.q), p.get("t", self.t)) for p in points]
        for q, t in settings:
            check_settings(self._parameter_constraints, {"q": q, "t": t}, prefix="grid.")
        return [(neighbour_count(q, pool.n), t) for q, t in settings]

    def _block_estimates(self, pool: NeighbourPool, scores: Scores, ks, handle, keep_below: float = 0.0) -> None:
        """``handle(rows, p̂, k, ĉ)`` for every block of query rows (``p̂`` their probabilities) and every k in
        ``ks``, with ĉ the block's estimate from its k nearest. One distance pass and one partial sort per
        block serve every k; blocks run in threads (numpy's partition, BLAS and the sums release the GIL)
        and must touch disjoint rows. With one k and ``keep_below`` = t > 0, ĉ is estimated only where
        p̂ > t, when few entries are (Algorithm 1 line 7 keeps p̂ elsewhere), and holds p̂ at the others."""
        step = block_rows(pool.n)
        may_be_sparse = len(ks) == 1 and ks[0] < pool.n and keep_below > 0

        def block(start: int) -> None:
            rows = slice(start, start + step)
            p = scores.subset(rows).probs
            needed = p > keep_below if may_be_sparse else None
            if needed is not None and needed.sum() <= SPARSE_SHARE * needed.size:
                estimate = p.copy()
                estimate[needed] = self._estimate(p[needed], pool.neighbour_sums_at(p, ks[0], needed) / ks[0])
                handle(rows, p, ks[0], estimate)
                return
            for k, total in zip(ks, pool.neighbour_sums(p, ks)):
                handle(rows, p, k, self._estimate(p, total / min(k, pool.n)))

        thread_map(block, range(0, scores.n, step))

    def _predict_points(self, points: list[dict], pool: NeighbourPool, scores: Scores):
        """Outputs for each hyperparameter point in turn: the estimates of every distinct k are made
        first; each point's output only when asked for, so one output is held at a time."""
        settings = self._settings(points, pool)
        probs = scores.probs
        estimates = {k: np.empty_like(probs) for k, _ in settings}

        def keep(rows, p, k, estimate):
            estimates[k][rows] = estimate

        self._block_estimates(pool, scores, sorted(estimates), keep)
        for k, t in settings:
            yield threshold_and_renormalise(probs, estimates[k], t)

    def predict_grid(self, points, train_scores: Scores, y_train, val_scores: Scores, start=()):
        """Grid-search hook: one pool, one distance pass and one partial sort serve every (q, t);
        yields (point index, probabilities, None), one at a time."""
        outputs = self._predict_points(points, self._pool(train_scores, np.asarray(y_train)), val_scores)
        return ((i, probs, None) for i, probs in enumerate(outputs))

    def grid_shared(self, scores: Scores, y) -> NeighbourPool:
        """Grid-search hook: the pool of the whole calibration set, built once for every CV fold."""
        return self._pool(scores, np.asarray(y))

    def grid_losses(self, points, train_scores: Scores, y_train, val_scores: Scores, y_val, scoring: str,
                    shared: NeighbourPool | None = None, train_rows=None):
        """Grid-search hook: the validation loss (``"nll"`` or ``"brier"``) of every (q, t), from per-row
        quantities of each block (:func:`thresholded_losses`); no output matrix is formed or held. With
        ``shared`` (:meth:`grid_shared`), the pool is its rows ``train_rows`` (the fold's training part)."""
        pool = self._pool(train_scores, np.asarray(y_train)) if shared is None else shared.restricted(train_rows)
        settings = self._settings(points, pool)
        y_val = np.asarray(y_val)
        thresholds = {k: sorted({t for kk, t in settings if kk == k}) for k, _ in settings}
        row_losses = {k: np.empty((len(ts), y_val.size)) for k, ts in thresholds.items()}

        def score(rows, p, k, estimate):
            row_losses[k][:, rows] = thresholded_losses(p, estimate, y_val[rows], thresholds[k], scoring)

        self._block_estimates(pool, val_scores, sorted(thresholds), score)
        return np.array([row_losses[k][thresholds[k].index(t)].mean() for k, t in settings])

    def fitted_summary(self) -> dict:
        return {"k": self.k_, "q": self.q, "t": self.t, "distance": self.distance}

    def _get_state(self) -> dict:
        """For :mod:`calbench.persist`: the fitted attributes, the pool as the rows that define it (a file of 1/5
        the size; :meth:`NeighbourPool.defining_rows`)."""
        state = dict(vars(self))
        if getattr(self, "pool_", None) is not None:
            state["pool_"] = self.pool_.defining_rows()
        return state

    @staticmethod
    def _set_state_bytes(state: dict) -> int:
        """What :meth:`_set_state` allocates for ``state``, before it runs (the decode budget of
        :mod:`calbench.persist`): the pool's build and the replay of its derivation (each step's output and
        temporaries)."""
        rows = state.get("pool_")
        if not isinstance(rows, dict):
            return 0
        derived = rows.get("derived_from")
        logits = derived.get("logits") if isinstance(derived, dict) else rows.get("logits")
        if not isinstance(logits, np.ndarray) or logits.ndim != 2:
            raise ValueError("pool logits: expected a 2-D array")
        n, classes = logits.shape
        steps = derived.get("steps") if isinstance(derived, dict) else ()
        replay = 32 * n * classes * (len(steps) + 1) if isinstance(steps, (list, tuple)) else 0
        return NeighbourPool.build_bytes(n, classes) + replay

    def _set_state(self, state: dict) -> None:
        """The pool built again from its saved rows, with this class's targets and this calibrator's settings."""
        state = dict(state)
        rows = state.pop("pool_", None)
        self.__dict__.update(state)
        if rows is not None:
            self.pool_ = self._pool(NeighbourPool.scores_of(rows), np.asarray(rows["labels"], dtype=np.int64))
        elif "k_" in state:
            self.pool_ = None


@register("lecd")
class LECD(LECE):
    """Locally equal calibration distributions (LECE paper §3.1–3.2 ablation): ĉ = ȳ of the k neighbours.

    Same neighbourhood, thresholding and renormalisation as :class:`LECE` (the authors' code applies
    the threshold to ȳᵢ and p̂ᵢ alike); with q = 1 and t = 0 it predicts the class prior.
    """

    @staticmethod
    def _targets(probs: np.ndarray, y: np.ndarray) -> np.ndarray:
        onehot = np.zeros_like(probs)
        onehot[np.arange(y.size), y] = 1.0
        return onehot

    def _estimate(self, p: np.ndarray, mean_target: np.ndarray) -> np.ndarray:
        return mean_target
