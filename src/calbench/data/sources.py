"""Build the dump of a data source from its config entry (dispatch on ``type``: synthetic, import, download).

Model-backed sources (``train``, ``pretrained``) are dumped by :mod:`calbench.jobs.model_dump` instead.
"""

from __future__ import annotations

import numpy as np

from calbench.data import copies, download, importers, store, synthetic
from calbench.data.where import shown
from calbench.version import __version__


def _resolve_downloads(files: dict, cache_dir: str, origin: str) -> dict:
    resolved = {}
    for key, value in files.items():
        if isinstance(value, dict) and "url" in value:
            if "sha256" not in value:
                raise ValueError(f"{origin}.files.{key}: a download needs `sha256` beside `url`")
            resolved[key] = str(download.fetch(value["url"], value["sha256"], cache_dir))
        elif isinstance(value, dict):
            resolved[key] = _resolve_downloads(value, cache_dir, f"{origin}.files.{key}")
        else:
            raise ValueError(f"{origin}.files.{key}: a download source needs {{url, sha256}}, got {value!r}")
    return resolved


def build_groups(name: str, entry: dict, seeds, cache_dir) -> dict[str, dict]:
    """The groups of the dump of source ``name`` (config entry ``entry``, every default filled); ``cache_dir``: the
    config's ``downloads_dir``."""
    origin = f"sources.{name}"
    kind = entry["type"]
    if kind == "synthetic":
        options = {k: v for k, v in entry.items()
                   if k not in ("type", "task", "n_cal", "n_test", "n_train", "seeds", "scores", "split")}
        groups = {}
        if entry["n_train"]:
            groups["train"] = synthetic.generate_train(entry["task"], entry["n_train"], **options)
        for seed in seeds:
            data = synthetic.generate(entry["task"], seed, entry["n_cal"], entry["n_test"], **options)
            groups.update({f"seed{seed}/{part}": arrays for part, arrays in data.items()})
        return groups
    if kind == "import":
        return importers.read_files(entry["format"], entry["files"], entry["scores"], origin)
    if kind == "download":
        files = _resolve_downloads(entry["files"], cache_dir, origin)
        return importers.read_files(entry["format"], files, entry["scores"], origin)
    raise ValueError(f"{origin}.type: expected synthetic, import or download, got {kind!r} (train and pretrained "
                     "sources are dumped by calbench.jobs.model_dump)")


def shift_groups(name: str, entry: dict, cache_dir, pool_labels: np.ndarray | None = None) -> dict[str, dict]:
    """The shifted test sets of an import/download source, ``shift/{family}/{severity}`` → arrays (docs/shift.md):
    each item's files hold one pool (logits, labels) or a test part (an npz's ``test_*``, a pickle's test pair);
    ``pool_rows`` where the item aligns its rows with the pool (``pool_labels``, :func:`shift_pool_rows`)."""
    groups = {}
    for family, items in entry.get("shifts", {}).items():
        for k, item in enumerate(items):
            where = f"sources.{name}.shifts.{family}.{k}"
            files = (_resolve_downloads(item["files"], cache_dir, where) if entry["type"] == "download"
                     else item["files"])
            part = shift_part(importers.read_files(entry["format"], files, entry["scores"], where), where)
            rows = shift_pool_rows(item, part["labels"], pool_labels, where)
            groups[f"shift/{family}/{item['severity']}"] = part if rows is None else {**part, "pool_rows": rows}
    return groups


def shift_part(groups: dict[str, dict], where: str) -> dict:
    """The one shifted test set among the groups read from a shift's files."""
    for part in ("all", "test"):
        if part in groups:
            return groups[part]
    raise ValueError(f"{where}.files: a shifted test set is one pool (logits, labels) or a test part, found "
                     f"{sorted(groups)}")


def shift_pool_rows(item: dict, labels: np.ndarray, pool_labels: np.ndarray | None, where: str) -> np.ndarray | None:
    """The pool row each row of a shifted set copies (docs/shift.md), from the item's ``aligned`` or ``rows``;
    ``None`` where the set is evaluated in full. ``pool_labels``: the labels of a pooled source's pool (``None``
    for a source with fixed parts). The declared rows must carry the pool rows' labels; a set of the pool's size
    that declares nothing is refused, since its rows may copy each seed's calibration rows."""
    declared = "aligned" if item.get("aligned") else "rows" if "rows" in item else None
    if pool_labels is None:
        if declared:
            raise ValueError(f"{where}.{declared}: aligns rows with a pool, but the source has fixed cal and test "
                             "parts (no `split`): its shifted sets are evaluated in full; remove it")
        return None
    if declared is None:
        if labels.size == pool_labels.size:
            raise ValueError(f"{where}: has the pool's {labels.size} rows, so it may hold shifted copies of every "
                             "seed's calibration rows among its test rows; say how its rows align with the pool: "
                             "`aligned: true` (row i copies pool row i) or `rows: FILE.npy` (the pool row of each "
                             "row), and each seed evaluates only its own test rows")
        return None
    if declared == "aligned":
        if labels.size != pool_labels.size:
            raise ValueError(f"{where}.aligned: the set has {labels.size} rows and the pool {pool_labels.size}; "
                             "`aligned: true` means row i copies pool row i (else give `rows`)")
        rows = np.arange(labels.size)
    else:
        try:
            rows = np.load(item["rows"], allow_pickle=False)
        except (OSError, ValueError) as err:
            raise ValueError(f"{where}.rows: cannot read {shown(item['rows'])} as an .npy array ({err})") from None
        if rows.shape != labels.shape or rows.dtype.kind not in "iu":
            raise ValueError(f"{where}.rows: expected {labels.size} integers (the pool row of each row), got "
                             f"{rows.dtype} of shape {rows.shape}")
        if rows.size and (rows.min() < 0 or rows.max() >= pool_labels.size):
            raise ValueError(f"{where}.rows: pool rows must lie in [0, {pool_labels.size}), found "
                             f"{rows.min()}..{rows.max()}")
    wrong = np.flatnonzero(labels != pool_labels[rows])
    if wrong.size:
        i = wrong[0]
        raise ValueError(f"{where}.{declared}: {wrong.size} of {labels.size} rows carry other labels than the pool "
                         f"rows they copy (row {i}: label {labels[i]}, pool row {rows[i]}: {pool_labels[rows[i]]}); "
                         "the rows do not align")
    return rows.astype(np.int64)


def make_dump(name: str, entry: dict, seeds, path, cache_dir) -> None:
    """Build and atomically write ``results/dumps/{name}.h5``."""
    from calbench.caught import Recorder

    with Recorder("dump") as caught:  # e.g. probabilities rounded on export: the tables list it (store.WARNINGS_KEY)
        groups = build_groups(name, entry, seeds, cache_dir)
        if "all" in groups:
            copies.warn_of_copies(f"sources.{name}", groups["all"])
        store.write_dump(path, groups, {"source": entry, "source_name": name, "calbench_version": __version__,
                                        store.WARNINGS_KEY: caught.records()})


def dump_memory_mb(entry: dict, seeds) -> int:
    """``resources: mem_mb`` of a dump job: 2,000, or for a synthetic source twice the arrays it writes
    (float32 logits and embeddings, float64 true probabilities of every seed and the training split)."""
    if entry["type"] != "synthetic":
        return 2000
    rows = len(seeds) * (entry["n_cal"] + entry["n_test"]) + entry["n_train"]
    classes, dim = synthetic.sizes(entry["task"], entry)
    width = 12 * classes + 4 * dim
    return max(2000, int(1000 + 2 * rows * width / 2**20))
