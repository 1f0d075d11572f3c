"""Build the dump of a data source from its config entry (dispatch on ``type``: synthetic, import, download).

Model-backed sources (``train``, ``pretrained``) are dumped by :mod:`calbench.jobs.model_dump` instead.
"""

from __future__ import annotations

from calbench import __version__
from calbench.data import download, importers, store, synthetic


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


def shift_groups(name: str, entry: dict, cache_dir) -> dict[str, dict]:
    """The shifted test sets of an import/download source, ``shift/{family}/{severity}`` → arrays (docs/shift.md):
    each item's files hold one pool (logits, labels) or a test part (an npz's ``test_*``, a pickle's test pair)."""
    groups = {}
    for family, items in entry.get("shifts", {}).items():
        for k, item in enumerate(items):
            where = f"sources.{name}.shifts.{family}.{k}"
            files = (_resolve_downloads(item["files"], cache_dir, where) if entry["type"] == "download"
                     else item["files"])
            groups[f"shift/{family}/{item['severity']}"] = shift_part(
                importers.read_files(entry["format"], files, entry["scores"], where), where)
    return groups


def shift_part(groups: dict[str, dict], where: str) -> dict:
    """The one shifted test set among the groups read from a shift's files."""
    for part in ("all", "test"):
        if part in groups:
            return groups[part]
    raise ValueError(f"{where}.files: a shifted test set is one pool (logits, labels) or a test part, found "
                     f"{sorted(groups)}")


def make_dump(name: str, entry: dict, seeds, path, cache_dir) -> None:
    """Build and atomically write ``results/dumps/{name}.h5``."""
    groups = build_groups(name, entry, seeds, cache_dir)
    store.write_dump(path, groups, {"source": entry, "source_name": name, "calbench_version": __version__})


def dump_memory_mb(entry: dict, seeds) -> int:
    """``resources: mem_mb`` of a dump job: 2,000, or for a synthetic source twice the arrays it writes
    (float32 logits and embeddings, float64 true probabilities of every seed and the training split)."""
    if entry["type"] != "synthetic":
        return 2000
    rows = len(seeds) * (entry["n_cal"] + entry["n_test"]) + entry["n_train"]
    classes, dim = synthetic.sizes(entry["task"], entry)
    width = 12 * classes + 4 * dim
    return max(2000, int(1000 + 2 * rows * width / 2**20))
