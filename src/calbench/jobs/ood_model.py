"""The out-of-distribution dump of a model source (docs/shift.md): the model's outputs on images of no class of
the source, ``results/ood/{source}.h5`` (:func:`calbench.jobs.ood.write_ood`). Two kinds of set (Ovadia et al.,
NeurIPS 2019, §4.1): another dataset's images, resized to the source's images, and uniform noise images."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

import calbench
from calbench.jobs.model_dump import load_source_model, model_outputs
from calbench.jobs.model_shifts import SHIFT_CHUNK_ROWS
from calbench.jobs.model_specs import ModelDumpSpec
from calbench.jobs.ood import write_ood
from calbench.models import datasets

#: The images of the datasets that ship with a package (an OOD set takes up to all but ten of them).
BUILT_IN_ROWS = {"digits": 1797, "mnist5k": 5000}
#: Seed stream of the noise images (beside ``split_seed``), apart from the shifts' and the perturbations'.
OOD_STREAM = 2019


def as_images_like(images: torch.Tensor, channels: int, side: tuple[int, int]) -> torch.Tensor:
    """uint8 ``images`` resized (bilinear, antialiased) to ``side`` and brought to ``channels`` (grey repeated,
    colour averaged), as uint8."""
    x = images.float()
    if tuple(x.shape[-2:]) != tuple(side):
        x = F.interpolate(x, size=side, mode="bilinear", antialias=True, align_corners=False)
    if x.shape[1] != channels:
        x = x.expand(-1, channels, -1, -1) if x.shape[1] == 1 else x.mean(1, keepdim=True)
    return x.round().clamp(0, 255).to(torch.uint8)


def _ood_images(source: str, name: str, spec: dict, shape, rows: int, split_seed: int, cache_dir):
    """The uint8 images ``[rows, *shape]`` of one OOD set: ``{dataset: D}`` (``rows`` of the built-in dataset D,
    a stratified draw) or ``{noise: uniform}``."""
    rows = int(spec.get("rows", rows))
    if "noise" in spec:
        generator = np.random.default_rng([split_seed, OOD_STREAM, *name.encode()])
        return torch.from_numpy(generator.integers(0, 256, size=(rows, *shape), dtype=np.uint8))
    rows = min(rows, BUILT_IN_ROWS[spec["dataset"]] - 10)  # the other 10 rows: a stratified cal part (unused)
    other = datasets.load({"dataset": spec["dataset"], "sizes": {"train": 0, "cal": 10, "test": rows},
                           "split_seed": 0}, f"sources.{source}.ood.{name}", cache_dir)
    images = next(iter(DataLoader(other.splits["test"], batch_size=rows)))[0]
    return as_images_like(images, shape[0], shape[1:])


def dump_model_ood_job(*, spec: ModelDumpSpec, progress: bool = False) -> None:
    """The model's logits and embeddings on each OOD set of ``spec.source`` (``ood: {name: {dataset: D} | {noise:
    uniform}}``, ``rows``: default the number of held-out rows) to ``spec.output``."""
    source, entry, output, cache_dir = spec.source, spec.entry, spec.output, spec.cache_dir
    data, model, prepare, batch_size = load_source_model(spec)
    held_out = [data.splits[s] for s in (("cal", "test") if entry.get("split") else ("test",))]
    shape = tuple(held_out[0][0][0].shape)
    sets = {}
    for name, item in entry["ood"].items():
        images = _ood_images(source, name, item, shape, sum(map(len, held_out)), int(entry["split_seed"]), cache_dir)
        chunks = ((chunk, torch.zeros(len(chunk), dtype=torch.long)) for chunk in images.split(SHIFT_CHUNK_ROWS))
        outputs = model_outputs(model, prepare, chunks, batch_size, f"ood {name}", progress)
        sets[name] = {"logits": outputs["logits"], "embeddings": outputs["embeddings"]}
    write_ood(output, sets, {"source_name": source, "ood": entry["ood"], "calbench_version": calbench.__version__})
