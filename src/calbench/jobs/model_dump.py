"""The dump job of a model source: ``dump_model_job`` writes the logits, labels and embeddings of the train, cal
and test splits to ``results/dumps/{source}.h5`` (docs/architecture.md §3); with a ``split`` in the source, cal and
test go into one held-out pool ``all`` that every seed re-splits (``calbench.data.splits``), as the KCal paper
re-splits its held-out data. The model is a `train` source's trained weights (:mod:`calbench.jobs.models`) or a
`pretrained` source's published or local ones. The warnings of the train job (kept in the weights file) and of the
dump job go into the dump's attributes, from where every later job carries them to the tables
(:mod:`calbench.report.warnings`).
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

import calbench
from calbench.caught import Recorder
from calbench.data import copies, store
from calbench.jobs.model_specs import ModelDumpSpec
from calbench.jobs.models import batch_preparation, input_normalisation
from calbench.models import architectures, datasets
from calbench.models.errors import load_tensors
from calbench.models.training import resolve_device

log = logging.getLogger("calbench")


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
    return model, *input_normalisation(entry, data, channels), channels


def model_outputs(model, prepare, chunks, batch_size: int, desc: str, progress: bool) -> dict[str, np.ndarray]:
    """Embeddings, logits and labels of ``chunks`` of ``(uint8 images, labels)``, run ``batch_size`` at a time."""
    parts = {"embeddings": [], "logits": [], "labels": []}
    for images, labels in tqdm(chunks, desc=desc, disable=None if progress else True):
        for batch in images.split(batch_size):
            emb, logits = architectures.embed(model, prepare(batch))
            parts["embeddings"].append(emb.float().cpu().numpy())
            parts["logits"].append(logits.float().cpu().numpy())
        parts["labels"].append(labels.numpy())
    out = {k: np.concatenate(v) for k, v in parts.items()}
    log.info("%s: %d rows, accuracy %.4f", desc, len(out["labels"]), np.mean(out["logits"].argmax(1) == out["labels"]))
    return out


def load_source_model(spec):
    """The data of the source of the model job ``spec`` (:mod:`calbench.jobs.model_specs`), its model in eval mode
    on the device, the batch preparation and the batch size."""
    entry, weights, cache_dir = spec.entry, spec.weights, spec.cache_dir
    where = f"sources.{spec.source}"
    torch.set_num_threads(spec.threads)
    device = resolve_device(entry["device"])
    data = datasets.load(entry, where, cache_dir)
    model, mean, std, channels = _load_model(entry, data, weights, where)
    model.to(device).eval()
    return data, model, batch_preparation(entry, mean, std, channels, device), int(entry["eval_batch_size"])


def dump_model_job(*, spec: ModelDumpSpec, progress: bool = True) -> None:
    """Dump logits, labels and embeddings of every split of ``spec.source`` to ``spec.output``.

    ``spec.weights`` is the `train` job's ``model.pt``; ``None`` for a `pretrained` source, whose model
    comes from its published weights (``pretrained``) or a local file (``weights`` in the entry).
    """
    source, entry, output = spec.source, spec.entry, spec.output
    with Recorder("dump") as caught:  # in the dump's attributes, as an import source's: the tables list them
        data, model, prepare, batch_size = load_source_model(spec)
        groups = {split: model_outputs(model, prepare, DataLoader(dataset, batch_size=batch_size), batch_size,
                                  f"dump {split}", progress)
                  for split, dataset in data.splits.items() if len(dataset)}
        if entry.get("split"):  # one held-out pool, re-split per seed
            held_out = [groups.pop(split) for split in ("cal", "test")]
            groups["all"] = {k: np.concatenate([part[k] for part in held_out]) for k in held_out[0]}
            copies.warn_of_copies(f"sources.{source}", groups["all"])
    store.write_dump(output, groups, {"source": entry, "source_name": source, "class_names": data.class_names,
                                      "calbench_version": calbench.__version__,
                                      store.WARNINGS_KEY: trained_warnings(spec.weights) + caught.records()})


def trained_warnings(weights) -> list[dict]:
    """The warnings the train job recorded in ``weights`` (:func:`calbench.jobs.models.train_job`; none for a
    `pretrained` source or weights of earlier versions), read without loading the tensors (memory-mapped)."""
    if weights is None:
        return []
    saved = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
    return list(saved.get(store.WARNINGS_KEY, []))
