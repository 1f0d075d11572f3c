"""Training of KCal's projection Π (Lin, Trivedi & Sun, ICLR 2023, §3.2, §3.4, Alg. 1) with torch.

Π is trained on the classifier's *training* split with the paper's episodes: a prediction batch
S^B of ``batch_size`` points and, per class k, a background set B^k of ``m`` points drawn from
S^k \\ S^B; x_j ∈ S^B is predicted by the weighted kernel classifier of Eq. 6/11,

    p̂_k(x_j) = Σ_{x∈B^k} w_k φ(x, x_j) / Σ_k' Σ_{x∈B^k'} w_k' φ(x, x_j),   w_k = |S^k \\ S^B| / |B^k|,

with φ(u, v) = exp(−‖Π(u) − Π(v)‖² / d) (bandwidth 1 during training, §3.2), and the loss is the
mean log-loss over S^B. Each row's kernels are shifted by its largest before exponentiating (Eq. 6's
ratio is unchanged), which needs none of the authors' code's 1e-10 guards; probabilities are still
clipped at 1e-10 in the loss as in their code. An episode's train-mode forward pass is one affine map
of every training row (:class:`TrainingRows`); the prediction batch and the background points form one
BatchNorm batch (the paper does not say; the authors' code calls Π on each separately, so each is
normalised by its own batch statistics). Early stopping follows the authors' code (the spec's
reading of "until the loss does not improve"): after each epoch the leave-one-out log-loss of the
calibration set (bandwidth 1) steps a ReduceLROnPlateau schedule (factor 0.5) and training stops once
the learning rate falls below ``min_lr``. Only imported inside :meth:`calbench.methods.kcal.KCal.fit`.
"""

from __future__ import annotations

import copy
import logging
import warnings

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from calbench.convergence import NotConvergedWarning
from calbench.metrics.proper import KCAL_LOSS_EPS as PROB_CLIP

log = logging.getLogger("calbench")


class SkipELU(nn.Module):
    """Π(x) = u + V·ELU(u), u = W·BN(x) + c: a two-layer MLP with a skip connection (§3.4)."""

    def __init__(self, h: int, d: int):
        super().__init__()
        self.bn = nn.BatchNorm1d(h)
        self.first = nn.Linear(h, d)
        self.second = nn.Linear(d, d, bias=False)

    def forward(self, x):
        return self.head(self.first(self.bn(x)))

    def head(self, u):
        """The layers after the first linear one: u + V·ELU(u)."""
        return u + self.second(nn.functional.elu(u))


class BNLinear(nn.Module):
    """The linear ablation: Π(x) = W·BN(x)."""

    def __init__(self, h: int, d: int):
        super().__init__()
        self.bn = nn.BatchNorm1d(h)
        self.first = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.first(self.bn(x))

    def head(self, u):
        """Nothing after the linear layer."""
        return u


PROJECTIONS = {"skip_elu": SkipELU, "linear": BNLinear}


def export(module: nn.Module) -> dict[str, np.ndarray]:
    """The parameters and BatchNorm statistics as float64 numpy arrays (for numpy inference)."""
    bn = module.bn
    params = {"bn_mean": bn.running_mean, "bn_var": bn.running_var, "bn_weight": bn.weight, "bn_bias": bn.bias,
              "first_weight": module.first.weight}
    if module.first.bias is not None:
        params["first_bias"] = module.first.bias
    if hasattr(module, "second"):
        params["second_weight"] = module.second.weight
    out = {k: v.detach().cpu().double().numpy() for k, v in params.items()}
    out["bn_eps"] = np.array(bn.eps)
    return out


class EpisodeSampler:
    """Draws (prediction indices, background indices, background class weights) per Eq. 6/11, vectorised.

    Background points of class k are the ``m`` lowest random keys among S^k \\ S^B: one sort by
    (class, key) per episode instead of a loop over classes.
    """

    def __init__(self, labels: torch.Tensor, num_classes: int, batch_size: int, m: int, generator):
        self.labels, self.batch_size, self.m, self.generator = labels, batch_size, m, generator
        self.counts = torch.bincount(labels, minlength=num_classes)
        self.starts = torch.cumsum(self.counts, 0) - self.counts
        self.num_classes = num_classes

    def __call__(self):
        n = self.labels.numel()
        pred = torch.randperm(n, generator=self.generator)[: self.batch_size]
        keys = torch.rand(n, generator=self.generator, dtype=torch.float64)
        keys[pred] = 2.0  # the prediction batch sorts last within its class: never background
        order = torch.argsort(self.labels.double() * 4.0 + keys)
        ordered_labels = self.labels[order]
        rank = torch.arange(n) - self.starts[ordered_labels]
        available = self.counts - torch.bincount(self.labels[pred], minlength=self.num_classes)
        taken = torch.clamp(available, max=self.m)
        background = order[rank < taken[ordered_labels]]
        weights = available.double() / taken.clamp_min(1).double()
        return pred, background, weights


class TrainingRows:
    """The training split's rows, held once for the train-mode forward pass of every episode.

    BatchNorm in train mode followed by the first linear layer is an affine map of the raw rows whose
    coefficients depend on the episode's column means μ and biased variances σ² (the inputs need no gradient,
    so μ and σ² are constants of the step):

        W·BN(x) + c = W·diag(γ/√(σ² + ε))·(x − μ) + W·β + c.

    Where the episode holds at least half the rows (m·K + B of n: at ImageNet size 20,064 of 25,000 × 768),
    μ and σ² are read off one product of the episode's row indicator with [x − s, (x − s)²] (s: the split's
    mean, so that σ² = E[(x − s)²] − (μ − s)² does not cancel), and the map is applied to every training row
    by one matrix product whose episode rows are then selected: the episode's rows are never gathered or
    normalised one by one. A smaller episode (few classes, a large split) gathers its rows and maps only
    those. γ, β, W and c get their gradients through the map; BatchNorm's running statistics move as in
    torch's train mode.
    """

    def __init__(self, features: torch.Tensor, device: torch.device):
        (n, h), dtype = features.shape, features.dtype
        self.shift = features.mean(0, dtype=torch.float64).to(dtype)
        #: [x − s, (x − s)²]; its left half is the centered rows the affine map is applied to
        self.moment_rows = torch.empty(n, 2 * h, dtype=dtype)
        torch.sub(features, self.shift, out=self.moment_rows[:, :h])
        torch.square(self.moment_rows[:, :h], out=self.moment_rows[:, h:])
        self.moment_rows, self.shift = self.moment_rows.to(device), self.shift.to(device)
        self.centered = self.moment_rows[:, :h]
        self.indicator = torch.zeros(n, dtype=dtype, device=device)

    def moments(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows' column means minus s and their biased variances (as BatchNorm's train mode)."""
        self.indicator.zero_()
        self.indicator[index] = 1.0 / index.numel()
        mean, second = (self.indicator @ self.moment_rows).split(self.centered.shape[1])
        return mean, (second - mean.square()).clamp_min(0.0)

    def project(self, module: nn.Module, index: torch.Tensor) -> torch.Tensor:
        """``module(features[index])`` in train mode, its BatchNorm's running statistics updated likewise."""
        bn, first = module.bn, module.first
        every_row = 2 * index.numel() >= self.centered.shape[0]
        rows = self.centered if every_row else self.centered[index]
        with torch.no_grad():
            mean, var = self.moments(index) if every_row else _column_moments(rows)
        scale = bn.weight / torch.sqrt(var + bn.eps)
        bias = first.weight @ (bn.bias - mean * scale)
        if first.bias is not None:
            bias = bias + first.bias
        u = torch.addmm(bias, rows, (first.weight * scale).T)
        u = u[index] if every_row else u
        with torch.no_grad():
            n, momentum = index.numel(), bn.momentum
            bn.running_mean.mul_(1.0 - momentum).add_(mean + self.shift, alpha=momentum)
            bn.running_var.mul_(1.0 - momentum).add_(var, alpha=momentum * n / (n - 1))
            bn.num_batches_tracked += 1
        return module.head(u)


def _column_moments(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Column means and biased variances, two-pass (torch's ``var`` along dim 0 is ~12 × slower here)."""
    mean = rows.mean(0)
    return mean, (rows - mean).square().mean(0)


def episode_loss(z_pred, y_pred, z_back, y_back, log_weights, d: int):
    """Mean log-loss of Eq. 6 (bandwidth 1, kernel exp(−‖Δ‖²/d)), probabilities clipped at 1e-10.

    −‖z − b‖²/d = (2·z·b − ‖b‖²)/d − ‖z‖²/d, and the last term, the same for every background point b of a
    prediction row z, cancels in Eq. 6's ratio: the log-kernels plus log-weights are one matrix product plus
    a term per background point. Each row is shifted by its largest before exponentiating, so no row's
    total underflows."""
    scores = torch.addmm(log_weights[y_back] - z_back.square().sum(1) / d, z_pred, z_back.T, alpha=2.0 / d)
    kernel = (scores - scores.amax(1, keepdim=True).detach()).exp()
    own = torch.where(y_pred[:, None] == y_back[None, :], kernel, 0.0).sum(1)
    return -(own / kernel.sum(1)).clamp_min(PROB_CLIP).log().mean()


def train_projection(train_x: np.ndarray, train_y: np.ndarray, val_loss, num_classes: int, d: int, *,
                     projection: str, m: int, batch_size: int, optimizer: str, lr: float, steps_per_epoch: int,
                     max_epochs: int, patience: int, min_lr: float, keep: str, seed: int, device: str) -> dict:
    """Train Π and return its numpy parameters and a training history.

    ``val_loss(params) -> float`` is the early-stopping criterion (the LOO log-loss of the
    calibration set for the projected points, computed by the caller in numpy).
    """
    device = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else
                          ("cpu" if device == "auto" else device))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = PROJECTIONS[projection](train_x.shape[1], d).to(device)
    generator = torch.Generator().manual_seed(seed)
    rows = TrainingRows(torch.as_tensor(train_x, dtype=torch.float32), device)
    labels = torch.as_tensor(train_y, dtype=torch.int64)
    sampler = EpisodeSampler(labels, num_classes, batch_size, m, generator)
    opt = (torch.optim.SGD(module.parameters(), lr=lr) if optimizer == "sgd"
           else torch.optim.Adam(module.parameters(), lr=lr))
    # An improvement must exceed 0.1% of the best loss (torch's default 0.01% lets slow creeping reset
    # the patience for dozens of epochs).
    schedule = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=patience,
                                                          threshold=1e-3)
    history, best = [], (np.inf, None)
    epochs = tqdm(range(max_epochs), desc="KCal projection", disable=None, leave=False)
    for epoch in epochs:
        total = 0.0
        for _ in range(steps_per_epoch):
            pred, background, weights = sampler()
            index = torch.cat([pred, background])
            z = rows.project(module, index.to(device))
            loss = episode_loss(z[: pred.numel()], labels[pred].to(device), z[pred.numel():],
                                labels[background].to(device), weights.log().float().to(device), d)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()
        params = export(module)
        validation = float(val_loss(params))
        history.append({"epoch": epoch + 1, "train_loss": total / steps_per_epoch, "val_loss": validation,
                        "lr": opt.param_groups[0]["lr"]})
        epochs.set_postfix(train=f"{total / steps_per_epoch:.4f}", val=f"{validation:.4f}")
        if validation < best[0]:
            best = (validation, copy.deepcopy(params))
        schedule.step(validation)
        if opt.param_groups[0]["lr"] < min_lr:
            break
    if opt.param_groups[0]["lr"] >= min_lr:
        warnings.warn(f"KCal projection: stopped at max_epochs={max_epochs} before its schedule's stop (learning rate "
                      f"{opt.param_groups[0]['lr']:.3g} not below min_lr={min_lr:g}; validation loss "
                      f"{history[-1]['val_loss']:.4f}); raise max_epochs", NotConvergedWarning, stacklevel=2)
    log.info("KCal projection: %d epochs, last val loss %.4f, best %.4f", len(history), history[-1]["val_loss"],
             best[0])
    return {"params": best[1] if keep == "best" else export(module), "history": history}
