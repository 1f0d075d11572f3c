"""Each workflow job's full arguments, built from the resolved config (:func:`calbench.config.load`) and the job's
wildcards: the Snakemake scripts (workflow/scripts/) and ``python -m calbench dump|calibrate|evaluate`` both call
these builders, so that a job runs with the same arguments either way. The file arguments are the templates of
:mod:`calbench.jobs.paths` (relative to the working directory, as the rules' inputs and outputs)."""

from __future__ import annotations

from calbench.config import chain_settings, method_needs, perturbation_settings
from calbench.jobs import paths


def dump_source_arguments(config: dict, source: str) -> dict:
    """:func:`calbench.jobs.sources.dump_source_job` of a data source (rule dump_source)."""
    entry = config["sources"][source]
    return {"source": source, "entry": entry, "seeds": list(entry["seeds"]), "output": paths.DUMP.format(source=source),
            "cache_dir": config["downloads_dir"]}


def draw_split_arguments(config: dict, source: str, seed: int) -> dict:
    """:func:`calbench.data.splits.write_test_index` of a pooled source (rule draw_split)."""
    return {"dump_path": paths.DUMP.format(source=source), "seed": seed, "split": config["sources"][source]["split"],
            "output": paths.SPLIT.format(source=source, seed=seed)}


def perturbed_cal_arguments(config: dict, source: str, seed: int) -> dict:
    """:func:`calbench.jobs.perturbed_cal.dump_perturbed_cal_job` of a model source (rule dump_perturbed_cal), but
    ``weights`` (the trained model's file or none, :func:`calbench.data.inputs`) and ``threads``, which the rule
    grants."""
    entry = config["sources"][source]
    settings = perturbation_settings(config)
    return {"source": source, "entry": entry, "output": paths.PERTURBED_CAL.format(source=source, seed=seed),
            "levels": settings["levels"], "clip": settings["clip"], "seed": seed,
            "test_rows": _split_file(entry, source, seed), "cache_dir": config["downloads_dir"]}


def calibrate_arguments(config: dict, source: str, method: str, seed: int) -> dict:
    """:func:`calbench.jobs.calibrate.calibrate_job` (rule calibrate)."""
    entry = config["sources"][source]
    where = {"source": source, "method": method, "seed": seed}
    perturbed = (paths.PERTURBED_CAL.format(source=source, seed=seed)
                 if "perturbed_cal" in method_needs(method) else None)
    return {"dump": paths.DUMP.format(source=source), "output": paths.CALIBRATED.format(**where), "method": method,
            "settings": chain_settings(config, method), "seed": seed, "split": entry.get("split"),
            "input_kind": entry["scores"], "calibrator_output": paths.CALIBRATOR.format(**where),
            "test_rows": _split_file(entry, source, seed), "perturbed_cal": perturbed}


def evaluate_arguments(config: dict, source: str, method: str, seed: int) -> dict:
    """:func:`calbench.jobs.evaluate.evaluate_job` (rule evaluate): the saved calibrator where the source has
    shifted or label-shifted test sets (docs/shift.md, docs/label_shift.md)."""
    entry = config["sources"][source]
    where = {"source": source, "method": method, "seed": seed}
    shifted = bool(entry.get("shifts")) or bool(entry.get("label_shift"))
    return {"calibrated": paths.CALIBRATED.format(**where), "dump": paths.DUMP.format(source=source),
            "output": paths.METRICS.format(**where), "metrics": list(config["metrics"]), "source": source,
            "method": method, "seed": seed, "split": entry.get("split"), "bootstrap": config["bootstrap"],
            "shifts": paths.SHIFTS.format(source=source) if entry.get("shifts") else None,
            "calibrator": paths.CALIBRATOR.format(**where) if shifted else None,
            "label_shift": entry.get("label_shift")}


def _split_file(entry: dict, source: str, seed: int) -> str | None:
    """A pooled source's drawn test rows for ``seed`` (rule draw_split); none for sources with fixed parts."""
    return paths.SPLIT.format(source=source, seed=seed) if entry.get("split") else None
