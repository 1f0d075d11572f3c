"""Validate a workflow config before any job runs.

Structural checks come from ``workflow/schemas/config.schema.yaml`` (JSON Schema 2020-12); the
semantic ones (method names and their settings, metric ids) ask the registries. Every error names
the key and what is allowed, so the message alone says how to fix the config.
"""

from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml

from calbench.methods import make, split_chain
from calbench.metrics import check_metric_ids


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
    if error.validator == "pattern" and _key_path(error).startswith("methods"):
        return f"{error.instance!r} is not a method name (lower-case names joined by '+')"
    return error.message


def load_schema(path) -> dict:
    return yaml.safe_load(Path(path).read_text())


def apply_defaults(config: dict) -> dict:
    """Fill the top-level defaults the schema declares (seeds, method_settings, downloads_dir)."""
    config.setdefault("seeds", [0])
    config.setdefault("method_settings", {})
    config.setdefault("downloads_dir", "resources/downloads")
    for name, settings in list(config["method_settings"].items()):
        config["method_settings"][name] = settings or {}
    return config


def validate(config: dict, schema_path) -> dict:
    """Raise :class:`ConfigError` on the first problem; return the config with defaults filled."""
    validator = jsonschema.Draft202012Validator(load_schema(schema_path))
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if errors:
        deepest = max(errors, key=lambda e: len(list(e.absolute_path)))
        leaf = deepest.context and min(deepest.context, key=lambda e: len(list(e.absolute_path))) or deepest
        raise ConfigError(f"config key {_key_path(leaf)!s}: {_describe(leaf)}")
    config = apply_defaults(config)
    for method in config["methods"]:
        try:
            split_chain(method)
        except ValueError as err:
            raise ConfigError(f"config key methods: {err}") from None
    for name, settings in config["method_settings"].items():
        try:
            make(name, **settings)
        except ValueError as err:
            raise ConfigError(f"config key method_settings.{name}: {err}") from None
    try:
        check_metric_ids(config["metrics"])
    except ValueError as err:
        raise ConfigError(f"config key metrics: {err}") from None
    return config


def chain_settings(config: dict, method: str) -> dict:
    """The config slice a method (or chain) job depends on: settings of each of its stages."""
    return {part: config["method_settings"].get(part, {}) for part in split_chain(method)}
