# The resolved config, the helpers several rule files share (targets, params, inputs) and the wildcard
# constraints. A rule file's own helpers live beside its rules (figures.smk, studies.smk, compare.smk).
import json
import re
from functools import cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

from calbench.config import ConfigError, load, method_needs, method_runs_on, read_config_file
from calbench.data.check import config_problems
from calbench.data.inputs import shift_files, source_files
from calbench.data.sources import dump_memory_mb
from calbench.data.store import job_memory_mb
from calbench.jobs import paths
from calbench.jobs.sources import dump_entry
from calbench.imports import code_files
from calbench.methods import code_files as method_code_files
from calbench.methods.registry import chain_settings

# The resolved config (calbench.config.load: validated, every default filled, names cross-checked)
# replaces Snakemake's in place; the rule files read only it.
try:
    for _path in workflow.configfiles:  # Snakemake's YAML reader keeps the last of a key given twice: refused here
        read_config_file(_path)
    _resolved = load(config)  # the schema shipped inside the package (calbench.config.SCHEMA)
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
# Model sources that read a folder of images: their model rules read its manifest (rule image_manifest).
IMAGEFOLDER_SOURCES = [s for s in MODEL_SOURCES if SOURCES[s]["dataset"] == "imagefolder"]


def _alternatives(names):
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


wildcard_constraints:
    source=_alternatives(SOURCES),
    method=_alternatives(METHODS),
    seed=r"\d+",


def section_value(section, key):
    """A setting of an optional config section (``figures.*``, ``studies.*``, ``paper_comparison``): ``None`` where
    the section is absent. Every rule is defined whatever the config; rule all asks only for the present sections'
    outputs, so the rules of an absent one run no job."""
    return None if section is None else section[key]


def source_seeds(source):
    """A source's own ``seeds``, else the config's (calbench.config.load fills them in)."""
    return SOURCES[source]["seeds"]


def jobs():
    """Every (source, method, seed) the config asks for (calbench.config.method_runs_on)."""
    return [(s, m, seed) for s in SOURCES for m in METHODS if method_runs_on(m, SOURCES[s])
            for seed in source_seeds(s)]


def metric_files():
    return [paths.METRICS.format(source=s, method=m, seed=seed) for s, m, seed in jobs()]


def calibrated_files():
    return [paths.CALIBRATED.format(source=s, method=m, seed=seed) for s, m, seed in jobs()]


def table_files():
    return [paths.METRICS_LONG, paths.SUMMARY, paths.AVERAGE_RANKS, paths.INTERVALS] + [
        paths.METRIC_TABLE.format(metric=m) for m in METRICS
    ]


# ---- code inputs: the calbench files each rule's script can execute (calbench.imports) ----
@cache
def script_code(script):
    """The closure of the calbench imports of workflow/scripts/{script}.py: the code input of its rule, so that
    editing one of these files reruns the rule's jobs, and editing any other file does not."""
    return code_files(scripts=[Path(workflow.basedir) / "workflow" / "scripts" / f"{script}.py"])


@cache
def _script_and_method_code(script, method):
    return tuple(sorted(set(script_code(script)) | set(method_code_files(method))))


def method_code(script):
    """The code input of a rule whose script fits ``{method}``, that is the script's closure and that of each stage's
    class module (the registry imports those by name); computed once per script and method (Snakemake evaluates
    the input function of each job, more than once)."""

    def files(wildcards):
        return list(_script_and_method_code(script, wildcards.method))

    return files


# ---- params and inputs of the rules (no lambdas in rules) ----
# Config slices reach jobs as canonical JSON (sorted keys), so that reordering or reformatting the
# config file does not look like a change of settings to Snakemake's params trigger.
def canonical(value):
    return json.dumps(value, sort_keys=True)


def source_entry(wildcards):
    """The source's entry as its dump, training and perturbed-calibration jobs read it (calbench.jobs.sources.
    dump_entry: but the keys of later stages); the shift and OOD dumps (rules/shift.smk) read the entry but the keys
    of the others."""
    return canonical(dump_entry(config, wildcards.source))


def source_data(wildcards):
    """The files the source's entry names (an import's files, a model's local weights) and an image folder's
    manifest: inputs of the rules that read them, so that changing a file's content reruns what depends on it
    (calbench.data.inputs)."""
    images = [paths.IMAGE_MANIFEST.format(source=wildcards.source)] if wildcards.source in IMAGEFOLDER_SOURCES else []
    return source_files(SOURCES[wildcards.source]) + images


def shift_data(wildcards):
    """The files of an import source's shifted test sets: inputs of its shift dump."""
    return shift_files(SOURCES[wildcards.source])


def source_seed_list(wildcards):
    return source_seeds(wildcards.source)


def source_split(wildcards):
    return canonical(SOURCES[wildcards.source].get("split"))


def source_split_file(wildcards):
    """A pooled source's drawn split for the seed (rule draw_split); nothing for sources with fixed parts."""
    return [paths.SPLIT.format(**wildcards)] if SOURCES[wildcards.source].get("split") else []


def source_scores_kind(wildcards):
    """What a saved calibrator of the source takes: its declared ``scores`` (logits or probs)."""
    return SOURCES[wildcards.source]["scores"]


def method_settings(wildcards):
    return canonical(chain_settings(wildcards.method, config["method_settings"]))


def method_conda_env(wildcards):
    """Methods that learn from the training split (KCal's projection) train with torch."""
    return "../../envs/torch.yaml" if "train" in method_needs(wildcards.method) else "../../envs/calbench.yaml"
