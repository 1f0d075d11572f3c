"""The out-of-distribution jobs without torch (docs/shift.md): an import source's OOD logits to
``results/ood/{source}.h5``, and the evaluation of a saved calibrator's confidence on them against the seed's
in-distribution test rows (Ovadia et al., NeurIPS 2019, §4.1 and Fig. 3). Model sources' OOD outputs:
:mod:`calbench.jobs.ood_model`."""

from __future__ import annotations

import json

import h5py
import numpy as np

import calbench
from calbench.atomic import atomic_path, write_text_atomic
from calbench.data import store
from calbench.data.npy_files import load_npy
from calbench.scores import Scores, convert_scores

#: The confidence thresholds of Ovadia et al.'s Fig. 3 curves.
THRESHOLDS = np.round(np.linspace(0.0, 1.0, 101), 2)


def write_ood(path, sets: dict[str, dict], attrs: dict) -> None:
    """Write ``{name: {logits[, embeddings]}}`` as groups ``ood/{name}`` (no labels: the rows belong to no class
    of the source) and root ``attrs``, atomically."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w", locking=False) as f:
        for name, arrays in sets.items():
            for field, array in arrays.items():
                f.create_dataset(f"ood/{name}/{field}", data=array)
        for key, value in attrs.items():
            f.attrs[key] = json.dumps(value)


def read_ood(path, fields=("logits", "embeddings")) -> dict[str, dict]:
    with h5py.File(path, "r", locking=False) as f:
        return {name: {k: group[k][()] for k in fields if k in group} for name, group in f["ood"].items()}


def dump_source_ood_job(source: str, entry: dict, dump, output) -> None:
    """An import source's OOD sets (``ood: {name: {logits: FILE.npy}}``): the classifier's scores on inputs of no
    class of the source, of the source's declared ``scores`` kind (probabilities become log-probabilities, as the
    dump's) and the dump's number of classes."""
    classes = int(store.read_attrs(dump)["num_classes"])
    sets = {}
    for name, spec in entry["ood"].items():
        where = f"sources.{source}.ood.{name}.logits"
        logits = convert_scores(load_npy(spec["logits"]), entry["scores"], where)
        if logits.shape[1] != classes:
            raise ValueError(f"{where}: {logits.shape[1]} classes, but {dump} has {classes}; an OOD set holds the "
                             "same classifier's outputs")
        sets[name] = {"logits": logits.astype(np.float32)}
    write_ood(output, sets, {"source_name": source, "calbench_version": calbench.__version__})


def evaluate_ood_job(ood, calibrated, calibrator, output) -> None:
    """AUROC and FPR at 95 % TPR of the calibrated max probability and negative entropy, in-distribution test rows
    (``calibrated``: the calibrate job's test predictions) against each OOD set (``calibrator`` applied to its
    logits), and the Fig. 3 curves; written as JSON ``{name: {metrics..., curve: {...}}}``."""
    from calbench.metrics.ood import confidence_curve, ood_metrics
    from calbench.persist import load

    test = store.read_calibrated(calibrated, "test")
    cal = load(calibrator)
    fields = ("logits", "embeddings") if "embeddings" in cal.needs else ("logits",)
    record = {}
    for name, arrays in read_ood(ood, fields).items():
        out_probs = cal.predict_proba(Scores(arrays["logits"], arrays.get("embeddings")))
        record[name] = {**ood_metrics(test["probs"], out_probs),
                        "curve": confidence_curve(test["probs"], test["labels"], out_probs, THRESHOLDS)}
    write_text_atomic(output, json.dumps(record, indent=1) + "\n")


def ood_report_job(records: dict[tuple[str, str, int], str], table, figures: dict[str, tuple[str, str]],
                   methods=None) -> None:
    """The OOD table (``table``, Markdown) and each source's Fig. 3 (``figures``: source → (png, csv)) from the
    evaluate_ood records, ``(source, method, seed)`` → JSON path."""
    from calbench.report.ood import ood_figure, ood_long, ood_markdown
    from calbench.report.plotting import write_csv

    loaded = {key: json.loads(open(path).read()) for key, path in records.items()}
    write_text_atomic(table, ood_markdown(ood_long(loaded), methods))
    for source, (png, csv) in figures.items():
        write_csv(ood_figure(loaded, source, png, methods), csv)
