"""The evaluate job: the metrics of one calibrate job's test predictions, of its saved calibrator's predictions on
each shifted test set of the source (docs/shift.md), and of its test predictions resampled to new class priors,
before and after prior adaptation (docs/label_shift.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np

from calbench.atomic import write_text_atomic
from calbench.caught import Recorder
from calbench.data import splits, store
from calbench.data.entry import Source
from calbench.data.label_shift import draw_rows, parse_name, redraw_weights, set_names
from calbench.data.shifts import shift_sets
from calbench.data.store import LABEL_SHIFT_RESAMPLES, PEAK_KEY, WARNINGS_KEY
from calbench.jobs import paths
from calbench.jobs.logs import peak_rss_mb
from calbench.jobs.spec import JobSpec, as_params, infile, outfile, param
from calbench.metrics import evaluate, lookup
from calbench.metrics.evaluation import resampled_values
from calbench.metrics.label_shift import LabelShiftInputs
from calbench.scores import Scores


@dataclass(frozen=True, kw_only=True)
class EvaluateSpec(JobSpec):
    """One evaluate job: the metrics of a calibrate job's outputs (rule evaluate, ``calbench job evaluate``)."""

    source: str
    method: str
    seed: int
    metrics: list = param()
    split: dict | None = param()
    bootstrap: dict | None = param()
    test_sets: list | None = param()
    label_shift: dict | None = param()
    calibrated: str = infile()
    dump: str = infile()
    shifts: str | None = infile()
    calibrator: str | None = infile()
    output: str = outfile()


def spec(config: dict, *, source: str, method: str, seed) -> EvaluateSpec:
    """The evaluate job of the resolved config's ``source``, ``method`` and ``seed``: the saved calibrator where the
    source has shifted or label-shifted test sets (docs/shift.md, docs/label_shift.md); the names of the shifted
    sets (``test_sets``) are a setting, so that adding one reruns the evaluation."""
    entry, seed = Source.of(config, source), int(seed)
    where = {"source": source, "method": method, "seed": seed}
    return EvaluateSpec(source=source, method=method, seed=seed, metrics=list(config["metrics"]),
                        split=as_params(entry.split), bootstrap=as_params(config["bootstrap"]),
                        test_sets=shift_sets(dict(entry.entry)), label_shift=as_params(entry.entry.get("label_shift")),
                        calibrated=paths.CALIBRATED.format(**where), dump=paths.DUMP.format(source=source),
                        shifts=paths.SHIFTS.format(source=source) if entry.has("shifts") else None,
                        calibrator=paths.CALIBRATOR.format(**where)
                        if entry.has("shifts") or entry.has("label_shift") else None,
                        output=paths.METRICS.format(**where))


def evaluate_job(*, spec: EvaluateSpec) -> None:
    """Compute ``metrics`` on the test predictions; ``true_ce.*`` only where the dump knows the true map.

    ``bootstrap`` (config key ``bootstrap: {samples, level, interval}``, as :func:`calbench.config.load` fills it)
    adds confidence intervals; ``None``: none. ``shifts``
    (the source's ``results/shifts/{source}.h5``) with ``calibrator`` (the calibrate job's saved calibrator):
    the same metrics on each shifted test set, under ``"shifts": {"family/severity": {...}}``. ``label_shift``
    (the source's resolved ``label_shift`` entry) with ``calibrator``: its metrics on each label-shifted set, under
    ``"shifts": {"prior/…": {...}}`` (:func:`label_shifted_values`).
    """
    calibrated, dump, output, metrics, method, seed = (spec.calibrated, spec.dump, spec.output, spec.metrics,
                                                       spec.method, spec.seed)
    split, bootstrap, shifts, calibrator, label_shift = (spec.split, spec.bootstrap, spec.shifts, spec.calibrator,
                                                         spec.label_shift)
    out = store.read_calibrated(calibrated, "test")
    wanted = list(metrics)
    true_probs = uncal_probs = None
    if any(lookup(m)[0].needs_true_probs or lookup(m)[0].needs_uncal_probs for m in wanted):
        test = splits.load_split(dump, seed, split, test_index=out["index"])["test"]
        true_probs = test.get("true_probs")
        uncal_probs = Scores(test["logits"]).probs
        if true_probs is None:
            wanted = [m for m in wanted if not lookup(m)[0].needs_true_probs]
    intervals = {} if bootstrap is None else {
        "bootstrap": int(bootstrap["samples"]), "level": float(bootstrap["level"]), "interval": bootstrap["interval"]}

    def values(probs, labels, true, uncal, where):
        return evaluate(probs, labels, wanted, true_probs=true, seed=seed, uncal_probs=uncal,
                        **intervals, method=f"{method}, {where}")

    with Recorder("evaluate") as caught:  # with the calibrate and dump jobs' warnings, in the record
        record = {"source": spec.source, "method": method, "seed": seed,
                  **values(out["probs"], out["labels"], true_probs, uncal_probs, f"{calibrated}:test/probs")}
        if shifts is not None:
            wanted = [m for m in wanted if not lookup(m)[0].needs_true_probs]  # no true map of a shifted set
            record["shifts"] = {name: values(probs, labels, None, uncal, f"{shifts}:shift/{name}") for name, probs,
                                labels, uncal in shifted_predictions(shifts, calibrator, out["index"])}
        if label_shift is not None:
            shifted, record[LABEL_SHIFT_RESAMPLES] = label_shifted_values(
                label_shift, out, dump, seed, split, calibrator, intervals, f"{method}, {calibrated}")
            record.setdefault("shifts", {}).update(shifted)
    record[WARNINGS_KEY] = store.read_warnings(calibrated) + caught.records()
    record[PEAK_KEY] = peak_rss_mb()
    write_text_atomic(output, json.dumps(record, indent=1) + "\n")


def shifted_predictions(shifts, calibrator, test_index):
    """``(family/severity, calibrated probs, labels, uncalibrated probs)`` of each shifted test set
    (:func:`shifted_set`)."""
    from calbench.persist import load

    cal = load(calibrator)
    for group in store.list_groups(shifts):
        yield group.removeprefix("shift/"), *shifted_set(shifts, group, cal, test_index)


def shifted_set(shifts, group: str, cal, test_index) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(calibrated probs, labels, uncalibrated probs)`` of the shifted test set ``group`` (``shift/family/
    severity``): the loaded calibrator ``cal`` applied to the set's logits (and embeddings), on the seed's test
    rows where the set copies the held-out rows (``rows_of``: ``all`` or ``test``) or declares the pool row of
    each row (``pool_rows``), else on all its rows."""
    fields = ["logits", "labels", "pool_rows"] + (["embeddings"] if "embeddings" in cal.needs else [])
    own = store.read_attrs(shifts)["rows_of"] == "own"
    part = store.read_group(shifts, group, fields)
    if not own:
        part = {k: v[test_index] for k, v in part.items()}
    elif "pool_rows" in part:
        keep = np.isin(part.pop("pool_rows"), test_index)
        part = {k: v[keep] for k, v in part.items()}
    scores = Scores(part["logits"], part.get("embeddings"))
    return cal.predict_proba(scores), part["labels"], scores.probs


def label_shifted_values(spec: dict, out: dict, dump, seed: int, split, calibrator, intervals: dict, where: str):
    """(``{prior/…: {metric: value}}``, ``{kind+strength: {metric: [R values]}}``): ``spec["metrics"]`` on each
    label-shifted set of the seed's test predictions ``out`` (:func:`calbench.data.label_shift.draw_rows`), with the
    adaptation inputs from the saved calibrator's outputs on the seed's calibration split (its mean and confusion
    matrix; the calibrate job does not keep them); and, for the tables' paired bootstrap, ``{"rows_of": the group
    resampled, "sets": {kind+strength: {metric: [R values]}}}``: the mean over each strength's draws of the metrics
    on :data:`~calbench.stats.resampling.RESAMPLES` redraws of each set from the test rows resampled as the tables
    resample them (:func:`calbench.stats.resampling.unit_counts`, :func:`calbench.data.label_shift.redraw_weights`;
    the metrics with a row-weighted form)."""
    from threadpoolctl import threadpool_limits

    from calbench.persist import load
    from calbench.stats.resampling import RESAMPLES, seed_rows, unit_counts

    cal_model = load(calibrator)
    fields = ["logits", "labels"] + (["embeddings"] if "embeddings" in cal_model.needs else [])
    cal = splits.load_split(dump, seed, split, test_index=out["index"], fields=fields)["cal"]
    cal_probs = cal_model.predict_proba(Scores(cal["logits"], cal.get("embeddings")))
    probs, labels = out["probs"], out["labels"]
    base = LabelShiftInputs.from_calibration(cal_probs, cal["labels"], None)
    values, resampled = {}, {}
    unit = seed_rows(out, seed)
    counts = np.ascontiguousarray(np.concatenate(unit_counts(unit, RESAMPLES)))  # rows of columns picked: not C
    with threadpool_limits(limits=1, user_api="blas"):  # EM's and RLLS's small products: idle BLAS threads spin
        for name in set_names(spec):
            values[name], draws = _one_set(name, spec, probs, labels, replace(base, true_priors=None), seed,
                                           intervals, f"{where} ({name})", counts)
            kind, strength, _ = parse_name(name)
            for metric_id, draw in draws.items():
                resampled.setdefault(f"{kind}{strength:g}", {}).setdefault(metric_id, []).append(draw)
    means = {strength: {m: np.mean(d, axis=0).tolist() for m, d in per.items()} for strength, per in resampled.items()}
    return values, {"rows_of": unit.group, "sets": means}


def _one_set(name, spec, probs, labels, base, seed, intervals, what, counts):
    """(the metrics of label-shifted set ``name``, their values on the set's redraws from the test rows' resample
    ``counts`` [R, N])."""
    rows, true_priors = draw_rows(name, labels, probs.shape[1], seed, spec.get("size"), spec.get("tweak_class"))
    inputs = replace(base, true_priors=true_priors)
    values = evaluate(probs[rows], labels[rows], spec["metrics"], seed=seed, **intervals, label_shift=inputs,
                      method=what)
    weights = redraw_weights(name, labels, np.bincount(labels[rows], minlength=probs.shape[1]), seed, counts)
    return values, resampled_values(probs, labels, spec["metrics"], weights, seed=seed, label_shift=inputs, method=what)

