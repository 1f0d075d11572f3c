"""The calibrate job: fit one method on a seed's calibration split, predict cal and test."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from calbench.caught import Recorder
from calbench.data import splits, store
from calbench.data.entry import Source
from calbench.data.store import PEAK_KEY
from calbench.jobs import paths
from calbench.jobs.logs import peak_rss_mb
from calbench.jobs.spec import JobSpec, as_params, infile, outfile, param, split_file
from calbench.methods.registry import build_method, chain_needs, chain_settings
from calbench.persist import save
from calbench.scores import Scores
from calbench.version import __version__

log = logging.getLogger("calbench")


def _scores(part: dict) -> Scores:
    """The part's scores; its float32 logits and embeddings leave ``part`` (Scores holds float64 logits)."""
    return Scores(part.pop("logits"), part.pop("embeddings", None))


@dataclass(frozen=True, kw_only=True)
class CalibrateSpec(JobSpec):
    """One calibrate job: ``method`` fitted on the calibration split of a source's dump for ``seed`` (rule calibrate,
    ``calbench job calibrate``)."""

    source: str
    method: str
    seed: int
    method_settings: dict = param()
    split: dict | None = param()
    input_kind: str = param()
    dump: str = infile()
    test_rows: str | None = infile()
    perturbed_cal: str | None = infile()
    calibrated: str = outfile()
    calibrator: str | None = outfile()
    keep_cal_outputs: bool = False


def spec(config: dict, *, source: str, method: str, seed) -> CalibrateSpec:
    """The calibrate job of the resolved config's ``source``, ``method`` and ``seed``: the perturbed calibration set
    of the source and seed for a method that needs it (rule dump_perturbed_cal)."""
    entry, seed = Source.of(config, source), int(seed)
    where = {"source": source, "method": method, "seed": seed}
    perturbed = paths.PERTURBED_CAL.format(source=source, seed=seed) if "perturbed_cal" in chain_needs(method) else None
    return CalibrateSpec(source=source, method=method, seed=seed,
                         method_settings=as_params(chain_settings(method, config["method_settings"])),
                         split=as_params(entry.split), input_kind=entry.scores, dump=paths.DUMP.format(source=source),
                         test_rows=split_file(entry, seed), perturbed_cal=perturbed,
                         calibrated=paths.CALIBRATED.format(**where), calibrator=paths.CALIBRATOR.format(**where))


def calibrate_job(*, spec: CalibrateSpec) -> None:
    """Fit ``method`` on the calibration split of ``dump`` for ``seed``; predict the test split.

    ``calibrator``: where to save the fitted calibrator (:func:`calbench.persist.save`), marked as taking ``input_kind``
    (the source's declared ``scores``: logits or probs). ``keep_cal_outputs``: also predict and store the
    calibration split (in-sample) outputs, which no calbench stage reads (77 MB per job at 1,000 classes × 25,000
    rows). ``test_rows``: the file of a pooled source's test rows for ``seed`` as drawn by
    :func:`calbench.data.splits.write_test_index` (rule draw_split; ``None``: drawn here). ``perturbed_cal``: the
    model's outputs on the perturbed calibration images (:func:`calbench.jobs.perturbed_cal.dump_perturbed_cal_job`),
    on whose union over the levels a chain starting with ``perturb`` is fitted (Tomani et al. 2021; docs/shift.md).
    """
    dump, output, method, settings, seed = spec.dump, spec.calibrated, spec.method, spec.method_settings, spec.seed
    split, test_rows, perturbed_cal, calibrator_output = spec.split, spec.test_rows, spec.perturbed_cal, spec.calibrator
    estimator = build_method(method, settings, seed)
    fields = ["logits", "labels"] + (["embeddings"] if "embeddings" in estimator.needs else [])  # no true_probs
    test_index = np.load(test_rows) if test_rows is not None else None
    data = splits.load_split(dump, seed, split, test_index=test_index, fields=fields, train="train" in estimator.needs)
    if "perturbed_cal" in estimator.needs:
        data["cal"] = _perturbed_cal(perturbed_cal, data["cal"]["labels"], fields, method)
    cal, test = _scores(data["cal"]), _scores(data["test"])
    log.info("fitting %s on %d x %d (seed %d)", method, cal.n, cal.num_classes, seed)
    start = time.perf_counter()
    train = (_scores(data["train"]), data["train"]["labels"]) if "train" in data else None
    with Recorder("calibrate") as caught:  # recorded in the file's attributes (the tables list them)
        try:
            estimator.fit(cal, data["cal"]["labels"], train=train)
        except ValueError as err:
            raise ValueError(f"{dump} (seed {seed}), fitting {method}: {err}") from err
        fit_seconds = time.perf_counter() - start
        start = time.perf_counter()
        test_probs = estimator.predict_proba(test)
        predict_seconds = time.perf_counter() - start
        cal_probs = estimator.predict_proba(cal) if spec.keep_cal_outputs else None
    log.info("fit %.3fs, predict %.3fs for %d test rows", fit_seconds, predict_seconds, test.n)
    if calibrator_output is not None:
        save(estimator, calibrator_output, input_kind=spec.input_kind)
    store.write_calibrated(output, cal_probs, test_probs, data["cal_index"], data["test_index"],
                           data["test"]["labels"],
                           {"method": method, "seed": seed, "settings": settings, "fit_seconds": fit_seconds,
                            "predict_seconds": predict_seconds, "fitted": estimator.fitted_summary(),
                            "calbench_version": __version__, store.ROWS_OF_KEY: data["test_group"],
                            store.WARNINGS_KEY: data["dump_warnings"] + caught.records(),
                            PEAK_KEY: peak_rss_mb()})


def _perturbed_cal(path, cal_labels, fields, method: str) -> dict:
    """The seed's calibration rows at every perturbation level of ``path`` (written for the seed's calibration
    rows, in their order), stacked level after level."""
    if path is None:
        raise ValueError(f"{method} fits on perturbed calibration data (rule dump_perturbed_cal) and none was given")
    levels = sorted((g for g in store.list_groups(path) if g.startswith("level/")), key=lambda g: int(g[6:]))
    parts = [store.read_group(path, g, fields=fields) for g in levels]
    if not np.array_equal(parts[0]["labels"], cal_labels):
        raise ValueError(f"{path}: its rows are not this seed's calibration rows (labels differ); delete it and "
                         "rerun the rule dump_perturbed_cal")
    return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
