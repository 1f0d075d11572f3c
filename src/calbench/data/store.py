"""HDF5 dumps and calibrated outputs (docs/architecture.md §3).

A dump holds one group per split: ``train``/``cal``/``test`` (fixed splits), ``all`` (one pool,
re-split per seed by :mod:`calbench.data.splits`), or ``seed{s}/cal`` and ``seed{s}/test`` (data
drawn afresh per seed, as the LECE paper's synthetic study does). Each group holds ``logits``
float32 [N, C] (float64 where float32 would round them: the log-probabilities of imported
probabilities), ``labels`` int64 [N] and optionally ``embeddings`` float32 [N, D] and
``true_probs`` float64 [N, C]. Readers open files with HDF5 file locking off so that they work
on network file systems.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import h5py
import numpy as np

from calbench.atomic import atomic_path
from calbench.scores import check_labels, check_logits

#: Key of a metrics JSON (results/metrics/...) that is not a metric, and attribute of a calibrated file: the evaluate
#: or calibrate job's own peak memory in MB (calbench.jobs.logs.peak_rss_mb).
PEAK_KEY = "peak_rss_mb"
#: Key of a metrics JSON that is not a metric: the label-shifted sets' bootstrap resamples per strength and the group
#: of rows resampled (``{"rows_of": "all", "sets": {"dirichlet0.1": {metric: [R values]}}}``, docs/label_shift.md).
LABEL_SHIFT_RESAMPLES = "label_shift_resamples"
FIELDS = {"logits": np.float32, "labels": np.int64, "embeddings": np.float32, "true_probs": np.float64}


#: The files :func:`_open_for_reading` found stored in themselves, by (path, inode, size, modification time), checked
#: again once changed: a job reads one file's groups in turn (an evaluate job a shifted set at a time), and walking
#: every object of the file on each open cost it about a tenth of its time.
_CHECKED: set[tuple] = set()


def _open_for_reading(path) -> h5py.File:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        f = h5py.File(path, "r", locking=False)
    except OSError as err:
        raise ValueError(
            f"{path}: not a readable HDF5 file ({err}); it is truncated or corrupted: delete it and rerun "
            "the job that makes it"
        ) from None
    stat = path.stat()
    version = (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if version in _CHECKED:
        return f
    elsewhere = _stored_elsewhere(f)
    if elsewhere:
        f.close()
        raise ValueError(f"{path}: {elsewhere}; the files calbench writes hold none, so this one was changed: delete "
                         "it and rerun the job that makes it")
    _CHECKED.add(version)
    return f


def _stored_elsewhere(f: h5py.File) -> str | None:
    """What of ``f`` HDF5 would read from another object or file (a soft or external link, a dataset with external
    raw storage, a virtual dataset), said as the refusal says it; None where everything is stored in ``f``."""
    links = []
    f.visititems_links(lambda name, link: links.append(name) if not isinstance(link, h5py.HardLink) else None)
    if links:
        return f"{links[0]} is a link (soft or external: HDF5 would read another object or file in its place)"
    found = []

    def visit(name, obj):
        if not isinstance(obj, h5py.Dataset):
            return None
        if obj.is_virtual:
            found.append(f"{name} is a virtual dataset (HDF5 would read other datasets or files in its place)")
        elif obj.id.get_create_plist().get_external_count():
            found.append(f"{name} has external raw storage (HDF5 would read another file's bytes in its place)")
        return found[0] if found else None

    return f.visititems(visit)


def validate_split(arrays: dict, where: str) -> dict:
    """Check one split's arrays (shapes, dtypes, finiteness, label range); return them typed."""
    if "logits" not in arrays or "labels" not in arrays:
        raise ValueError(f"{where}: needs 'logits' and 'labels', found {sorted(arrays)}")
    logits = check_logits(arrays["logits"], name=f"{where}/logits")
    out = {"logits": _narrow(logits),
           "labels": check_labels(arrays["labels"], logits.shape[1], logits.shape[0], name=f"{where}/labels")}
    for field in ("embeddings", "true_probs"):
        if arrays.get(field) is not None:
            arr = np.asarray(arrays[field], dtype=FIELDS[field])
            if arr.ndim != 2 or arr.shape[0] != logits.shape[0]:
                raise ValueError(f"{where}/{field}: expected shape [{logits.shape[0]}, ...], got {arr.shape}")
            if not np.isfinite(arr).all():
                raise ValueError(f"{where}/{field}: contains NaN or infinite values")
            out[field] = arr
    if arrays.get("pool_rows") is not None:  # a shifted set's pool row of each row (docs/shift.md)
        rows = np.asarray(arrays["pool_rows"])
        if rows.shape != (logits.shape[0],) or rows.dtype.kind not in "iu" or (rows.size and rows.min() < 0):
            raise ValueError(f"{where}/pool_rows: expected {logits.shape[0]} non-negative integers, got {rows.dtype} "
                             f"of shape {rows.shape}")
        out["pool_rows"] = rows.astype(np.int64)
    return out


def _narrow(logits: np.ndarray) -> np.ndarray:
    """float32 where that holds ``logits`` exactly (a network's float32 outputs), else float64: a rounded copy
    would make the benchmark's calibrator see other inputs than ``calbench apply`` does on the same file."""
    single = logits.astype(np.float32)
    return single if np.array_equal(single, logits) else logits


def _create(group, name: str, arr: np.ndarray) -> None:
    """A compressed dataset with a Fletcher-32 checksum per chunk, so that a damaged file fails to read."""
    group.create_dataset(name, data=arr, compression="gzip", compression_opts=1, shuffle=True, fletcher32=True)


def write_dump(path, groups: dict[str, dict], attrs: dict) -> None:
    """Write ``{group_path: {field: array}}`` and root ``attrs`` atomically; validates every group."""
    checked = {name: validate_split(arrays, f"{path}:{name}") for name, arrays in groups.items()}
    classes = {a["logits"].shape[1] for a in checked.values()}
    if len(classes) != 1:
        raise ValueError(f"{path}: splits disagree on the number of classes: {sorted(classes)}")
    with atomic_path(path) as tmp, h5py.File(tmp, "w", locking=False) as f:
        for name, arrays in checked.items():
            group = f.require_group(name)
            for field, arr in arrays.items():
                _create(group, field, arr)
        f.attrs["num_classes"] = classes.pop()
        for key, value in attrs.items():
            f.attrs[key] = value if isinstance(value, (int, float, str)) else json.dumps(value)


def read_attrs(path) -> dict:
    with _open_for_reading(path) as f:
        return dict(f.attrs)


def _groups(f: h5py.File) -> list[str]:
    found = []

    def visit(name, obj):
        if isinstance(obj, h5py.Group) and "logits" in obj:
            found.append(name)

    f.visititems(visit)
    return sorted(found)


def list_groups(path) -> list[str]:
    """Paths of the groups that hold a ``logits`` dataset."""
    with _open_for_reading(path) as f:
        return _groups(f)


def _arrays(f: h5py.File, path, group: str, fields=None) -> dict[str, np.ndarray]:
    if group not in f:
        raise KeyError(f"{path}: has no group {group!r}; groups: {_groups(f)}")
    g = f[group]
    names = [k for k in g.keys() if fields is None or k in fields]
    try:
        return {k: g[k][()] for k in names}
    except OSError as err:
        raise ValueError(f"{path}:{group}: cannot read ({err}); the file is corrupted: delete it and "
                         "rerun") from None


def read_group(path, group: str, fields=None) -> dict[str, np.ndarray]:
    """Arrays of one group (all fields, or those named)."""
    with _open_for_reading(path) as f:
        return _arrays(f, path, group, fields)


def read_split(path, seed: int, fields=None, *, train: bool = False) -> dict:
    """The checked arrays (:func:`validate_split`) of a dump that a job of ``seed`` reads, in one read of the file:
    ``cal`` and ``test`` (the seed's own groups ``seed{s}/cal`` and ``seed{s}/test``, else the fixed ``cal`` and
    ``test``) or ``all``, a pool that :func:`calbench.data.splits.load_split` splits for the seed, and
    ``test_group``, the group of the test rows; with ``train``, also the ``train`` group; ``dump_warnings``, the
    warnings the dump job recorded (:func:`read_warnings`). ``fields``: the fields read (``logits`` and ``labels``
    always), all where None."""
    if fields is not None:
        fields = {"logits", "labels", *fields}
    with _open_for_reading(path) as f:
        groups = _groups(f)
        if f"seed{seed}/cal" in groups:
            parts = {"cal": f"seed{seed}/cal", "test": f"seed{seed}/test"}
        elif "cal" in groups and "test" in groups:
            parts = {"cal": "cal", "test": "test"}
        elif "all" in groups:
            parts = {"all": "all"}
        else:
            raise ValueError(f"{path}: expected groups cal+test, all, or seed{seed}/cal+test; found {groups}")
        out = {role: validate_split(_arrays(f, path, group, fields), f"{path}:{group}")
               for role, group in ({**parts, "train": "train"} if train else parts).items()}
        warned = _warnings(f.attrs)
    return {**out, "test_group": "all" if "all" in parts else parts["test"], "dump_warnings": warned}


#: Attribute (dump, calibrated file) and metrics-JSON key of the warnings the jobs raised (:mod:`calbench.caught`).
WARNINGS_KEY = "warnings"
#: Attribute of a calibrated file: the dump group its test index refers to (:func:`read_calibrated`).
ROWS_OF_KEY = "test_rows_of"


def read_warnings(path) -> list[dict]:
    """The warnings recorded in a dump's or calibrated file's attributes (none in files of earlier versions)."""
    return _warnings(read_attrs(path))


def _warnings(attrs) -> list[dict]:
    found = attrs.get(WARNINGS_KEY)
    return json.loads(found) if found else []


def write_calibrated(path, cal_probs, test_probs, cal_index, test_index, test_labels, attrs: dict) -> None:
    """The calibrate stage's output: test probabilities, split indices, test labels, attributes, and the
    in-sample (calibration split) probabilities only where ``cal_probs`` is given (nothing in calbench
    reads them; ``calibrate_job(keep_cal_outputs=True)`` asks for them).

    Probabilities are stored as the float64 array the calibrator returned (``test/probs``, ``cal/probs``),
    compressed, so that the metrics of the tables are those of ``predict_proba`` bit for bit: a narrower copy
    breaks the ties of isotonic and binning outputs differently and so changes predicted classes.
    """
    with atomic_path(path) as tmp, h5py.File(tmp, "w", locking=False) as f:
        if cal_probs is not None:
            _create(f, "cal/probs", np.asarray(cal_probs, dtype=np.float64))
        _create(f, "cal/index", np.asarray(cal_index, dtype=np.int64))
        _create(f, "test/probs", np.asarray(test_probs, dtype=np.float64))
        _create(f, "test/index", np.asarray(test_index, dtype=np.int64))
        _create(f, "test/labels", np.asarray(test_labels, dtype=np.int64))
        for key, value in attrs.items():
            f.attrs[key] = value if isinstance(value, (int, float, str)) else json.dumps(value)


def read_calibrated(path, part: str = "test") -> dict[str, np.ndarray]:
    """One part (``cal``/``test``) of a calibrated output, with ``probs`` float64 [N, C] (also from the float32
    ``logprobs`` of files written by earlier versions) and, for the test part, ``rows_of``: the dump group that
    ``index`` refers to (``all``, ``test``, ``seed{s}/test``; absent in files of earlier versions), the unit the
    paired bootstrap resamples (:mod:`calbench.stats.resampling`), and ``group_rows``, that group's size (a pool's
    calibration and test rows, else the test rows). Files written without the in-sample outputs have no ``cal``
    probabilities: asking for them says how to get them."""
    arrays = read_group(path, part)
    rows_of = read_attrs(path).get(ROWS_OF_KEY) if part == "test" else None
    if rows_of is not None:
        arrays["rows_of"] = str(rows_of)
        with _open_for_reading(path) as f:
            arrays["group_rows"] = int(f["test/index"].shape[0] + (f["cal/index"].shape[0] if rows_of == "all"
                                                                    else 0))
    if part == "cal" and not {"logprobs", "probs"} & set(arrays):
        raise KeyError(f"{path}: holds no calibration-split outputs (cal/probs); they are stored only on "
                       "request: rerun calibrate_job with keep_cal_outputs=True")
    if "logprobs" in arrays:
        arrays["probs"] = np.exp(arrays.pop("logprobs").astype(np.float64))
    return arrays


def split_sizes(path, seed: int) -> dict[str, int]:
    """Rows of the calibration + test data of ``seed`` (or of the pool), of the training split, the number
    of classes and the embedding width of a dump, read from the dataset shapes (no data loaded)."""
    with _open_for_reading(path) as f:
        groups = [g for g in (f"seed{seed}/cal", f"seed{seed}/test") if g in f] or [
            g for g in ("cal", "test", "all") if g in f]
        rows = sum(f[g]["logits"].shape[0] for g in groups)
        first = f[groups[0]] if groups else None
        return {"rows": rows, "train_rows": f["train"]["logits"].shape[0] if "train" in f else 0,
                "classes": int(f.attrs["num_classes"]),
                "embedding_dim": first["embeddings"].shape[1] if first is not None and "embeddings" in first else 0}


#: Memory model of a job (MiB): a base for the interpreter and libraries, plus float64 copies of the
#: [rows, classes] probabilities and of the embeddings that the stage holds at its peak (docs/runtime.md,
#: "Memory declared to the scheduler": the largest peaks measured at 1,000 classes × 25,000 + 25,000 rows, with
#: a margin; calibrate: 3.9 GB declared there, 2.9 GB the largest peak, `dir_l2`).
MEMORY_MODEL = {"calibrate": (800, 7, 1), "evaluate": (800, 6, 0)}


def job_memory_mb(dump, seed: int, stage: str) -> int:
    """``resources: mem_mb`` of a ``calibrate``/``evaluate`` job on ``dump``, grown with the source's size.

    Raises ``FileNotFoundError`` while the dump does not exist (Snakemake then evaluates it later).
    """
    if not Path(dump).exists():  # errno + filename: Snakemake recognises its own missing input
        raise FileNotFoundError(errno.ENOENT, "no such file", str(dump))
    base, prob_copies, embedding_copies = MEMORY_MODEL[stage]
    size = split_sizes(dump, seed)
    values = prob_copies * size["rows"] * size["classes"]
    values += embedding_copies * (size["rows"] + size["train_rows"]) * size["embedding_dim"]
    return int(base + values * 8 / 2**20)
