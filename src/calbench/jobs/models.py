"""The model jobs of the workflow: train a `train` source, dump a `train` or `pretrained` source.

``train_job`` writes ``results/models/{source}/model.pt`` (weights plus the normalisation the model
was trained with) and keeps ``checkpoint.pt`` beside it while training; ``dump_model_job`` writes the
logits, labels and embeddings of the train, cal and test splits to ``results/dumps/{source}.h5``
(docs/architecture.md §3); with a ``split`` in the source, cal and test go into one held-out pool ``all``
that every seed re-splits (``calbench.data.splits``), as the KCal paper re-splits its held-out data.
Both run on the GPU when there is one (``device: auto``), else on the CPU.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from calbench.models.errors import load_tensors, require_models_extra

require_models_extra("the model rules (train/pretrained sources)")

import torch  # noqa: E402
from torch.utils.data import ConcatDataset, DataLoader  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import calbench
from calbench.atomic import atomic_path
from calbench.config import shift_sets
from calbench.corruptions import corrupt
from calbench.data import store
from calbench.models import architectures, datasets
from calbench.models.training import Recipe, resolve_device, seed_everything, train

log = logging.getLogger("calbench")


def _normalisation(entry: dict, data: datasets.ImageData, channels: int) -> tuple[list, list]:
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


def _prepare(entry: dict, mean, std, channels: int, device):
    def prepare(images, augment="none", generator=None):
        return datasets.prepare_batch(images.to(device), mean, std, channels, entry.get("image_size"), augment,
                                      generator)

    return prepare


def train_job(source: str, entry: dict, output, *, cache_dir, threads: int, progress: bool = True) -> None:
    """Train the model of `train` source ``source`` (its entry with every default filled, as
    :func:`calbench.config.load` returns it) and save its final weights to ``output``; ``cache_dir``: the
    config's ``downloads_dir``.

    ``threads`` caps torch's CPU threads (the cores Snakemake granted the job, the entry's ``threads``: more
    threads than cores makes torch's thread pool spin and slows training by orders of magnitude on a busy machine).
    """
    where = f"sources.{source}"
    torch.set_num_threads(threads)
    output = Path(output)
    recipe = Recipe(**entry["recipe"])
    device = resolve_device(entry["device"])
    data = datasets.load(entry, where, cache_dir)
    kwargs = entry["model_kwargs"]
    channels = architectures.input_channels(entry["model"], kwargs)
    mean, std = _normalisation(entry, data, channels)
    seed_everything(recipe.seed)
    model = architectures.build(entry["model"], data.num_classes, pretrained=entry["pretrained"],
                                weights=entry.get("weights"), kwargs=kwargs, where=where)
    log.info("training %s on %s (%d train images, %d classes) on %s", entry["model"], entry["dataset"],
             len(data.splits["train"]), data.num_classes, device)
    identity = {k: entry.get(k) for k in ("model", "model_kwargs", "dataset", "sizes", "split_seed", "image_size",
                                          "pretrained", "weights", "normalize")}
    train(model, data.splits["train"], _prepare(entry, mean, std, channels, device), recipe, device,
          output.with_name("checkpoint.pt"), identity, progress)
    with atomic_path(output) as tmp:
        torch.save({"model": model.cpu().state_dict(), "mean": mean, "std": std, "num_classes": data.num_classes,
                    "entry": entry}, tmp)
    output.with_name("checkpoint.pt").unlink(missing_ok=True)


def _load_model(entry: dict, data: datasets.ImageData, weights, where: str):
    kwargs = entry["model_kwargs"]
    channels = architectures.input_channels(entry["model"], kwargs)
    if weights is not None:  # a `train` source: its trained weights
        saved = load_tensors(weights, f"{where}: the trained model")
        model = architectures.build(entry["model"], saved["num_classes"], kwargs=kwargs, where=where)
        model.load_state_dict(saved["model"])
        return model, saved["mean"], saved["std"], channels
    model = architectures.build(entry["model"], None, pretrained=entry.get("weights") is None,
                                weights=entry.get("weights"), kwargs=kwargs, where=where)
    if architectures.num_outputs(model) != data.num_classes:
        raise ValueError(f"{where}: {entry['model']} outputs {architectures.num_outputs(model)} classes but "
                         f"{entry['dataset']} has {data.num_classes}; a `pretrained` source evaluates a model made "
                         "for this dataset (to fine-tune one, use `type: train` with `pretrained: true`)")
    return model, *_normalisation(entry, data, channels), channels


def _outputs(model, prepare, chunks, batch_size: int, desc: str, progress: bool) -> dict[str, np.ndarray]:
    """Embeddings, logits and labels of ``chunks`` of ``(uint8 images, labels)``, run ``batch_size`` at a time."""
    parts = {"embeddings": [], "logits": [], "labels": []}
    for images, labels in tqdm(chunks, desc=desc, disable=not progress):
        for batch in images.split(batch_size):
            emb, logits = architectures.embed(model, prepare(batch))
            parts["embeddings"].append(emb.float().cpu().numpy())
            parts["logits"].append(logits.float().cpu().numpy())
        parts["labels"].append(labels.numpy())
    out = {k: np.concatenate(v) for k, v in parts.items()}
    log.info("%s: %d rows, accuracy %.4f", desc, len(out["labels"]), np.mean(out["logits"].argmax(1) == out["labels"]))
    return out


def _loaded(source: str, entry: dict, weights, cache_dir, threads: int):
    """The source's data, its model in eval mode on the device, the batch preparation and the batch size."""
    where = f"sources.{source}"
    torch.set_num_threads(threads)
    device = resolve_device(entry["device"])
    data = datasets.load(entry, where, cache_dir)
    model, mean, std, channels = _load_model(entry, data, weights, where)
    model.to(device).eval()
    return data, model, _prepare(entry, mean, std, channels, device), int(entry["eval_batch_size"])


def dump_model_job(source: str, entry: dict, output, weights=None, *, cache_dir, threads: int,
                   progress: bool = True) -> None:
    """Dump logits, labels and embeddings of every split of ``source`` to ``output``.

    ``weights`` is the `train` job's ``model.pt``; ``None`` for a `pretrained` source, whose model
    comes from its published weights (``pretrained``) or a local file (``weights`` in the entry).
    """
    data, model, prepare, batch_size = _loaded(source, entry, weights, cache_dir, threads)
    groups = {split: _outputs(model, prepare, DataLoader(dataset, batch_size=batch_size), batch_size,
                              f"dump {split}", progress)
              for split, dataset in data.splits.items() if len(dataset)}
    if entry.get("split"):  # one held-out pool, re-split per seed
        held_out = [groups.pop(split) for split in ("cal", "test")]
        groups["all"] = {k: np.concatenate([part[k] for part in held_out]) for k in held_out[0]}
    store.write_dump(output, groups, {"source": entry, "source_name": source, "class_names": data.class_names,
                                      "calbench_version": calbench.__version__})


#: Rows corrupted together: up to 1,024 images and 2²² pixel values (the elastic deformation holds a few float64
#: copies of a chunk: ~27 ImageNet-sized images). Each chunk's random draws are seeded by (split_seed, chunk
#: number), so a shifted set depends on the image size but not on ``eval_batch_size``.
SHIFT_CHUNK_ROWS, SHIFT_CHUNK_VALUES = 1024, 2**22


def dump_model_shifts_job(source: str, entry: dict, output, weights=None, *, cache_dir, threads: int,
                          progress: bool = True) -> None:
    """Dump the model's outputs on each shifted test set of ``source`` (docs/shift.md) to ``output``.

    Group ``shift/{family}/{severity}`` holds the corrupted copies of the held-out rows of the dump: the pool
    (cal then test, as the dump's ``all``) of a pooled source, whose evaluation takes each seed's test rows, else
    the test split (root attribute ``rows_of``: ``all`` or ``test``).
    """
    data, model, prepare, batch_size = _loaded(source, entry, weights, cache_dir, threads)
    rows_of = "all" if entry.get("split") else "test"
    held_out = ConcatDataset([data.splits[s] for s in (("cal", "test") if rows_of == "all" else ("test",))])
    seed = int(entry["split_seed"])
    chunk = max(1, min(SHIFT_CHUNK_ROWS, SHIFT_CHUNK_VALUES // int(np.prod(held_out[0][0].shape))))
    groups = {}
    for name in shift_sets(entry):
        family, severity = name.split("/")
        chunks = ((torch.from_numpy(corrupt(images.numpy(), family, int(severity), seed=[seed, k])), labels)
                  for k, (images, labels) in enumerate(DataLoader(held_out, batch_size=chunk)))
        groups[f"shift/{name}"] = _outputs(model, prepare, chunks, batch_size, f"shift {name}", progress)
    store.write_dump(output, groups, {"source": entry, "source_name": source, "rows_of": rows_of,
                                      "calbench_version": calbench.__version__})
