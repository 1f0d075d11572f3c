"""The out-of-distribution jobs without torch (docs/shift.md): an import source's OOD logits to
``results/ood/{source}.h5``, and the evaluation of a saved calibrator's confidence on them against the seed's
in-distribution test rows (Ovadia et al., NeurIPS 2019, §4.1 and Fig. 3). Model sources' OOD outputs:
:mod:`calbench.jobs.ood_model`."""

from __future__ import annotations

import json
from dataclasses import dataclass

import h5py
import numpy as np

import calbench
from calbench.atomic import atomic_path, write_text_atomic
from calbench.data import store
from calbench.data.entry import Source, sources
from calbench.data.npy_files import load_npy
from calbench.jobs import paths
from calbench.jobs.keys import calibrate_keys
from calbench.jobs.spec import JobSpec, infile, job_entry, outfile, param
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


@dataclass(frozen=True, kw_only=True)
class OodDumpSpec(JobSpec):
    """An import source's out-of-distribution sets (rule dump_ood_source): ``entry``, the source's entry but its
    other shifts."""

    source: str
    entry: dict = param()
    cache_dir: str
    dump: str = infile()
    data: list = infile()
    ood: str = outfile()


def spec(config: dict, *, source: str) -> OodDumpSpec:
    from calbench.data.inputs import ood_files

    entry = Source.of(config, source)
    return OodDumpSpec(source=source, entry=job_entry(entry, "shifts", "label_shift"),
                       cache_dir=config["downloads_dir"], dump=paths.DUMP.format(source=source),
                       data=ood_files(dict(entry.entry)), ood=paths.OOD.format(source=source))


def dump_source_ood_job(*, spec: OodDumpSpec) -> None:
    """An import source's OOD sets (``ood: {name: {logits: FILE.npy}}``): the classifier's scores on inputs of no
    class of the source, of the source's declared ``scores`` kind (probabilities become log-probabilities, as the
    dump's) and the dump's number of classes."""
    source, entry, dump = spec.source, spec.entry, spec.dump
    classes = int(store.read_attrs(dump)["num_classes"])
    sets = {}
    for name, item in entry["ood"].items():
        where = f"sources.{source}.ood.{name}.logits"
        logits = convert_scores(load_npy(item["logits"]), entry["scores"], where)
        if logits.shape[1] != classes:
            raise ValueError(f"{where}: {logits.shape[1]} classes, but {dump} has {classes}; an OOD set holds the "
                             "same classifier's outputs")
        sets[name] = {"logits": logits.astype(np.float32)}
    write_ood(spec.ood, sets, {"source_name": source, "calbench_version": calbench.__version__})


@dataclass(frozen=True, kw_only=True)
class OodEvaluateSpec(JobSpec):
    """A saved calibrator's confidence on the OOD sets against the seed's test rows (rule evaluate_ood)."""

    source: str
    method: str
    seed: int
    ood: str = infile()
    calibrated: str = infile()
    calibrator: str = infile()
    output: str = outfile()


def evaluate_spec(config: dict, *, source: str, method: str, seed) -> OodEvaluateSpec:
    where = {"source": source, "method": method, "seed": int(seed)}
    return OodEvaluateSpec(**where, ood=paths.OOD.format(source=source), calibrated=paths.CALIBRATED.format(**where),
                           calibrator=paths.CALIBRATOR.format(**where), output=paths.OOD_METRICS.format(**where))


def evaluate_ood_job(*, spec: OodEvaluateSpec) -> None:
    """AUROC and FPR at 95 % TPR of the calibrated max probability and negative entropy, in-distribution test rows
    (the calibrate job's test predictions) against each OOD set (the saved calibrator applied to its logits), and
    the Fig. 3 curves; written as JSON ``{name: {metrics..., curve: {...}}}``."""
    ood, calibrated, calibrator, output = spec.ood, spec.calibrated, spec.calibrator, spec.output
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


@dataclass(frozen=True, kw_only=True)
class OodReportSpec(JobSpec):
    """The OOD table and each source's Fig. 3 (rule ood_report) from the evaluate_ood records (``records``, of the
    jobs ``jobs`` in one order)."""

    jobs: list = param()
    sources: list = param()
    methods: list = param()
    records: list = infile()
    table: str = outfile()
    figures: dict = outfile()
    csv: dict = outfile()


def report_spec(config: dict) -> OodReportSpec:
    keys = calibrate_keys(config, having="ood")
    names = [s.name for s in sources(config, having="ood")]
    return OodReportSpec(jobs=[list(key) for key in keys], sources=names, methods=list(config["methods"]),
                         records=[paths.OOD_METRICS.format(source=s, method=m, seed=seed) for s, m, seed in keys],
                         table=paths.OOD_TABLE, figures={s: paths.OOD_FIGURE.format(source=s) for s in names},
                         csv={s: paths.OOD_FIGURE_CSV.format(source=s) for s in names})


def ood_report_job(*, spec: OodReportSpec) -> None:
    from calbench.report.ood import ood_figure, ood_long, ood_markdown
    from calbench.report.plotting import write_csv

    loaded = {tuple(key): json.loads(open(path).read()) for key, path in zip(spec.jobs, spec.records, strict=True)}
    write_text_atomic(spec.table, ood_markdown(ood_long(loaded), spec.methods))
    for source, png in spec.figures.items():
        write_csv(ood_figure(loaded, source, png, spec.methods), spec.csv[source])
