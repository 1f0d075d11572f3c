# The resolved config, every helper of the rule files (targets, inputs, params, resources), the sources each rule
# runs on and the wildcard constraints: the other rule files hold rules only, so that each one reads without the
# others and their include order does not matter. A rule's files and settings come from its job's spec
# (calbench.jobs.spec.SPECS: the rule's name → the spec function its script and `calbench job` call too).
import os
import re
import sys
from functools import cache
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod

from calbench.config import ConfigError, load, method_needs, read_config_file
from calbench.data.check import config_problems
from calbench.data.entry import sources
from calbench.data.sources import dump_memory_mb
from calbench.data.store import job_memory_mb
from calbench.imports import code_files
from calbench.jobs import paths
from calbench.jobs.code_inputs import code_manifest
from calbench.jobs.script_job import config_snapshot
from calbench.jobs.spec import spec_function
from calbench.stats.ranks import MIN_SOURCES
from calbench.methods import code_files as method_code_files

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


def names(found):
    return [source.name for source in found]


# ---- the sources of each rule (calbench.data.entry.sources is the one filter of sources) ----
SOURCES = config["sources"]
MODEL_SOURCES = names(sources(config, model=True))  # dumps computed by a model (torch, GPU rules)
DATA_SOURCES = names(sources(config, model=False))
TRAIN_SOURCES = [s.name for s in sources(config, model=True) if s.type == "train"]
IMAGEFOLDER_SOURCES = [s.name for s in sources(config, model=True) if s.is_imagefolder]
SHIFT_SOURCES = names(sources(config, having="shifts"))
OOD_SOURCES = names(sources(config, having="ood"))
LEARNING_CURVE = config["studies"].get("learning_curve")


def _alternatives(names):
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


# ---- the jobs' specs (calbench.jobs.spec): the rules' inputs and params, and the files of the rules without
# wildcards ----
def job_spec(rule, wildcards):
    return spec_function(rule)(config, **dict(wildcards.items()))


def spec_input(rule):
    """The files the job of ``rule`` reads, by name (``input: unpack(spec_input(rule))``)."""

    def files(wildcards):
        return job_spec(rule, wildcards).inputs()

    return files


def spec_params(rule):
    """The settings of the job of ``rule`` as canonical JSON (sorted keys), so that reordering or reformatting the
    config file does not look like a change of settings to Snakemake's params trigger."""

    def settings(wildcards):
        return job_spec(rule, wildcards).params()

    return settings


AGGREGATE = spec_function("aggregate")(config)
RUNTIME = spec_function("runtime_table")(config)
PAPER_COMPARISON = spec_function("paper_comparison")(config)
CRITICAL_DIFFERENCE = spec_function("critical_difference")(config)
LEARNING_CURVE_SUMMARY = spec_function("learning_curve_summary")(config)
SHIFT_REPORT = spec_function("shift_report")(config)
OOD_REPORT = spec_function("ood_report")(config)
LABEL_SHIFT_REPORT = spec_function("label_shift_report")(config)


# ---- the targets of the Snakefile's `all`, from the present sections only, so that an absent section runs no job ----
def table_files():
    return [path for files in AGGREGATE.outputs().values() for path in files]


def figure_files():
    files = []
    reliability, simplex = config["figures"].get("reliability"), config["figures"].get("simplex")
    if reliability is not None:
        files += [
            path.format(source=s, target=t)
            for s in reliability["sources"]
            for t in reliability["targets"]
            for path in (paths.RELIABILITY_FIGURE, paths.RELIABILITY_TABLE)
        ]
    if simplex is not None:
        files += [paths.SIMPLEX_FIGURE.format(source=s) for s in simplex["sources"]]
    if config["figures"].get("critical_difference") is not None and len(SOURCES) >= MIN_SOURCES:
        # fewer sources: the tables say why no diagram is drawn, and no job runs
        files += [path for files in CRITICAL_DIFFERENCE.outputs().values() for path in files]
    return files


def study_files():
    if LEARNING_CURVE is None:
        return []
    return [path for files in LEARNING_CURVE_SUMMARY.outputs().values() for path in files]


def paper_comparison_outputs():
    return [PAPER_COMPARISON.output] if PAPER_COMPARISON.table else []


def shift_outputs():
    shift = [p for name, files in SHIFT_REPORT.outputs().items() if name != "csv" for p in files]
    ood = [OOD_REPORT.table, *OOD_REPORT.figures.values()] if OOD_SOURCES else []
    return (shift if SHIFT_SOURCES else []) + ood


def label_shift_outputs():
    tables = list(LABEL_SHIFT_REPORT.tables.values())
    return tables + [LABEL_SHIFT_REPORT.adapt] if tables else []


# ---- code inputs: the calbench files each rule's script can execute (calbench.imports), as one manifest per import
# closure (calbench.jobs.code_inputs) ----
def _script_path(script):
    return Path(workflow.basedir) / "workflow" / "scripts" / f"{script}.py"


@cache
def _script_files(script):
    """The script itself (a shell rule does not name it to Snakemake) and the closure of its calbench imports."""
    return [str(_script_path(script)), *code_files(scripts=[_script_path(script)])]


@cache
def script_code(script):
    """The manifest of the closure of the calbench imports of workflow/scripts/{script}.py: the code input of its
    rule, so that editing one of these files reruns the rule's jobs, and editing any other file does not."""
    return code_manifest(script, _script_files(script), root=workflow.basedir)


@cache
def _script_and_method_code(script, method):
    files = set(_script_files(script)) | set(method_code_files(method))
    return code_manifest(f"{script}.{method}", files, root=workflow.basedir)


def method_code(script):
    """The code input of a rule whose script fits ``{method}``, the manifest of the script's closure and that of
    each stage's class module (the registry imports those by name), written once per script and method (Snakemake
    evaluates the input function of each job, more than once)."""

    def manifest(wildcards):
        return _script_and_method_code(script, wildcards.method)

    return manifest


# ---- the shell command of the rules whose jobs the local job runner runs (calbench.jobs.runner) ----
# It names what differs between runs and machines through the environment, since Snakemake reruns the jobs of a
# shell rule whose command text changes and a change of config or of the checkout's place must rerun nothing by
# itself. They are the resolved config (one file per content in .snakemake/calbench-config/), the checkout, and the
# Python of the scripts (the conda environment's under --use-conda, else this one, as for script rules).
os.environ.update(
    CALBENCH_CONFIG=config_snapshot(config),
    CALBENCH_WORKFLOW=str(workflow.basedir),
    CALBENCH_JOB_PYTHON=(
        "python" if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method else sys.executable
    ),
)


def job_command(script, *wildcards):
    """The shell command of rule ``script`` (a rule of that name), which runs workflow/scripts/{script}.py for a job
    with ``wildcards``: the job runner's client (workflow/scripts/job_runner/client.py, a Python without site
    packages) hands the job to the run's runner or, without one, runs the script in a Python of its own
    (calbench.jobs.script_job)."""
    named = " ".join(f"{name}={{wildcards.{name}:q}}" for name in wildcards)
    return (
        f'"$CALBENCH_JOB_PYTHON" -S "$CALBENCH_WORKFLOW/workflow/scripts/job_runner/client.py" {script} '
        f'"$CALBENCH_WORKFLOW/workflow/scripts/{script}.py" "$CALBENCH_CONFIG" {{threads}} {{log:q}} {named}'
    )


# ---- environments and resources ----
def method_conda_env(wildcards):
    """Methods that learn from the training split (KCal's projection) train with torch."""
    return "../../envs/torch.yaml" if "train" in method_needs(wildcards.method) else "../../envs/calbench.yaml"


def model_threads(wildcards):
    return SOURCES[wildcards.source]["threads"]


def model_gpus(wildcards):
    """1 where the source's device is a CUDA GPU, else 0 (calbench.models.training.resolve_device)."""
    return int(SOURCES[wildcards.source]["device"].startswith("cuda"))


def dump_memory(wildcards):
    return dump_memory_mb(SOURCES[wildcards.source], SOURCES[wildcards.source]["seeds"])


def job_memory(stage):
    """``resources: mem_mb`` of a calibrate or evaluate job, grown with the source's size."""

    def memory(wildcards, input):
        return job_memory_mb(input.dump[0], int(wildcards.seed), stage)

    return memory
