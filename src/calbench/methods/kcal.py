"""KCal: kernel-based calibration (Lin, Trivedi & Sun, ICLR 2023).

KCal replaces the classifier's last layer by a kernel density classifier on a learned projection
Π of the penultimate-layer embeddings (Alg. 1):

1. Π (a two-layer MLP with a skip connection, output d = min(h, 32), §3.4) is trained on the
   classifier's *training* split with stratified episodes and log-loss (§3.2, Eq. 6/11); see
   :mod:`calbench.models.projection` (torch, imported only inside ``fit``).
2. The bandwidth is chosen on the calibration set by golden-section search (§3.4) of the
   cross-validated log-loss.
3. Predictions are Eq. 3: p̂_k(x) = Σ_{i: y_i = k} φ(x_i, x) / Σ_i φ(x_i, x) over the calibration set.

The kernel is the authors' code's ``RBFKernelMean``: φ(u, v) = exp(−‖Π(u) − Π(v)‖² / (d·h)), so
the bandwidth h lives on the scale of mean squared distances (h ≈ b² of the paper's φ_b; the 1/b
factor of φ_b cancels in Eq. 3). The search covers h ∈ [0.1, 10] with tolerance 1e-4 and 20-fold
CV, as their code does. Inference is numpy and one numba kernel (:mod:`calbench.kernels.kernel_sums`).
Each row of kernel values is shifted by its largest log-kernel before exponentiating: Eq. 3 is unchanged
and no row underflows, which replaces the code's "row sum ≤ 1e-10 → class prior" guard. ``kcal_logits``
runs the same on the logits (the code's ``use_preds`` variant) for sources without embeddings.

Where the defaults differ from the authors' code (docs/models_and_kcal.md), for compute: Adam with lr 1e-3,
at most 30 epochs of 50 episodes, ReduceLROnPlateau patience 2, stop below lr 1e-4 (code: plain
SGD, lr 4e-4 on CIFAR, at most 100 epochs of 5,000 episodes, patience 10, stop below 1e-5).
``optimizer="sgd", lr=4e-4, steps_per_epoch=5000, max_epochs=100, patience=10, min_lr=1e-5`` gives
the code's schedule. ``keep="last"`` (code) or ``"best"`` (PyHealth's port).
"""

from __future__ import annotations

import contextlib

import numpy as np

from calbench.fitted_state import Array, DictOf, ListOf, Scalar, Setting
from calbench.folds import fold_ids
from calbench.kernels.kernel_sums import class_mass
from calbench.methods.base import Calibrator, MissingClass
from calbench.methods.constraints import IncreasingPair, Interval, Options, Pattern
from calbench.methods.registry import register
from calbench.metrics.proper import KCAL_LOSS_EPS
from calbench.parallel import available_cores, thread_map
from calbench.scores import Scores

GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


#: The arrays of :func:`calbench.models.projection.export` for each projection: ``linear`` (BatchNorm, then the
#: first layer without bias) and ``skip_elu`` (with the first layer's bias and the second layer).
PROJECTION_PARAMS = {"linear": frozenset({"bn_mean", "bn_var", "bn_weight", "bn_bias", "bn_eps", "first_weight"})}
PROJECTION_PARAMS["skip_elu"] = PROJECTION_PARAMS["linear"] | {"first_bias", "second_weight"}


def project(params: dict, x: np.ndarray) -> np.ndarray:
    """Π(x) in numpy from :func:`calbench.models.projection.export` parameters (BatchNorm in eval mode, folded
    into the first layer: W·BN(x) + c = W·diag(γ/√(v + ε))·x + W·(β − γ·μ/√(v + ε)) + c, one matrix product)."""
    if set(params) not in PROJECTION_PARAMS.values():
        raise ValueError(f"projection parameters {sorted(params)}: expected those of a projection "
                         f"({', '.join(f'{k}: {sorted(v)}' for k, v in PROJECTION_PARAMS.items())})")
    scale = params["bn_weight"] / np.sqrt(params["bn_var"] + params["bn_eps"])
    weight = params["first_weight"]
    u = np.asarray(x, dtype=np.float64) @ (weight * scale).T + weight @ (params["bn_bias"] - params["bn_mean"] * scale)
    if "first_bias" in params:
        u = u + params["first_bias"]
    if "second_weight" in params:
        u = u + np.where(u > 0, u, np.expm1(np.minimum(u, 0.0))) @ params["second_weight"].T
    return u


#: Cross-validation keeps the calibration set's matrix product 2·z·zᵀ in memory up to this many rows
#: (float32: 8,000² × 4 bytes = 256 MB); above it, it is recomputed for every bandwidth.
CACHE_ROWS = 8000
#: Query rows per block of the [rows, support] matrix product (256 × 25,000 float32 is 25 MB).
CHUNK_ROWS = 256


class _Support:
    """Support points sorted by class, for Eq. 3's per-class sums (:func:`calbench.kernels.kernel_sums.class_mass`).

    ``groups`` (cross-validation folds; one per point gives leave-one-out) leave out the support points of a
    query's own group."""

    def __init__(self, support, labels, num_classes, groups=None):
        if labels.size and (labels.min() < 0 or labels.max() >= num_classes):  # a damaged saved state
            raise ValueError(f"support labels: expected classes in [0, {num_classes}), got {labels.min()} to "
                             f"{labels.max()}")
        order = np.argsort(labels, kind="stable")
        self.points = np.asarray(support, dtype=np.float32)[order]
        self.sq = np.einsum("ij,ij->i", self.points.astype(np.float64), self.points.astype(np.float64))
        self.class_ends = np.searchsorted(labels[order], np.arange(num_classes), side="right")
        self.prior = np.bincount(labels, minlength=num_classes) / labels.size
        self.num_classes = num_classes
        self.groups = np.zeros(labels.size, dtype=np.int64) if groups is None else np.asarray(groups, np.int64)[order]

    def blocks(self, query, query_groups=None, chunk: int = CHUNK_ROWS):
        """Blocks ``(start, 2·q·sᵀ [rows, support] float32, ‖q‖² float64, query groups)``; without groups, −1
        (no support point's group when ``groups`` is None).

        The products are views of one reused buffer: copy a block to keep it beyond the next iteration."""
        query = np.asarray(query, dtype=np.float32)
        query_sq = np.einsum("ij,ij->i", query.astype(np.float64), query.astype(np.float64))
        query_groups = np.full(query.shape[0], -1) if query_groups is None else np.asarray(query_groups, np.int64)
        twice_query = 2.0 * query  # 2·q·s exactly, one pass less
        gram_buffer = np.empty((min(chunk, query.shape[0]), self.points.shape[0]), dtype=np.float32)
        for lo in range(0, query.shape[0], chunk):
            q = twice_query[lo:lo + chunk]
            gram = np.matmul(q, self.points.T, out=gram_buffer[:q.shape[0]])
            yield lo, gram, query_sq[lo:lo + chunk], query_groups[lo:lo + chunk]

    def map_blocks(self, function, query, query_groups=None) -> list:
        """``[function(*block) for block in self.blocks(query, query_groups)]``, in threads on the available
        cores: each takes a contiguous run of whole blocks with a buffer of its own (the products and Eq. 3's
        compiled sums release the GIL), so the blocks, and the results in their order, are the serial ones."""
        query = np.asarray(query)
        n = query.shape[0]
        per_run = -(-n // (CHUNK_ROWS * max(1, available_cores()))) * CHUNK_ROWS  # whole blocks per thread
        groups = np.full(n, -1) if query_groups is None else np.asarray(query_groups, np.int64)

        def run(start):
            rows = slice(start, start + per_run)
            return [function(start + lo, *rest) for lo, *rest in self.blocks(query[rows], groups[rows], CHUNK_ROWS)]

        return [result for part in thread_map(run, range(0, n, per_run)) for result in part]

    def _mass(self, gram, query_sq, query_groups, bandwidth, labels, columns, nearest=None, find=True):
        """:func:`class_mass` of a block; ``nearest``: the rows' nearest squared distances, found and written
        there with ``find``, else read (None: found in a temporary)."""
        mass = np.empty((gram.shape[0], columns))
        nearest, find = (np.empty(gram.shape[0]), True) if nearest is None else (nearest, find)
        class_mass(gram, query_sq, self.sq, self.groups, query_groups, self.class_ends,
                   1.0 / (self.points.shape[1] * bandwidth), labels, nearest, find, mass)
        return mass

    def shares(self, gram, query_sq, query_groups, bandwidth: float) -> np.ndarray:
        """Eq. 3 for a block from :meth:`blocks`: class shares of exp(−sq / (d·h)), shifted by each row's nearest
        admissible point (the ratio is unchanged and no row underflows); rows with none get the class prior."""
        mass = self._mass(gram, query_sq, query_groups, bandwidth, np.empty(0, np.int64), self.num_classes)
        total = mass.sum(axis=1, keepdims=True)
        empty = total[:, 0] == 0.0
        mass[empty], total[empty] = self.prior, 1.0
        return mass / total

    def label_shares(self, gram, query_sq, query_groups, labels, bandwidth: float, nearest=None,
                     find=True) -> np.ndarray:
        """p̂_{labels[i]}(x_i) of :meth:`shares` for each row of the block, without the other classes' sums;
        ``nearest``, ``find`` as in :meth:`_mass`."""
        mass = self._mass(gram, query_sq, query_groups, bandwidth, np.asarray(labels, np.int64), 2, nearest, find)
        empty = mass[:, 1] == 0.0
        mass[empty] = np.stack([self.prior[labels[empty]], np.ones(empty.sum())], axis=1)
        return mass[:, 0] / mass[:, 1]


def kde_probs(query: np.ndarray, support: np.ndarray, support_labels: np.ndarray, num_classes: int,
              bandwidth: float, query_groups=None, support_groups=None) -> np.ndarray:
    """Eq. 3 for every query row: class shares of the kernel mass exp(−‖q − s‖² / (d·h)).

    ``query_groups``/``support_groups`` exclude pairs in the same group (cross-validation folds;
    one group per point gives leave-one-out). Rows with no admissible support get the class prior.
    """
    kde = _Support(support, support_labels, num_classes, support_groups)
    out = np.empty((query.shape[0], num_classes))

    def fill(lo, gram, *rest):
        out[lo:lo + gram.shape[0]] = kde.shares(gram, *rest, bandwidth)

    kde.map_blocks(fill, query, query_groups)
    return out


def _log_loss(label_probs: np.ndarray) -> float:
    return float(-np.sum(np.log(np.maximum(label_probs, KCAL_LOSS_EPS))))


def cv_log_loss(z, y, num_classes, groups, cache: bool = True):
    """``loss(h)``: mean log-loss (clipped at 1e-10, as the authors' code) of out-of-group KDE predictions.

    The matrix products and each row's nearest distance do not depend on h: the nearest distances are found
    by the first call; with ``cache``, up to :data:`CACHE_ROWS` rows, the products are computed once.
    """
    kde = _Support(z, y, num_classes, groups)
    cached = ([(lo, gram.copy(), *rest) for lo, gram, *rest in kde.blocks(z, groups)]
              if cache and y.size <= CACHE_ROWS else None)
    nearest, found = np.empty(y.size), False

    def loss(bandwidth: float) -> float:
        nonlocal found

        def block_loss(lo, gram, *rest):
            rows = slice(lo, lo + gram.shape[0])
            return _log_loss(kde.label_shares(gram, *rest, y[rows], bandwidth, nearest[rows], find=not found))

        losses = (thread_map(lambda block: block_loss(*block), cached) if cached is not None
                  else kde.map_blocks(block_loss, z, groups))
        found = True
        total = 0.0
        for block in losses:  # summed in block order, as one thread would
            total += block
        return total / y.size

    return loss


def kde_log_loss(z, y, num_classes, bandwidth, groups) -> float:
    """Mean out-of-group log-loss at one bandwidth (see :func:`cv_log_loss`)."""
    return cv_log_loss(z, y, num_classes, groups, cache=False)(bandwidth)


def golden_section(loss, lo: float, hi: float, tol: float) -> tuple[float, int]:
    """Minimise a unimodal ``loss`` on [lo, hi] (Kiefer 1953); returns (midpoint of the final bracket, evaluations)."""
    c, d = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
    fc, fd, evaluations = loss(c), loss(d), 2
    while hi - lo > tol:
        if fc < fd:
            hi, d, fd = d, c, fc
            c = hi - GOLDEN * (hi - lo)
            fc = loss(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + GOLDEN * (hi - lo)
            fd = loss(d)
        evaluations += 1
    return (lo + hi) / 2.0, evaluations


@contextlib.contextmanager
def _torch_threads(threads: int):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@register("kcal")
class KCal(Calibrator):
    """KCal on penultimate-layer embeddings (Alg. 1). Fitted: ``params_`` (Π), ``bandwidth_``,
    ``support_`` (Π of the calibration embeddings), ``support_labels_``, ``history_``.

    Parameters
    ----------
    dim : d = min(h, dim) (paper: 32; 128 for ImageNet).
    projection : ``skip_elu`` (paper) or ``linear`` (the paper's linear ablation).
    m, batch_size : background points per class and prediction batch of an episode (paper: 20, 64).
    optimizer, lr, steps_per_epoch, max_epochs, patience, min_lr : Π's training (see module docstring).
    keep : ``last`` (authors' code) or ``best`` (lowest calibration LOO loss) projection.
    bandwidth_range, tol, n_folds : golden-section search of h by n-fold CV log-loss (code: [0.1, 10], 1e-4, 20).
    seed : episodes, initialisation and CV folds. device : ``auto`` (CUDA if present) or a torch device.
    threads : torch CPU threads while training.
    """

    #: Π's parameters (their shapes follow ``projection``), Π of the n calibration points (width D) and their labels,
    #: the chosen bandwidth and the training history.
    _fitted_state = {"params_": DictOf(str, Array(float, None)), "history_": ListOf(DictOf(str, Setting())),
                     "support_": Array(float, ("n", "D")), "support_labels_": Array(int, ("n",), within="[0, C)"),
                     "bandwidth_": Scalar(float, within="(0, inf)"), "bandwidth_evaluations_": Scalar(int)}

    needs = frozenset({"embeddings", "train"})
    #: Eq. 3 sums kernels over the calibration points of each class: a class without any gets p̂ = 0.
    on_missing_class = MissingClass.REFUSE
    feature = "embeddings"
    _parameter_constraints = {
        "dim": [Interval("int", 1)], "projection": [Options("skip_elu", "linear")], "m": [Interval("int", 1)],
        "batch_size": [Interval("int", 1)], "optimizer": [Options("adam", "sgd")],
        "lr": [Interval("real", 0, closed="neither")], "steps_per_epoch": [Interval("int", 1)],
        "max_epochs": [Interval("int", 1)], "patience": [Interval("int", 0)], "min_lr": [Interval("real", 0)],
        "keep": [Options("last", "best")], "tol": [Interval("real", 0, closed="neither")],
        "n_folds": [Interval("int", 2)], "seed": [Interval("int", 0)], "threads": [Interval("int", 1)],
        "bandwidth_range": [IncreasingPair(Interval("real", 0, closed="neither"))],
        "device": [Pattern(r"auto|cpu|mps|cuda(:[0-9]+)?", "auto, cpu, mps, cuda or cuda:N")]}

    def __init__(self, *, dim=32, projection="skip_elu", m=20, batch_size=64, optimizer="adam", lr=1e-3,
                 steps_per_epoch=50, max_epochs=30, patience=2, min_lr=1e-4, keep="last",
                 bandwidth_range=(0.1, 10.0), tol=1e-4, n_folds=20, seed=0, device="auto", threads=1):
        self.dim = dim
        self.projection = projection
        self.m = m
        self.batch_size = batch_size
        self.optimizer = optimizer
        self.lr = lr
        self.steps_per_epoch = steps_per_epoch
        self.max_epochs = max_epochs
        self.patience = patience
        self.min_lr = min_lr
        self.keep = keep
        self.bandwidth_range = bandwidth_range
        self.tol = tol
        self.n_folds = n_folds
        self.seed = seed
        self.device = device
        self.threads = threads

    def _features(self, scores: Scores) -> np.ndarray:
        return np.asarray(getattr(scores, self.feature), dtype=np.float64)

    def _fit(self, scores: Scores, y: np.ndarray, train) -> None:
        from calbench.models.errors import require_models_extra

        require_models_extra(self.method_name, packages=("torch",))
        from calbench.models.projection import train_projection

        train_scores, train_y = train
        x_train, x_cal = self._features(train_scores), self._features(scores)
        if x_train.shape[1] != x_cal.shape[1]:
            raise ValueError(f"{self.method_name}: training {self.feature} have {x_train.shape[1]} columns, "
                             f"calibration {self.feature} {x_cal.shape[1]}; they must come from the same model")
        if len(train_y) <= self.batch_size:  # an episode's prediction batch would leave no background point
            raise ValueError(f"{self.method_name}: the training split has {len(train_y)} rows, no more than "
                             f"batch_size={self.batch_size}, so an episode has no background points; set "
                             f"batch_size below {len(train_y)} or give a larger training split")
        k = self.num_classes_
        d = min(x_cal.shape[1], int(self.dim))
        loo = np.arange(y.size)
        with _torch_threads(self.threads):
            result = train_projection(
                x_train, train_y, lambda p: kde_log_loss(project(p, x_cal), y, k, 1.0, loo), k, d,
                projection=self.projection, m=self.m, batch_size=self.batch_size, optimizer=self.optimizer,
                lr=self.lr, steps_per_epoch=self.steps_per_epoch, max_epochs=self.max_epochs,
                patience=self.patience, min_lr=self.min_lr, keep=self.keep, seed=self.seed, device=self.device)
        self.params_, self.history_ = result["params"], result["history"]
        self.support_, self.support_labels_ = project(self.params_, x_cal), y
        folds = fold_ids(y.size, self.n_folds, self.seed)
        self.bandwidth_, self.bandwidth_evaluations_ = golden_section(
            cv_log_loss(self.support_, y, k, folds), *self.bandwidth_range, self.tol)

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return kde_probs(project(self.params_, self._features(scores)), self.support_, self.support_labels_,
                         self.num_classes_, self.bandwidth_)

    def fitted_summary(self) -> dict:
        return {"bandwidth": self.bandwidth_, "dim": int(self.support_.shape[1]), "epochs": len(self.history_),
                "final_val_loss": self.history_[-1]["val_loss"], "bandwidth_evaluations": self.bandwidth_evaluations_}


@register("kcal_logits")
class KCalLogits(KCal):
    """KCal with the logits in place of the embeddings (the authors' ``use_preds`` variant)."""

    needs = frozenset({"logits", "train"})
    feature = "logits"
