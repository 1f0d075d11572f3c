# The resolved config, the helpers several rule files share (targets, params, inputs) and the wildcard
# constraints. A rule file's own helpers live beside its rules (figures.smk, studies.smk, compare.smk).
import json
import re
from pathlib import Path

from snakemake.exceptions import WorkflowError

import calbench.data as _calbench_data
import calbench.metrics as _calbench_metrics
from calbench.config import ConfigError, chain_settings, load
from calbench.data.check import config_problems
from calbench.data.sources import dump_memory_mb
from calbench.data.store import job_memory_mb
from calbench.jobs import paths
from calbench.methods import method_class, source_files, split_chain

# The resolved config (calbench.config.load: validated, every default filled, names cross-checked)
# replaces Snakemake's in place; the rule files read only it.
try:
    _resolved = load(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
except ConfigError as err:
    raise WorkflowError(f"calbench: invalid config: {err}") from None
config.clear()
config.update(_resolved)
# Cheap checks of imported files (missing files, npy shapes and split sizes from the headers), so that
# `snakemake -n` stops on them; `python -m calbench validate` reads the files in full.
_problems = config_problems(config, deep=False)
if _problems:
    raise WorkflowError("calbench: invalid input files:\n" + "\n".join(_problems))

SOURCES = config["sources"]
METHODS = config["methods"]
METRICS = config["metrics"]
# Sources whose dump is computed by a model (train/pretrained, GPU rules) and those that are not.
MODEL_SOURCES = [s for s, e in SOURCES.items() if e["type"] in ("train", "pretrained")]
DATA_SOURCES = [s for s, e in SOURCES.items() if s not in MODEL_SOURCES]


def _alternatives(names):
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


wildcard_constraints:
    source=_alternatives(SOURCES),
    method=_alternatives(METHODS),
    seed=r"\d+",


def source_seeds(source):
    """A source's own ``seeds``, else the config's."""
    return SOURCES[source].get("seeds", config["seeds"])


def source_has_embeddings(source):
    entry = SOURCES[source]
    if entry["type"] in ("train", "pretrained") or entry.get("task") == "imagenet_like":
        return True
    files = entry.get("files", {})
    return "embeddings" in files or any(isinstance(v, dict) and "embeddings" in v for v in files.values())


def source_has_train(source):
    """Model sources dump the classifier's training split (unless ``sizes.train`` is 0); imports may carry
    one (``files.train``), and synthetic networks with ``n_train``."""
    entry = SOURCES[source]
    if entry["type"] in ("train", "pretrained"):
        return entry.get("sizes", {}).get("train") != 0
    return "train" in entry.get("files", {}) or bool(entry.get("n_train"))


def method_runs_on(method, source):
    """Methods that need embeddings (a training split, perturbed calibration images) run only on sources that
    have them."""
    needs = set().union(*(method_class(p).needs for p in split_chain(method)))
    return ("embeddings" not in needs or source_has_embeddings(source)) and (
        "train" not in needs or source_has_train(source)) and (
        "perturbed_cal" not in needs or source in MODEL_SOURCES)


def jobs():
    """Every (source, method, seed) the config asks for."""
    return [(s, m, seed) for s in SOURCES for m in METHODS if method_runs_on(m, s) for seed in source_seeds(s)]


def metric_files():
    return [paths.METRICS.format(source=s, method=m, seed=seed) for s, m, seed in jobs()]


def table_files():
    return [paths.METRICS_LONG, "results/tables/summary.md", "results/tables/average_ranks.md"] + [
        f"results/tables/{m}.md" for m in METRICS
    ]


def package_files(package):
    """The .py files of a calbench subpackage (inputs, so that editing them reruns its jobs)."""
    return sorted(str(p) for p in Path(package.__file__).parent.glob("*.py"))


# ---- params and inputs of the rules (no lambdas in rules) ----
# Config slices reach jobs as canonical JSON (sorted keys), so that reordering or reformatting the
# config file does not look like a change of settings to Snakemake's params trigger.
def canonical(value):
    return json.dumps(value, sort_keys=True)


def source_entry(wildcards):
    """The source's entry but its ``shifts``: adding a shifted test set reruns no training, dump or calibration
    (docs/shift.md); the shift dump (rules/shift.smk) reads the whole entry."""
    return canonical({k: v for k, v in SOURCES[wildcards.source].items() if k != "shifts"})


def source_seed_list(wildcards):
    return source_seeds(wildcards.source)


def source_split(wildcards):
    return canonical(SOURCES[wildcards.source].get("split"))


def source_split_file(wildcards):
    """A pooled source's drawn split for the seed (rule draw_split); nothing for sources with fixed parts."""
    return [paths.SPLIT.format(**wildcards)] if SOURCES[wildcards.source].get("split") else []


def source_scores_kind(wildcards):
    """What a saved calibrator of the source takes: its declared ``scores`` (logits or probs)."""
    return SOURCES[wildcards.source].get("scores", "logits")


def method_settings(wildcards):
    return canonical(chain_settings(config, wildcards.method))


def method_code(wildcards):
    return source_files(wildcards.method)


def method_conda_env(wildcards):
    """Methods that learn from the training split (KCal's projection) train with torch."""
    needs = set().union(*(method_class(p).needs for p in split_chain(wildcards.method)))
    return "../../envs/torch.yaml" if "train" in needs else "../../envs/calbench.yaml"
