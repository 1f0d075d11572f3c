"""The train job of a `train` source: ``train_job`` writes ``results/models/{source}/model.pt`` (weights plus
the normalisation the model was trained with) and keeps ``checkpoint.pt`` beside it while training. The dump jobs
that read the weights are :mod:`calbench.jobs.model_dump` and :mod:`calbench.jobs.model_shifts`: modules of
their own, so that editing a dump (or the corruptions) retrains nothing (the rules' code inputs are these
modules' import closures, :mod:`calbench.imports`). Runs on the GPU when there is one (``device: auto``), else on
the CPU.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from calbench.models.errors import require_models_extra

require_models_extra("the model rules (train/pretrained sources)")

import torch  # noqa: E402

from calbench.atomic import atomic_path  # noqa: E402
from calbench.caught import Recorder  # noqa: E402
from calbench.data.store import WARNINGS_KEY  # noqa: E402
from calbench.jobs.model_specs import TrainSpec  # noqa: E402
from calbench.models import architectures, datasets  # noqa: E402
from calbench.models.training import Recipe, resolve_device, seed_everything, train  # noqa: E402

log = logging.getLogger("calbench")


def input_normalisation(entry: dict, data: datasets.ImageData, channels: int) -> tuple[list, list]:
    """Mean/std of the model input: `normalize` (dataset | imagenet | {mean, std}; its default depends on the
    entry, :func:`calbench.config.load` fills it)."""
    how = entry["normalize"]
    if isinstance(how, dict):
        return list(how["mean"]), list(how["std"])
    if how == "imagenet":
        mean, std = list(datasets.IMAGENET_MEAN), list(datasets.IMAGENET_STD)
        return (mean, std) if channels == 3 else ([float(np.mean(mean))] * channels, [float(np.mean(std))] * channels)
    mean, std = datasets.channel_stats(data.splits["train"], data.channels)
    if channels != data.channels:  # grey images repeated to 3 channels (or colour averaged to 1)
        mean, std = [float(np.mean(mean))] * channels, [float(np.mean(std))] * channels
    return mean, std


def batch_preparation(entry: dict, mean, std, channels: int, device):
    """The function that turns a batch of uint8 images into the model's input on ``device``: normalised by
    ``mean``/``std``, ``channels`` channels, resized to the entry's ``image_size`` and, in training, augmented
    (:func:`calbench.models.datasets.prepare_batch`)."""

    def prepare(images, augment="none", generator=None):
        return datasets.prepare_batch(images.to(device), mean, std, channels, entry.get("image_size"), augment,
                                      generator)

    return prepare


def train_job(*, spec: TrainSpec, progress: bool = True) -> None:
    """Train the model of `train` source ``spec.source`` (its entry with every default filled, as
    :func:`calbench.config.load` returns it) and save its final weights to ``spec.model``; ``cache_dir``: the
    config's ``downloads_dir``.

    ``threads`` caps torch's CPU threads (the cores Snakemake granted the job, the entry's ``threads``: more
    threads than cores makes torch's thread pool spin and slows training by orders of magnitude on a busy machine).
    """
    source, entry, cache_dir, threads, output = spec.source, spec.entry, spec.cache_dir, spec.threads, Path(spec.model)
    where = f"sources.{source}"
    torch.set_num_threads(threads)
    recipe = Recipe(**entry["recipe"])
    device = resolve_device(entry["device"])
    data = datasets.load(entry, where, cache_dir)
    kwargs = entry["model_kwargs"]
    channels = architectures.input_channels(entry["model"], kwargs)
    mean, std = input_normalisation(entry, data, channels)
    seed_everything(recipe.seed)
    with Recorder("train") as caught:  # kept in the weights file; the dump job passes them on to the tables
        model = architectures.build(entry["model"], data.num_classes, pretrained=entry["pretrained"],
                                    weights=entry.get("weights"), kwargs=kwargs, where=where)
        log.info("training %s on %s (%d train images, %d classes) on %s", entry["model"], entry["dataset"],
                 len(data.splits["train"]), data.num_classes, device)
        identity = {k: entry.get(k) for k in ("model", "model_kwargs", "dataset", "sizes", "split_seed",
                                              "image_size", "pretrained", "weights", "normalize")}
        train(model, data.splits["train"], batch_preparation(entry, mean, std, channels, device), recipe, device,
              output.with_name("checkpoint.pt"), identity, progress)
    with atomic_path(output) as tmp:
        torch.save({"model": model.cpu().state_dict(), "mean": mean, "std": std, "num_classes": data.num_classes,
                    "entry": entry, WARNINGS_KEY: caught.records()}, tmp)
    output.with_name("checkpoint.pt").unlink(missing_ok=True)
