"""The shifted test sets of a model source (docs/shift.md): ``dump_model_shifts_job`` writes the model's outputs
on corrupted copies of the held-out images (:mod:`calbench.corruptions`) to ``results/shifts/{source}.h5``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import ConcatDataset, DataLoader

import calbench
from calbench.corruptions import corrupt
from calbench.data import store
from calbench.data.shifts import shift_sets
from calbench.jobs.model_dump import load_source_model, model_outputs
from calbench.jobs.model_specs import ModelDumpSpec

#: Rows corrupted together: up to 1,024 images and 2²² pixel values (the elastic deformation holds a few float64
#: copies of a chunk: ~27 ImageNet-sized images). Each chunk's random draws are seeded by (split_seed, chunk
#: number), so a shifted set depends on the image size but not on ``eval_batch_size``.
SHIFT_CHUNK_ROWS, SHIFT_CHUNK_VALUES = 1024, 2**22


def dump_model_shifts_job(*, spec: ModelDumpSpec, progress: bool = True) -> None:
    """Dump the model's outputs on each shifted test set of ``spec.source`` (docs/shift.md) to ``spec.output``.

    Group ``shift/{family}/{severity}`` holds the corrupted copies of the held-out rows of the dump: the pool
    (cal then test, as the dump's ``all``) of a pooled source, whose evaluation takes each seed's test rows, else
    the test split (root attribute ``rows_of``: ``all`` or ``test``); ``image_shape``: the corrupted images'
    [C, H, W], whose side sets the constants (:func:`calbench.corruptions.severity_constant`).
    """
    source, entry, output = spec.source, spec.entry, spec.output
    data, model, prepare, batch_size = load_source_model(spec)
    rows_of = "all" if entry.get("split") else "test"
    held_out = ConcatDataset([data.splits[s] for s in (("cal", "test") if rows_of == "all" else ("test",))])
    seed = int(entry["split_seed"])
    chunk = max(1, min(SHIFT_CHUNK_ROWS, SHIFT_CHUNK_VALUES // int(np.prod(held_out[0][0].shape))))
    groups = {}
    for name in shift_sets(entry):
        family, severity = name.split("/")
        chunks = ((torch.from_numpy(corrupt(images.numpy(), family, int(severity), seed=[seed, k])), labels)
                  for k, (images, labels) in enumerate(DataLoader(held_out, batch_size=chunk)))
        groups[f"shift/{name}"] = model_outputs(model, prepare, chunks, batch_size, f"shift {name}", progress)
    store.write_dump(output, groups, {"source": entry, "source_name": source, "rows_of": rows_of,
                                      "image_shape": list(held_out[0][0].shape),
                                      "calbench_version": calbench.__version__})
