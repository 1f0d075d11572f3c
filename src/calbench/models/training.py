"""Train a classifier with a per-epoch checkpoint, so that a killed training resumes where it stopped.

Determinism: the model is initialised after ``torch.manual_seed(seed)``; each epoch reseeds torch
with ``seed + epoch`` and shuffles with its own generator, so a resumed run draws exactly the batches,
augmentations and dropout masks of an uninterrupted one. The checkpoint holds the model, optimiser,
schedule and epoch, and a fingerprint of the recipe: a checkpoint of another recipe is not resumed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from calbench.atomic import atomic_path
from calbench.models.errors import load_tensors

log = logging.getLogger("calbench")


@dataclass(frozen=True)
class Recipe:
    """A training recipe: the `recipe` key of a `train` source as :func:`calbench.config.load` returns it, every
    key filled and checked by the schema (its defaults and allowed values: config/README.md)."""

    epochs: int
    batch_size: int
    optimizer: str  # adamw | sgd
    lr: float
    momentum: float  # sgd only (Nesterov)
    weight_decay: float
    schedule: str  # cosine | constant
    warmup_epochs: int
    label_smoothing: float
    augment: str  # none | crop | crop_flip
    seed: int


def resolve_device(device: str = "auto") -> torch.device:
    """``auto``: CUDA when present, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def _optimizer(model: nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    """The recipe's optimiser, with torch's multi-tensor (``foreach``) update, which torch uses by default on CUDA
    only: on the CPU it gives the per-tensor loop's weights to the bit (checked on both default-run models) and
    takes an eighth of the small ViT's training time off."""
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]  # biases and norms: no weight decay
    groups = [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=recipe.lr, momentum=recipe.momentum, nesterov=recipe.momentum > 0,
                               foreach=True)
    return torch.optim.AdamW(groups, lr=recipe.lr, foreach=True)


def _lr_factor(recipe: Recipe, steps_per_epoch: int):
    total, warmup = recipe.epochs * steps_per_epoch, recipe.warmup_epochs * steps_per_epoch

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if recipe.schedule == "constant":
            return 1.0
        return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

    return factor


def fingerprint(recipe: Recipe, identity: dict) -> str:
    """Hash of what a checkpoint must agree on to be resumed (recipe, model, data)."""
    text = json.dumps({"recipe": asdict(recipe), **identity}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_checkpoint(path: Path, state: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def _load_checkpoint(path: Path, print_: str) -> dict | None:
    if not path.exists():
        return None
    state = load_tensors(path, "training checkpoint")
    if state.get("fingerprint") != print_:
        log.warning("checkpoint %s belongs to another recipe/model/data; training from scratch", path)
        return None
    return state


def train(model: nn.Module, dataset, prepare, recipe: Recipe, device: torch.device, checkpoint: Path,
          identity: dict, progress: bool = True) -> nn.Module:
    """Train ``model`` on ``dataset`` of ``(uint8 images, labels)``; resume from ``checkpoint`` if it matches.

    ``prepare(images, augment, generator)`` turns a uint8 batch into model input on ``device``. With ``progress``,
    progress bars go to stderr when it is a terminal (tqdm's ``disable=None``), never into a log or a pipe.
    """
    checkpoint = Path(checkpoint)
    model.to(device)
    loader_size = math.ceil(len(dataset) / recipe.batch_size)
    optimizer = _optimizer(model, recipe)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_factor(recipe, loader_size))
    print_ = fingerprint(recipe, identity)
    start = 0
    state = _load_checkpoint(checkpoint, print_)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        start = state["epoch"]
        log.info("resuming from %s after epoch %d of %d", checkpoint, start, recipe.epochs)
    epochs = tqdm(range(start, recipe.epochs), desc="epochs", disable=None if progress else True, initial=start,
                  total=recipe.epochs)
    for epoch in epochs:
        torch.manual_seed(recipe.seed + epoch)  # dropout and augmentation of this epoch
        generator = torch.Generator().manual_seed(recipe.seed * 100_003 + epoch)
        loader = DataLoader(dataset, batch_size=recipe.batch_size, shuffle=True, generator=generator)
        model.train()
        total, count = 0.0, 0
        for images, labels in tqdm(loader, desc=f"epoch {epoch + 1}", leave=False, disable=None if progress else True):
            x = prepare(images.to(device), recipe.augment, generator)
            labels = labels.to(device)
            loss = F.cross_entropy(model(x), labels, label_smoothing=recipe.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            total, count = total + loss.item() * labels.numel(), count + labels.numel()
        log.info("epoch %d/%d: training loss %.4f, lr %.2e", epoch + 1, recipe.epochs, total / count,
                 optimizer.param_groups[0]["lr"])
        epochs.set_postfix(loss=f"{total / count:.4f}")
        save_checkpoint(checkpoint, {"fingerprint": print_, "epoch": epoch + 1, "model": model.state_dict(),
                                     "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict()})
    return model
