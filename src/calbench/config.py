"""The one place that reads a workflow config: :func:`load`.

``load`` validates the config against the package's ``config.schema.yaml`` (JSON Schema 2020-12),
fills every default from that schema alone, fills the defaults that depend on the config itself
(a figure's sources default to every source), cross-checks figures, studies and the paper comparison
against the config's sources, methods and metrics, checks each method's settings against the
constraints its class declares (``_parameter_constraints``), and refuses what no job can produce (a
true-map metric without a synthetic source, a method whose inputs no source has). Every error is one line naming the key
and what is allowed, so the message alone says how to fix the config. The workflow's rule files
and the command line only read its result.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from calbench import corruptions
from calbench.data.entry import has_embeddings as source_has_embeddings  # noqa: F401 (read here by tests)
from calbench.data.entry import has_train as source_has_train  # noqa: F401
from calbench.data.entry import is_model
from calbench.data.shifts import shift_sets  # noqa: F401 (the workflow's rule files read it here)
from calbench.methods import make, split_chain
from calbench.methods.constraints import InvalidSetting
from calbench.methods.registry import chain_needs, resolved
from calbench.methods.registry import runs_on as method_runs_on  # noqa: F401 (the rule files read it here)
from calbench.metrics import check_metric_ids, lookup

#: The config schema, package data: found through the installed package, as the workflow finds it too.
SCHEMA = resources.files("calbench") / "config.schema.yaml"
#: Sections that are on when present; ``null`` (e.g. ``figures: {simplex: null}``) means absent.
OPTIONAL_SECTIONS = ("paper_comparison", "bootstrap", "figures", "studies")


class ConfigError(ValueError):
    """A config that cannot run; the message names the key and the fix."""


def _key_path(error) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def _describe(error) -> str:
    if error.validator == "additionalProperties" and error.schema.get("properties"):
        allowed = ", ".join(sorted(error.schema["properties"]))
        return f"{error.message}; allowed keys here: {allowed}"
    if error.validator == "enum":
        return f"{error.instance!r} is not allowed; allowed values: {', '.join(map(str, error.validator_value))}"
    if error.validator == "const":
        return f"{error.instance!r} is not allowed; the only allowed value: {error.validator_value}"
    if error.validator == "pattern" and _key_path(error).startswith("methods"):
        return f"{error.instance!r} is not a method name (lower-case names joined by '+')"
    if error.validator == "pattern" and _key_path(error) == "sources":
        return (f"{error.instance!r} is not a source name: a name is a folder and file name of its results "
                "(results/dumps/<name>.h5), of letters, digits, '_', '-' and '.', and not '.' or '..'")
    if error.validator == "uniqueItems":
        repeated = sorted({repr(v) for i, v in enumerate(error.instance) if v in error.instance[:i]})
        return (f"{', '.join(repeated)} given more than once in {error.instance}; list each once (a repeated "
                "entry would run, or count in every table, twice)")
    return error.message


#: The most nodes a YAML document may expand to once its aliases are replaced by what they name (the default
#: config has about 2,000): a few hundred bytes of nested aliases can name billions (an "alias bomb").
MAX_YAML_NODES = 200_000


def _expanded_nodes(node, memo: dict) -> int:
    """The nodes of ``node`` with every alias expanded, each shared node counted as often as it is named."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a node that holds itself expands to nothing more
    count = 1
    if isinstance(node, yaml.MappingNode):
        count += sum(_expanded_nodes(k, memo) + _expanded_nodes(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        count += sum(_expanded_nodes(item, memo) for item in node.value)
    memo[id(node)] = count
    return count


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that gives one key twice (the safe loader keeps the last silently:
    a source written twice would run once, with the second entry) and a document whose aliases expand beyond
    :data:`MAX_YAML_NODES` nodes. Merge keys (``<<: *defaults``) are merged first; a key the mapping gives
    itself overrides a merged one (YAML's rule), but a key given twice by the mapping itself is refused."""

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None and (count := _expanded_nodes(node, {})) > MAX_YAML_NODES:
            raise yaml.constructor.ConstructorError(
                None, None, f"its aliases (*name) expand it to {count:,} nodes, more than {MAX_YAML_NODES:,}; write "
                "the repeated parts out, or use fewer nested aliases", node.start_mark)
        return node

    def construct_mapping(self, node, deep=False):
        own = [pair for pair in node.value if pair[0].tag != "tag:yaml.org,2002:merge"]
        if len(own) != len(node.value):
            self.flatten_mapping(node)
        seen: dict = {}
        for key_node, _ in own:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class says so
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in one mapping (lines {first} and "
                    f"{key_node.start_mark.line + 1}); keep one", key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


class _ConfigLoader(_UniqueKeyLoader):
    """:class:`_UniqueKeyLoader` for config files: every key is a string (YAML reads ``1``, ``on`` and dates as
    numbers, booleans and dates, which name no source, method or setting)."""

    def construct_mapping(self, node, deep=False):
        for key_node, _ in node.value:
            if key_node.tag != "tag:yaml.org,2002:merge":
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key_node.value!r} (line {key_node.start_mark.line + 1}) is not a name: YAML "
                        f"reads it as the {type(key).__name__} {key!r}; quote it: '{key_node.value}'",
                        key_node.start_mark)
        return super().construct_mapping(node, deep)


def read_yaml(text: str):
    """YAML ``text`` as every config, schema and setting is read: safe, and a key given twice in one mapping is a
    ``yaml.YAMLError`` naming both lines."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)


@functools.cache
def _schema() -> dict:
    return read_yaml(SCHEMA.read_text())


def load_schema() -> dict:
    """The config schema (a copy: parsing it costs ~0.1 s, so it is read once per process)."""
    return copy.deepcopy(_schema())


def read_config_file(path) -> dict:
    """The mapping of config file ``path``, read as :func:`read_yaml` reads (merge keys merged, aliases expanding to
    at most :data:`MAX_YAML_NODES` nodes) with every key a string; :class:`ConfigError` names the file and the
    problem (no such file, not YAML, a key twice, a key YAML reads as a number, boolean or date, an alias bomb, not
    a mapping, two sources whose names differ only in case)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        config = yaml.load(path.read_text(), Loader=_ConfigLoader)  # noqa: S506 (a SafeLoader subclass)
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as err:
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: a config is a mapping of keys (sources, methods, metrics, ...), got "
                          f"{type(config).__name__}")
    names: dict = {}
    for name in config.get("sources") or {} if isinstance(config.get("sources"), dict) else ():
        if name.casefold() in names:
            raise ConfigError(f"{path}: sources {names[name.casefold()]!r} and {name!r} differ only in case, so their "
                              f"results (results/dumps/{name}.h5, ...) would be one file where file names ignore "
                              "case (macOS, Windows); rename one")
        names[name.casefold()] = name
    return config


def _drop_null_sections(config: dict) -> None:
    """``key: null`` of an optional section (or of one figure or study) means the key is absent."""
    if "figures" in config and config["figures"] is None:
        config["figures"] = {}  # no figure at all; an absent key draws the default ones (the schema's default)
    for key in OPTIONAL_SECTIONS:
        if key in config and config[key] is None:
            del config[key]
    for key in ("figures", "studies"):
        if isinstance(config.get(key), dict):
            config[key] = {k: v for k, v in config[key].items() if v is not None}
    if isinstance(config.get("method_settings"), dict):
        config["method_settings"] = {k: v or {} for k, v in config["method_settings"].items()}


def _check_schema(config: dict, schema: dict) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if errors:
        deepest = max(errors, key=lambda e: len(list(e.absolute_path)))
        leaf = deepest.context and min(deepest.context, key=lambda e: len(list(e.absolute_path))) or deepest
        raise ConfigError(f"config key {_key_path(leaf)!s}: {_describe(leaf)}")


def _fill_schema_defaults(config: dict, schema: dict) -> None:
    """Set every absent key that has a ``default`` in the schema, at every depth (nested sections,
    ``$ref``-ed definitions, the ``then`` branch a source's ``type`` selects); ``config`` is valid."""
    properties = jsonschema.Draft202012Validator.VALIDATORS["properties"]

    def fill_then_descend(validator, props, instance, subschema):
        if isinstance(instance, dict):
            for key, prop in props.items():
                if isinstance(prop, dict) and "default" in prop and key not in instance:
                    instance[key] = copy.deepcopy(prop["default"])
        yield from properties(validator, props, instance, subschema)

    filler = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"properties": fill_then_descend})
    for _ in filler(schema).iter_errors(config):
        pass


def _fill_entry_defaults(entry: dict, seeds: list) -> None:
    """The defaults of a source entry that depend on the config: ``seeds`` (the config's), and a model source's
    ``normalize``: ImageNet statistics for published weights (``pretrained`` or ``weights``), else the statistics
    of the training split."""
    entry.setdefault("seeds", list(seeds))
    if is_model(entry) and "normalize" not in entry:
        entry["normalize"] = "imagenet" if entry["pretrained"] or entry.get("weights") else "dataset"


def complete_source(entry: dict, seeds=None) -> dict:
    """A copy of one valid source entry with every default filled, as :func:`load` fills the entries of a config
    whose ``seeds`` are ``seeds`` (for callers that build an entry without a config file: tests, notebooks)."""
    schema = load_schema()
    entry = copy.deepcopy(entry)
    _fill_schema_defaults(entry, {"$defs": schema["$defs"], "$ref": "#/$defs/source"})
    _fill_entry_defaults(entry, schema["properties"]["seeds"]["default"] if seeds is None else seeds)
    return entry


def _check_names(where: str, names, known, what: str) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"config key {where}: {unknown} not in the config's {what} ({', '.join(known)})")


def _check_methods(config: dict) -> None:
    for method in config["methods"]:
        try:
            parts = split_chain(method)
        except ValueError as err:
            raise ConfigError(f"config key methods: {err}") from None
        if "perturb" in parts:
            _check_perturb(config, method, parts)
    seen: dict[str, str] = {}
    for method in config["methods"]:
        same = seen.setdefault(resolved(method), method)
        if same != method:
            raise ConfigError(f"config key methods: {same!r} and {method!r} fit the same calibrator "
                              f"({resolved(method)}: an uncal stage is the identity, and {resolved(method)} "
                              "repeated is itself), so the tables would list one method twice; keep one of them")
    if "perturb" in config["method_settings"]:
        raise ConfigError("config key method_settings.perturb: the stage perturb has no settings; the perturbed "
                          "calibration set's levels and clipping are the config key perturbed_cal "
                          "(perturbed_cal: {levels: 6, clip: false}; config/README.md)")
    for name, settings in config["method_settings"].items():
        try:
            make(name, **settings)
        except InvalidSetting as err:
            raise ConfigError(f"config key method_settings.{name}.{err.key}: {err.detail}") from None
        except ValueError as err:
            raise ConfigError(f"config key method_settings.{name}: {err}") from None


def _check_perturb(config: dict, method: str, parts: list) -> None:
    """``perturb`` (Tomani et al. 2021) changes the calibration data of the stages after it: it starts a chain
    of at least one calibrator, and it needs the images of a train/pretrained source."""
    if parts[0] != "perturb" or len(parts) < 2 or parts.count("perturb") > 1:
        raise ConfigError(f"config key methods: {method!r}: 'perturb' perturbs the calibration images the "
                          "calibrators after it fit on; write it once, first, before a calibrator (e.g. perturb+ts)")
    if not any(is_model(e) for e in (config.get("sources") or {}).values()):
        raise ConfigError(f"config key methods: {method!r} needs the images of a train or pretrained source, and "
                          "sources has none (import and download sources carry no images to perturb)")


def _check_metrics(where: str, ids) -> None:
    try:
        check_metric_ids(ids)
    except ValueError as err:
        raise ConfigError(f"config key {where}: {err}") from None


def _check_label_shift_metrics(config: dict) -> None:
    """The metrics of each source's label-shifted sets: known ids, none that needs a true calibration map or the
    uncalibrated outputs (docs/label_shift.md)."""
    from calbench.metrics.definitions import adapted_base

    for name, entry in config["sources"].items():
        ids = (entry.get("label_shift") or {}).get("metrics", [])
        where = f"sources.{name}.label_shift.metrics"
        _check_metrics(where, ids)
        for metric_id in ids:
            family, groups = lookup(metric_id)
            try:
                if "base" in groups:
                    adapted_base(metric_id, groups["base"])
                elif family.needs_true_probs or family.needs_uncal_probs:
                    raise ValueError(f"metric {metric_id!r} needs a true calibration map or the uncalibrated outputs, "
                                     "which label-shifted sets are evaluated without")
            except ValueError as err:
                raise ConfigError(f"config key {where}: {err}") from None


def source_has_true_map(entry: dict) -> bool:
    """Synthetic sources know the true calibration map (``true_probs``; ``true_ce.*``, ``cmee.*``)."""
    return entry["type"] == "synthetic"


def method_needs(method: str) -> set[str]:
    """What the stages of ``method`` read beyond the logits (the values of :data:`calbench.methods.base.NEEDS`)."""
    return set(chain_needs(method)) - {"logits"}


def _source_list(sources: dict, names) -> str:
    return ", ".join(f"{name} ({sources[name]['type']})" for name in names)


def _check_true_map_metrics(where: str, metrics, sources: dict, names) -> None:
    """A metric that compares with the true calibration map needs a source that has one among ``names``."""
    if any(source_has_true_map(sources[name]) for name in names):
        return
    for metric in metrics:
        if lookup(metric)[0].needs_true_probs:
            raise ConfigError(f"config key {where}: {metric} compares with the true calibration map, which only "
                              "synthetic sources know, and none of the sources has one: "
                              f"{_source_list(sources, names)}; drop {metric} or add a `type: synthetic` source")


def _check_combinations(config: dict) -> None:
    """Refuse what no job can produce: a metric of the true map without a synthetic source, a method that no
    source has the inputs of (KCal: embeddings and a training split)."""
    sources = config["sources"]
    _check_true_map_metrics("metrics", config["metrics"], sources, list(sources))
    for method in config["methods"]:
        if not any(method_runs_on(method, entry) for entry in sources.values()):
            needs = " and ".join("a training split" if n == "train" else n for n in sorted(method_needs(method)))
            raise ConfigError(f"config key methods: {method} needs {needs}, which none of the sources has: "
                              f"{_source_list(sources, sources)}; drop {method}, or add a source that has them (a "
                              "`train` source, or import files with `embeddings` and a `train` split)")
    curve = config.get("studies", {}).get("learning_curve")
    if curve is not None:
        _check_true_map_metrics("studies.learning_curve.metrics", curve["metrics"], sources, curve["sources"])


def _resolve_figures_and_studies(config: dict) -> None:
    """Fill the defaults that are the config's own lists, and check every name against them."""
    sources, methods, metrics = list(config["sources"]), list(config["methods"]), list(config["metrics"])
    figures = config.get("figures", {})
    for key in ("reliability", "simplex"):
        if key in figures:
            section = figures[key]
            section.setdefault("sources", sources)
            section.setdefault("methods", methods)
            _check_names(f"figures.{key}.sources", section["sources"], sources, "sources")
            _check_names(f"figures.{key}.methods", section["methods"], methods, "methods")
    chosen = figures.get("reliability", {}).get("seeds")
    for source in figures["reliability"]["sources"] if chosen else []:
        missing = sorted(set(chosen) - set(config["sources"][source]["seeds"]))
        if missing:
            raise ConfigError(f"config key figures.reliability.seeds: source {source!r} has no seed {missing}; its "
                              f"seeds are {config['sources'][source]['seeds']}")
    if "critical_difference" in figures:
        section = figures["critical_difference"]
        section.setdefault("metrics", metrics)
        _check_names("figures.critical_difference.metrics", section["metrics"], metrics, "metrics")
    curve = config.get("studies", {}).get("learning_curve")
    if curve is not None:
        _check_names("studies.learning_curve.sources", curve["sources"], sources, "sources")
        for method in curve["methods"]:
            try:
                split_chain(method)
            except ValueError as err:
                raise ConfigError(f"config key studies.learning_curve.methods: {err}") from None
        _check_metrics("studies.learning_curve.metrics", curve["metrics"])
    comparison = config.get("paper_comparison")
    if comparison is not None:
        _check_names("paper_comparison.source", [comparison["source"]], sources, "sources")


def _check_shifts(config: dict) -> None:
    """Shifted test sets need the source's images (train/pretrained) or files (import/download); a severity
    appears once per family."""
    for name, entry in (config.get("sources") or {}).items():
        if not isinstance(entry, dict) or "shifts" not in entry:
            continue
        if entry.get("type") == "synthetic":
            raise ConfigError(f"config key sources.{name}.shifts: a synthetic source has neither images to corrupt "
                              "nor files of shifted test sets; shifts belong to train/pretrained sources (corruption "
                              "family → severities) or import/download sources (name → [{severity, files}])")
        for family, items in (entry["shifts"] or {}).items():
            severities = [i.get("severity") if isinstance(i, dict) else i for i in items or []]
            if len(set(map(str, severities))) < len(severities):
                raise ConfigError(f"config key sources.{name}.shifts.{family}: severities {severities} repeat one")
            for k, item in enumerate(items or []):
                if isinstance(item, dict) and "rows" in item and "aligned" in item:
                    raise ConfigError(f"config key sources.{name}.shifts.{family}.{k}: give `rows` (the pool row of "
                                      "each row) or `aligned: true` (row i copies pool row i), not both")
            if is_model(entry) and family in corruptions.FAMILIES:
                wrong = [s for s in severities if s not in corruptions.levels(family)]
                if wrong:
                    raise ConfigError(f"config key sources.{name}.shifts.{family}: severities {wrong} are not among "
                                      f"{family}'s 1-{len(corruptions.levels(family))}"
                                      + ("" if family.endswith("_full") else
                                         " (MNIST-C publishes one severity)" if family.startswith("mnistc_") else
                                         " (Ovadia et al.'s full grids: rotate_full 1-12, translate_full 1-13)"))


def _check_ood(config: dict) -> None:
    """An out-of-distribution set of a model source is another dataset's images (or noise); a download source
    takes none (its files come by URL)."""
    for name, entry in (config.get("sources") or {}).items():
        if not isinstance(entry, dict) or not entry.get("ood"):
            continue
        if not (is_model(entry) or entry.get("type") == "import"):
            raise ConfigError(f"config key sources.{name}.ood: out-of-distribution sets belong to train/pretrained "
                              "sources ({dataset: D} or {noise: uniform}) and import sources ({logits: FILE.npy})")
        for set_name, spec in entry["ood"].items():
            if isinstance(spec, dict) and "dataset" in spec and spec["dataset"] == entry.get("dataset"):
                raise ConfigError(f"config key sources.{name}.ood.{set_name}.dataset: {spec['dataset']} is the "
                                  "source's own dataset; an out-of-distribution set is another one")


def _check_label_shift_kinds(config: dict) -> None:
    """A source's ``label_shift`` names at least one kind of prior (before the schema, whose message would name one
    of the two only)."""
    for name, entry in (config.get("sources") or {}).items():
        spec = entry.get("label_shift") if isinstance(entry, dict) else None
        if isinstance(spec, dict) and not ({"dirichlet", "tweak_one"} & set(spec)):
            raise ConfigError(f"config key sources.{name}.label_shift: give `dirichlet` (concentrations α, e.g. "
                              "[0.1, 1.0]) and/or `tweak_one` (one class's prior ρ, e.g. [0.9]) (docs/label_shift.md)")


def load(config) -> dict:
    """The resolved config of ``config`` (a YAML file path, or a mapping as Snakemake holds it).

    Raises :class:`ConfigError` with a one-line message on the first problem. The result has every
    schema default filled, ``null`` optional sections removed and ``method_settings`` entries as
    dicts; the input mapping is not modified.
    """
    config = copy.deepcopy(dict(config)) if isinstance(config, Mapping) else read_config_file(config)
    _drop_null_sections(config)
    _check_shifts(config)
    _check_ood(config)
    _check_label_shift_kinds(config)
    schema = load_schema()
    _check_schema(config, schema)
    _fill_schema_defaults(config, schema)
    for entry in config["sources"].values():
        _fill_entry_defaults(entry, config["seeds"])
    _check_methods(config)
    _check_metrics("metrics", config["metrics"])
    _check_label_shift_metrics(config)
    _resolve_figures_and_studies(config)
    _check_combinations(config)
    return config


