"""The specs of the model jobs (train, dump, shifted and out-of-distribution dumps, the perturbed calibration set),
apart from the jobs themselves, which import torch: the workflow builds these specs for every job of its DAG, and
the command line for its checks, without torch."""

from __future__ import annotations

from dataclasses import dataclass

from calbench.data.entry import Source
from calbench.jobs import paths
from calbench.jobs.spec import JobSpec, as_params, dump_entry, infile, outfile, param, source_data, split_file


@dataclass(frozen=True, kw_only=True)
class TrainSpec(JobSpec):
    """The training of a ``train`` source's model (rule train_model)."""

    source: str
    entry: dict = param()
    cache_dir: str
    threads: int
    data: list = infile()
    model: str = outfile()


def train_spec(config: dict, *, source: str) -> TrainSpec:
    entry = Source.of(config, source)
    return TrainSpec(source=source, entry=dump_entry(entry), cache_dir=config["downloads_dir"],
                     threads=entry.entry["threads"], data=source_data(entry), model=paths.MODEL.format(source=source))


@dataclass(frozen=True, kw_only=True)
class ModelDumpSpec(JobSpec):
    """A model's outputs on a source's images (rules dump_model, dump_shifts_model, dump_ood_model): ``entry`` is
    the part of the source's entry the dump reads; ``weights`` the train job's model (``None`` for ``pretrained``)."""

    source: str
    entry: dict = param()
    cache_dir: str
    threads: int
    weights: str | None = infile()
    data: list = infile()
    output: str = outfile()


def _model_dump(config: dict, source: str, entry: dict, output: str) -> ModelDumpSpec:
    found = Source.of(config, source)
    return ModelDumpSpec(source=source, entry=as_params(entry), cache_dir=config["downloads_dir"],
                         threads=found.entry["threads"], weights=model_weights(found), data=source_data(found),
                         output=output)


def model_weights(source: Source) -> str | None:
    """The trained weights a model dump reads: the train job's output for ``train``, none for ``pretrained``."""
    return paths.MODEL.format(source=source.name) if source.type == "train" else None


def dump_spec(config: dict, *, source: str) -> ModelDumpSpec:
    """The dump of a model source's train, calibration and test outputs (its entry but the keys of later stages)."""
    return _model_dump(config, source, dump_entry(Source.of(config, source)), paths.DUMP.format(source=source))


def shifts_spec(config: dict, *, source: str) -> ModelDumpSpec:
    """The model's outputs on corrupted copies of its held-out images (docs/shift.md)."""
    entry = Source.of(config, source).without("ood", "label_shift")
    return _model_dump(config, source, entry, paths.SHIFTS.format(source=source))


def ood_spec(config: dict, *, source: str) -> ModelDumpSpec:
    """The model's outputs on the source's out-of-distribution sets (docs/shift.md)."""
    entry = Source.of(config, source).without("shifts", "label_shift")
    return _model_dump(config, source, entry, paths.OOD.format(source=source))


@dataclass(frozen=True, kw_only=True)
class PerturbedCalSpec(JobSpec):
    """The model's outputs on one seed's calibration images perturbed at increasing strengths (rule
    dump_perturbed_cal; Tomani et al. 2021)."""

    source: str
    seed: int
    entry: dict = param()
    perturb: dict = param()
    cache_dir: str
    threads: int
    weights: str | None = infile()
    test_rows: str | None = infile()
    data: list = infile()
    output: str = outfile()


def perturbed_cal_spec(config: dict, *, source: str, seed) -> PerturbedCalSpec:
    entry, seed = Source.of(config, source), int(seed)
    return PerturbedCalSpec(source=source, seed=seed, entry=dump_entry(entry),
                            perturb=as_params(config["perturbed_cal"]), cache_dir=config["downloads_dir"],
                            threads=entry.entry["threads"], weights=model_weights(entry),
                            test_rows=split_file(entry, seed), data=source_data(entry),
                            output=paths.PERTURBED_CAL.format(source=source, seed=seed))
