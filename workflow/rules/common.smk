# Config access, target builders and wildcard constraints; all Python helpers of the rules live here.
import json
import re
from pathlib import Path

from snakemake.exceptions import WorkflowError

import calbench.data as _calbench_data
import calbench.metrics as _calbench_metrics
from calbench.config import ConfigError, chain_settings, validate
from calbench.data.sources import dump_memory_mb
from calbench.data.store import job_memory_mb
from calbench.methods import method_class, source_files, split_chain

REPO = Path(workflow.basedir)
try:
    validate(config, REPO / "workflow" / "schemas" / "config.schema.yaml")
except ConfigError as err:
    raise WorkflowError(f"calbench: invalid config: {err}") from None

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
    """Methods that need embeddings (a training split) run only on sources that have them."""
    needs = set().union(*(method_class(p).needs for p in split_chain(method)))
    return ("embeddings" not in needs or source_has_embeddings(source)) and (
        "train" not in needs or source_has_train(source))


def jobs():
    """Every (source, method, seed) the config asks for."""
    return [(s, m, seed) for s in SOURCES for m in METHODS if method_runs_on(m, s) for seed in source_seeds(s)]


def metric_files():
    return [f"results/metrics/{s}/{m}/seed{seed}.json" for s, m, seed in jobs()]


def table_files():
    return ["results/tables/metrics_long.csv", "results/tables/summary.md", "results/tables/average_ranks.md"] + [
        f"results/tables/{m}.md" for m in METRICS
    ]


def get_final_output():
    return table_files() + ["results/tables/runtime.md"] + figure_files() + study_files()  # runtime.smk, figures.smk, studies.smk


def package_files(package):
    """The .py files of a calbench subpackage (inputs, so that editing them reruns its jobs)."""
    return sorted(str(p) for p in Path(package.__file__).parent.glob("*.py"))


# ---- params and inputs of the rules (no lambdas in rules) ----
# Config slices reach jobs as canonical JSON (sorted keys), so that reordering or reformatting the
# config file does not look like a change of settings to Snakemake's params trigger.
def canonical(value):
    return json.dumps(value, sort_keys=True)


def source_entry(wildcards):
    return canonical(SOURCES[wildcards.source])


def source_seed_list(wildcards):
    return source_seeds(wildcards.source)


def source_split(wildcards):
    return canonical(SOURCES[wildcards.source].get("split"))


def method_settings(wildcards):
    return canonical(chain_settings(config, wildcards.method))


def method_code(wildcards):
    return source_files(wildcards.method)


def method_conda_env(wildcards):
    """Methods that learn from the training split (KCal's projection) train with torch."""
    needs = set().union(*(method_class(p).needs for p in split_chain(wildcards.method)))
    return "../../envs/torch.yaml" if "train" in needs else "../../envs/calbench.yaml"
