"""Check a config's imported files before any job runs: one line per problem.

``python -m calbench validate`` runs the deep check (every file read as the dump job reads it:
shapes, finite values, label range, declared ``scores`` kind against the content); ``snakemake -n``
runs the cheap one (missing files and, for ``npy`` files, from the file headers: the score matrices' shapes,
labels that are a vector with one entry per row (not ``(N, 1)``, not one-hot) and split sizes; and a
pickle's contents, read by the unpickler that runs no code; an npz's table of contents; every file's
being a non-empty regular file). Download
sources are checked by checksum when fetched and synthetic sources need no file: both check ``type: import``
sources' files and the folder of an ``imagefolder`` source.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from calbench.data import importers
from calbench.data.copies import row_keys, warn_of_copies
from calbench.data.image_folder import (
    IMAGE_EXTENSIONS,
    dataset_folder,
    image_file_problem,
    image_files,
    not_a_folder,
)
from calbench.data.npy_files import load_npy
from calbench.data.sources import shift_part, shift_pool_rows
from calbench.data.splits import check_split
from calbench.data.where import shown
from calbench.scores import convert_scores, labels_shape_problem


def _layout_problems(origin: str, shapes: dict[str, dict], split: dict | None) -> list[str]:
    """Splits present, labels beside logits, one class count, split sizes within the pool."""
    problems = []
    for name, fields in shapes.items():
        key = f"{origin}.files" + ("" if name == "all" else f".{name}")  # a pool's files sit right under files
        if "logits" not in fields or "labels" not in fields:
            problems.append(f"{key}: needs both logits and labels, found {sorted(fields)}")
            continue
        logits = fields["logits"]
        if len(logits) != 2:
            problems.append(f"{key}.logits: expected a 2-D array [n_samples, n_classes], got shape "
                            f"{logits}")
            continue
        problem = labels_shape_problem(fields["labels"], logits[1], logits[0])
        if problem:
            problems.append(f"{key}.labels: {problem}")
    if "all" in shapes:
        labels = shapes["all"].get("labels")
        if not split:
            problems.append(f"{origin}: one pool of rows needs `split: {{cal_size: N}}` or `{{cal_fraction: f}}`")
        elif labels is not None:
            try:
                check_split(labels[0], split.get("cal_size"), split.get("cal_fraction"))
            except ValueError as err:
                problems.append(f"{origin}.{err}")
    elif not {"cal", "test"} <= set(shapes):
        problems.append(f"{origin}.files: needs a `cal` and a `test` split (or one pool: logits, labels), "
                        f"found {sorted(shapes)}")
    classes = {fields["logits"][1] for fields in shapes.values() if len(fields.get("logits", ())) == 2}
    if len(classes) > 1:
        problems.append(f"{origin}.files: the splits disagree on the number of classes: {sorted(classes)}")
    return problems


def _shift_problems(origin: str, entry: dict, deep: bool, classes: set, pool_labels=None) -> list[str]:
    """Problems of the files of an ``import`` source's shifted test sets (docs/shift.md), read as its others;
    ``classes``: the class counts of its other files; ``pool_labels``: a pooled source's pool labels, against
    which each set's row alignment is checked (:func:`calbench.data.sources.shift_pool_rows`)."""
    problems = []
    for family, items in entry.get("shifts", {}).items():
        for k, item in enumerate(items):
            where = f"{origin}.shifts.{family}.{k}"
            if not deep:
                problems += [str(err) for err in importers.missing_files(item["files"], where)]
                continue
            groups, errors = importers.inspect_files(entry["format"], item["files"], entry["scores"], where)
            problems += [str(err) for err in errors]
            if not errors:
                try:
                    part = shift_part(groups, where)
                    shift_pool_rows(item, part["labels"], pool_labels if entry.get("split") else None, where)
                except ValueError as err:
                    problems.append(str(err))
                    continue
                found = part["logits"].shape[1]
                if classes and found not in classes:
                    problems.append(f"{where}.files: {found} classes, but the source's other files have "
                                    f"{sorted(classes)}")
    return problems


def source_problems(name: str, entry: dict, deep: bool = True) -> list[str]:
    """Problems of the files of one ``import`` source, of its shifted test sets and of its out-of-distribution sets
    (empty for other types)."""
    if entry["type"] != "import":
        return []
    origin = f"sources.{name}"
    problems, classes, pool_labels = _file_problems(origin, entry, deep)
    names = entry.get("class_names")
    if names is not None and len(classes) == 1 and len(names) not in classes:
        problems.append(f"{origin}.class_names: {len(names)} names, but the files hold {min(classes)} classes; give "
                        "one name per class, in the order of the logits' columns")
    return (problems + _shift_problems(origin, entry, deep, classes, pool_labels)
            + _ood_problems(origin, entry, deep, classes))


def _ood_problems(origin: str, entry: dict, deep: bool, classes: set) -> list[str]:
    """Problems of an ``import`` source's out-of-distribution logits (docs/shift.md): missing; deep: not finite
    2-D scores of the source's kind, or another number of classes."""
    problems = []
    for name, spec in (entry.get("ood") or {}).items():
        where = f"{origin}.ood.{name}.logits"
        path = Path(spec["logits"])
        if not path.exists():
            problems.append(f"{where}: {shown(path)} does not exist")
            continue
        if not deep:
            continue
        try:
            found = convert_scores(load_npy(path), entry["scores"], where).shape[1]
        except (OSError, ValueError) as err:
            problems.append(str(err) if str(err).startswith(where) else f"{where}: {err}")
            continue
        if classes and found not in classes:
            problems.append(f"{where}: {found} classes, but the source's other files have {sorted(classes)}")
    return problems


def _file_problems(origin: str, entry: dict, deep: bool) -> tuple[list[str], set, object]:
    """Problems of the source's own files, their class counts and a pool's labels (deep check only)."""
    files = entry["files"]
    if deep:
        groups, errors = importers.inspect_files(entry["format"], files, entry["scores"], origin)
        shapes = {split: {f: a.shape for f, a in arrays.items()} for split, arrays in groups.items()}
        classes = {fields["logits"][1] for fields in shapes.values()}
        pool_labels = groups.get("all", {}).get("labels")
        if errors:  # a split with a problem is left out of the groups: no layout check on the rest
            return [str(err) for err in errors], classes, pool_labels
        return (_layout_problems(origin, shapes, entry.get("split")) + content_problems(origin, groups), classes,
                pool_labels)
    missing = importers.missing_files(files, origin)
    if missing or entry["format"] != "npy":
        return [str(err) for err in missing] or [f"{origin}: {err}" for err in importers.archive_problems(
            entry["format"], files)], set(), None
    try:
        files = importers.npy_fields(files, entry["scores"], origin)
    except ValueError as err:  # names the key itself
        return [str(err)], set(), None
    try:
        return _layout_problems(origin, importers.npy_shapes(files), entry.get("split")), set(), None
    except ValueError as err:
        return [f"{origin}: {err}"], set(), None


def content_problems(origin: str, groups: dict) -> list[str]:
    """Rows that would make a table claim more than the data hold, compared by content (scores and label): test
    rows that are also calibration rows (a problem: the method that over-fits wins); a pool with copies of rows
    (a warning with the count; :func:`calbench.data.splits.split_pool` keeps the copies on one side)."""
    problems = []
    if {"cal", "test"} <= set(groups):
        cal, test = groups["cal"], groups["test"]
        if cal["logits"].shape[1] == test["logits"].shape[1]:
            shared = np.isin(row_keys(test["logits"], test["labels"]), row_keys(cal["logits"], cal["labels"]))
            if shared.any():
                problems.append(f"{origin}.files.test: {int(shared.sum())} of its {shared.size} rows are also "
                                "calibration rows (same scores and label): the test part must be held out from "
                                "calibration, else the method that over-fits wins; give disjoint files or one pool "
                                "with `split`")
    if "all" in groups:
        warn_of_copies(f"{origin}.files", groups["all"])
    return problems


def same_data_problems(config: dict, cached: bool = False) -> list[str]:
    """Sources whose data are the same: ``import`` sources whose files have equal SHA-256 digests, or sources with
    equal entries (a synthetic task drawn twice): counted as two in the tables' ``k/N``, the average ranks and
    the Friedman test, they would claim twice the evidence. ``cached``: the digests from the workflow's cache
    (:func:`calbench.data.digests.file_digests`, which the DAG's content digests read too), so that ``snakemake -n``
    refuses such a config before any job at no extra cost; else each file is read."""
    seen: dict[tuple, str] = {}
    problems = []
    for name, entry in config["sources"].items():
        key = _data_key(entry, cached)
        if key is None:
            continue
        if key in seen:
            problems.append(f"sources.{name}: holds the same data as sources.{seen[key]} (equal "
                            f"{'file digests' if entry['type'] == 'import' else 'entries'}); a source counted twice "
                            "doubles its weight in the k/N columns, average ranks and Friedman test: keep one of "
                            f"sources.{seen[key]} and sources.{name} (delete the other's entry)")
        seen.setdefault(key, name)
    return problems


def _data_key(entry: dict, cached: bool = False):
    """The identity of a source's data: its files' digests (``import``), else its entry without the keys that do
    not change the data (shifts, OOD sets, seeds). Its label-shift sets stay in it: a label-shift study compares one
    network's adaptation at several set sizes as sources of their own (config/label_shift_paper.yaml)."""
    import hashlib
    import json

    if entry["type"] == "import":
        files = [path for path in _file_paths(entry["files"]) if Path(path).is_file()]
        if not files:
            return None
        if cached:
            from calbench.data.digests import file_digests

            return ("import", *sorted(file_digests(files).values()))
        return ("import", *sorted(hashlib.sha256(Path(path).read_bytes()).hexdigest() for path in files))
    later = ("shifts", "ood", "seeds")  # a label-shift study's set sizes make variants (config/label_shift_paper.yaml)
    return (entry["type"], json.dumps({k: v for k, v in entry.items() if k not in later}, sort_keys=True,
                                      default=str))


def _file_paths(files) -> list[str]:
    """Every path in an import source's ``files`` (nested per split or not)."""
    if isinstance(files, dict):
        return [path for value in files.values() for path in _file_paths(value)]
    return [str(files)] if isinstance(files, (str, Path)) else []


def image_folder_problems(name: str, entry: dict, cache_dir, deep: bool = False) -> list[str]:
    """Problems of an ``imagefolder`` source's folder, as torchvision's ``ImageFolder`` would meet them when its
    model job starts: not a folder, no class sub-folder, a class without images, a link looping back; ``deep``
    (validate): also every file with an image ending that is no image file or does not decode."""
    if entry.get("dataset") != "imagefolder":
        return []
    where, root = f"sources.{name}", dataset_folder(entry, cache_dir)
    if not root.is_dir():
        return [not_a_folder(shown(root), where)]
    classes = sorted(sub.name for sub in os.scandir(root) if sub.is_dir())
    if not classes:
        return [f"{where}.data_dir: {shown(root)} has no sub-folder: put each class's images in a folder of its own"]
    try:
        images = image_files(root, where)
    except ValueError as err:
        return [str(err)]
    empty = sorted(set(classes) - {Path(path).relative_to(root).parts[0] for path in images})
    problems = [f"{where}.data_dir: no image ({', '.join(IMAGE_EXTENSIONS)}) in the class folder(s) "
                f"{', '.join(empty)}"] if empty else []
    bad = [(path, problem) for path in images if (problem := image_file_problem(path) or _decode_problem(path))] \
        if deep else []
    problems += [f"{where}.data_dir: {shown(Path(path))} {problem}; remove it or replace it with the image"
                 for path, problem in bad[:5]]
    if len(bad) > 5:
        problems.append(f"{where}.data_dir: {len(bad) - 5} more files with an image ending are no image files")
    return problems


def _decode_problem(path) -> str | None:
    """What stops Pillow (the model jobs' image reader, where installed) from opening and decoding ``path``."""
    try:
        from PIL import Image
    except ImportError:  # the base install reads no images
        return None
    try:
        with Image.open(path) as image:
            image.load()
    except Exception as err:  # noqa: BLE001 (any failure to decode is the file's)
        return f"does not decode as an image ({type(err).__name__}: {' '.join(str(err).split())[:120]})"
    return None


def config_problems(config: dict, deep: bool = True) -> list[str]:
    """Problems of every source of a loaded config (:func:`calbench.config.load`), with the sources holding the
    same data (:func:`same_data_problems`; not deep: from the workflow's digest cache)."""
    return [p for name, entry in config["sources"].items()
            for p in source_problems(name, entry, deep)
            + image_folder_problems(name, entry, config["downloads_dir"], deep)
            ] + same_data_problems(config, cached=not deep)
