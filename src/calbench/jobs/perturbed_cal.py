"""The perturbed-calibration job (docs/shift.md): the model's outputs on the calibration images perturbed by
Gaussian noise at increasing strengths, on whose union a chain starting with ``perturb`` is fitted (Tomani et
al., CVPR 2021, "Post-hoc uncertainty calibration for domain drift scenarios"). The levels, their target accuracies and
tolerances are those of the authors' code (github.com/tochris/calibration-domain-drift,
``source/postevaluation/data_refiner.py``: ``estimate_epsilons``), docs/shift.md. A module of its own, so that
editing it reruns no training or dump."""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch.utils.data import ConcatDataset, DataLoader, Subset

import calbench
from calbench.corruptions import gaussian_perturbation
from calbench.data import store
from calbench.jobs.model_dump import load_source_model, model_outputs
from calbench.jobs.model_shifts import SHIFT_CHUNK_ROWS, SHIFT_CHUNK_VALUES
from calbench.jobs.model_specs import PerturbedCalSpec

log = logging.getLogger("calbench")


#: Seed stream of the calibration perturbations (beside a chunk's ``[split_seed, chunk]``), apart from the shifts'.
PERTURB_STREAM = 2021
#: Largest noise standard deviation tried (intensities in [0, 1]: the images are noise long before it).
PERTURB_MAX_EPSILON = 16.0
PERTURB_MAX_STEPS = 30


def _accuracy(outputs: dict) -> float:
    return float(np.mean(outputs["logits"].argmax(1) == outputs["labels"]))


def perturbation_targets(clean_accuracy: float, num_classes: int, levels: int) -> np.ndarray:
    """Target accuracy of each perturbation level (Tomani et al. 2021, the authors' ``estimate_epsilons``):
    from the clean accuracy (level 0, ε = 0) down to chance, 1/K, in equal steps."""
    return clean_accuracy - (clean_accuracy - 1.0 / num_classes) * np.arange(levels) / (levels - 1)


def tune_epsilons(run, targets: np.ndarray, tolerance: np.ndarray, start: float = 0.1) -> tuple[list, list]:
    """The noise strengths ε_1 < ε_2 < ... whose perturbed sets reach ``targets[1:]`` within ``tolerance``
    (ε_0 = 0), and the outputs at each. ``run(ε)`` gives the model's outputs on the images perturbed by ε
    (the same standard-normal draws at every ε). Each ε is bracketed by doubling from the previous one and
    then bisected: accuracy falls with ε, and a 1-D bracket needs no simplex (the authors' code uses
    Nelder-Mead for the same equation)."""
    epsilons, outputs = [0.0], [run(0.0)]
    for target, tol in zip(targets[1:], tolerance[1:]):
        lo = epsilons[-1]
        hi = max(2.0 * lo, start)
        out = run(hi)
        while _accuracy(out) > target + tol and hi < PERTURB_MAX_EPSILON:
            lo, hi = hi, min(2.0 * hi, PERTURB_MAX_EPSILON)
            out = run(hi)
        epsilon = hi
        for _ in range(PERTURB_MAX_STEPS):
            if abs(_accuracy(out) - target) <= tol or epsilon >= PERTURB_MAX_EPSILON:
                break
            lo, hi = (epsilon, hi) if _accuracy(out) > target else (lo, epsilon)
            epsilon = 0.5 * (lo + hi)
            out = run(epsilon)
        if abs(_accuracy(out) - target) > tol:
            log.warning("perturbation level %d: accuracy %.4f at epsilon %.4g, target %.4f", len(epsilons),
                        _accuracy(out), epsilon, target)
        epsilons.append(epsilon)
        outputs.append(out)
    return epsilons, outputs


def dump_perturbed_cal_job(*, spec: PerturbedCalSpec, progress: bool = False) -> None:
    """Dump the model's outputs on seed ``seed``'s calibration images of ``source`` perturbed at ``levels``
    strengths (Tomani et al., CVPR 2021; docs/shift.md) to ``output``, groups ``level/{i}``, i = 0 … levels-1.

    Level i adds Gaussian noise (unclipped as the authors' CIFAR branch; ``clip``: clipped to [0, 1] as their
    ImageNet branch) whose ε is tuned so that the model's accuracy on the perturbed rows is the clean accuracy
    minus i/(levels-1) of the way down to chance (1/K), within 3 % of the clean accuracy (5 % for the last
    level), the authors' tolerances; ε_0 = 0 is the clean set. The rows are the seed's calibration rows only, so
    no test row takes part in tuning ε: a pooled source's pool less ``test_rows`` (the seed's drawn test rows,
    rule draw_split), else the calibration split.
    """
    source, entry, output, seed, test_rows = spec.source, spec.entry, spec.output, spec.seed, spec.test_rows
    levels, clip = int(spec.perturb["levels"]), bool(spec.perturb["clip"])
    data, model, prepare, batch_size = load_source_model(spec)
    if entry.get("split"):
        pool = ConcatDataset([data.splits["cal"], data.splits["test"]])
        rows = Subset(pool, np.setdiff1d(np.arange(len(pool)), np.load(test_rows)).tolist())
    else:
        rows = data.splits["cal"]
    split_seed = int(entry["split_seed"])
    chunk = max(1, min(SHIFT_CHUNK_ROWS, SHIFT_CHUNK_VALUES // int(np.prod(rows[0][0].shape))))

    def run(epsilon: float) -> dict:
        chunks = ((torch.from_numpy(gaussian_perturbation(images.numpy(), epsilon, clip=clip,
                                                          seed=[split_seed, seed, k, PERTURB_STREAM])), labels)
                  for k, (images, labels) in enumerate(DataLoader(rows, batch_size=chunk)))
        return model_outputs(model, prepare, chunks, batch_size, f"perturbed cal, epsilon {epsilon:.4g}", progress)

    clean = run(0.0)
    clean_accuracy = _accuracy(clean)
    targets = perturbation_targets(clean_accuracy, data.num_classes, levels)
    tolerance = np.full(levels, 0.03 * clean_accuracy)
    tolerance[-1] = 0.05 * clean_accuracy
    epsilons, outputs = tune_epsilons(lambda e: clean if e == 0.0 else run(e), targets, tolerance)
    accuracies = [_accuracy(out) for out in outputs]
    log.info("perturbation epsilons %s, accuracies %s (targets %s)", np.round(epsilons, 4).tolist(),
             np.round(accuracies, 4).tolist(), np.round(targets, 4).tolist())
    store.write_dump(output, {f"level/{i}": out for i, out in enumerate(outputs)},
                     {"source": entry, "source_name": source, "seed": seed, "clip": clip, "epsilons": epsilons,
                      "target_accuracies": targets.tolist(), "accuracies": accuracies,
                      "calbench_version": calbench.__version__})
