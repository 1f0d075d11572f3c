"""Typed job specs: what one job of the workflow reads, writes and is set to, as a frozen dataclass built from the
resolved config and the job's wildcards (each stage's ``spec(config, **wildcards)``, :data:`SPECS`).

The rule declares the spec's files (``input: unpack(...)``, its ``output`` templates filled by the spec), holds its
settings as one param (so that a changed setting reruns the job, and only its own settings do), and its script
calls the job with the spec; ``calbench job …`` builds the same spec. A field's role is in its metadata:

* ``infile()``: a file the job reads (``None``: none), an input of the rule;
* ``outfile()``: a file the job writes, an output of the rule;
* ``param()``: a value of the config the job's result depends on, in the rule's param ``settings``;
* plain fields: the job's wildcards (source, method, seed) and what does not change its result (threads).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields

#: Rule name → ``"module:function"`` of its spec: the spec of each rule's job (the workflow, the command line and
#: the test that compares them with what Snakemake declares import them from here).
SPECS = {
    "dump_source": "calbench.jobs.sources:spec",
    "dump_shifts_source": "calbench.jobs.sources:shifts_spec",
    "draw_split": "calbench.jobs.sources:split_spec",
    "image_manifest": "calbench.jobs.image_manifest:spec",
    "source_digest": "calbench.jobs.source_digest:spec",
    "train_model": "calbench.jobs.model_specs:train_spec",
    "dump_model": "calbench.jobs.model_specs:dump_spec",
    "dump_shifts_model": "calbench.jobs.model_specs:shifts_spec",
    "dump_ood_model": "calbench.jobs.model_specs:ood_spec",
    "dump_ood_source": "calbench.jobs.ood:spec",
    "evaluate_ood": "calbench.jobs.ood:evaluate_spec",
    "ood_report": "calbench.jobs.ood:report_spec",
    "dump_perturbed_cal": "calbench.jobs.model_specs:perturbed_cal_spec",
    "calibrate": "calbench.jobs.calibrate:spec",
    "evaluate": "calbench.jobs.evaluate:spec",
    "aggregate": "calbench.jobs.tables:spec",
    "runtime_table": "calbench.jobs.tables:runtime_spec",
    "paper_comparison": "calbench.jobs.tables:paper_spec",
    "reliability_diagram": "calbench.jobs.reliability:spec",
    "simplex_map": "calbench.jobs.simplex:spec",
    "critical_difference": "calbench.jobs.critical_difference:spec",
    "learning_curve": "calbench.jobs.studies:spec",
    "learning_curve_summary": "calbench.jobs.studies:summary_spec",
    "shift_report": "calbench.jobs.shift:spec",
    "label_shift_report": "calbench.jobs.label_shift:spec",
}


def spec_function(rule: str):
    """The spec function of ``rule`` (:data:`SPECS`), imported."""
    from importlib import import_module

    module, name = SPECS[rule].split(":")
    return getattr(import_module(module), name)


def snakemake_spec(smk):
    """The spec of the job a workflow script runs (``snakemake`` object ``smk``: its rule, resolved config and
    wildcards)."""
    return spec_function(smk.rule)(smk.config, **dict(smk.wildcards.items()))


def infile(default=None):
    """A field of files the job reads (a path, a list of paths, a mapping of them, or ``None``)."""
    return field(default=default, metadata={"role": "input"})


def outfile(default=None):
    """A field of files the job writes."""
    return field(default=default, metadata={"role": "output"})


def param(default=None):
    """A field of config values the job's result depends on."""
    return field(default=default, metadata={"role": "param"})


def _files(value) -> list[str]:
    """The paths of a file field, flattened in order (``None``: none)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [p for v in value.values() for p in _files(v)]
    return [p for v in value for p in _files(v)]


def canonical(value) -> str:
    """``value`` as canonical JSON (sorted keys): reordering or reformatting the config file then changes no param."""
    return json.dumps(value, sort_keys=True)


def as_params(value):
    """``value`` as it comes back from canonical JSON (tuples as lists, keys as strings): a spec holds its settings
    in this form, so that a job runs the same whether its spec was built from the config or read back."""
    return json.loads(canonical(value))


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """Base of the job specs: the files and settings of a job by the roles of its fields."""

    def _role(self, role: str) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("role") == role}

    def inputs(self) -> dict[str, list[str]]:
        """The files the job reads, by field (the rule's named inputs)."""
        return {name: _files(value) for name, value in self._role("input").items()}

    def outputs(self) -> dict[str, list[str]]:
        """The files the job writes, by field (the rule's named outputs)."""
        return {name: _files(value) for name, value in self._role("output").items()}

    def params(self) -> str:
        """The job's settings as one canonical JSON text (the rule's param ``settings``)."""
        return canonical(self._role("param"))


#: The keys of a source entry that no dump, training or calibration reads: adding a shifted or out-of-distribution
#: test set, a label shift or a seed reruns none of them (docs/shift.md, docs/label_shift.md; the dump of a data
#: source takes its seeds as a setting of their own).
LATER_KEYS = ("shifts", "ood", "label_shift", "seeds")


#: The keys of a source entry that only the figures read (the reliability diagrams name the classes by
#: ``class_names``): adding or changing them reruns those figures and no dump, calibration or evaluation.
FIGURE_KEYS = ("class_names",)


def job_entry(source, *keys: str) -> dict:
    """The entry of ``source`` (a :class:`~calbench.data.entry.Source`) as a job that does not read ``keys`` reads it
    (and stores it in its files): without ``keys`` and :data:`FIGURE_KEYS`, in the params' form (:func:`as_params`),
    so that a change of them is no change of the job's settings."""
    return as_params(source.without(*keys, *FIGURE_KEYS))


def dump_entry(source) -> dict:
    """The entry of ``source`` as its dump, training and perturbed-calibration jobs read it: without
    :data:`LATER_KEYS` (:func:`job_entry`)."""
    return job_entry(source, *LATER_KEYS)


def source_data(source) -> list[str]:
    """The digest table of the files a source's entry names (an import's files, a model's local weights; rule
    source_digest) and an image folder's manifest (rule image_manifest): inputs of the jobs that read them, so that a
    change of a file's content reruns what depends on it, and a change of its modification time alone nothing
    (:mod:`calbench.data.digests`)."""
    from calbench.data.inputs import source_files
    from calbench.jobs import paths

    digests = [paths.SOURCE_DIGEST.format(source=source.name)] if source_files(dict(source.entry)) else []
    return digests + ([paths.IMAGE_MANIFEST.format(source=source.name)] if source.is_imagefolder else [])


def split_file(source, seed: int) -> str | None:
    """A pooled source's drawn test rows for ``seed`` (rule draw_split); ``None`` for sources with fixed parts."""
    from calbench.jobs import paths

    return paths.SPLIT.format(source=source.name, seed=seed) if source.split else None

