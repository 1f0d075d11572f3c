"""The schema is the one home of the config's defaults: ``calbench.config.load`` fills every one of them, and the
jobs, models, data modules and the workflow read the filled keys instead of repeating a default."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest

from calbench.config import complete_source, load, load_schema
from conftest import user_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = load_schema()
#: Defaults that ``load`` fills from the config itself (a source's seeds, a model source's normalisation).
CONFIG_DEPENDENT = {"seeds", "normalize"}


def _resolve(node: dict) -> dict:
    while "$ref" in node and set(node) <= {"$ref", "description"}:
        node = _pointer(node["$ref"])
    return node


def _pointer(ref: str) -> dict:
    node = SCHEMA
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def _defaulted_keys(node, found: set) -> set:
    """Every property name that has a ``default`` anywhere in the schema."""
    if isinstance(node, dict):
        for key, prop in (node.get("properties") or {}).items():
            if isinstance(prop, dict) and "default" in prop:
                found.add(key)
        for value in node.values():
            _defaulted_keys(value, found)
    elif isinstance(node, list):
        for value in node:
            _defaulted_keys(value, found)
    return found


DEFAULTED = _defaulted_keys(SCHEMA, set()) | CONFIG_DEPENDENT


def _missing(instance, node: dict, where: str) -> list[str]:
    """Keys with a schema default absent from ``instance``, at every depth (``$ref``, the ``then`` branch whose
    ``if`` the instance matches, additionalProperties of mappings such as ``sources``)."""
    node = _resolve(node)
    if not isinstance(instance, dict):
        return []
    out = []
    for key, prop in (node.get("properties") or {}).items():
        if isinstance(prop, dict) and "default" in prop and key not in instance:
            out.append(f"{where}.{key}")
        if key in instance and isinstance(prop, dict):
            out += _missing(instance[key], prop, f"{where}.{key}")
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        for key, value in instance.items():
            if key not in (node.get("properties") or {}):
                out += _missing(value, extra, f"{where}.{key}")
    for part in node.get("allOf", []):
        if "if" in part and jsonschema.Draft202012Validator(part["if"]).is_valid(instance):
            out += _missing(instance, part["then"], where)
    if "$ref" in node:
        out += _missing(instance, _pointer(node["$ref"]), where)
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "config").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads_with_every_schema_default_filled(path):
    config = load(path)
    assert _missing(config, SCHEMA, "config") == []
    for name, entry in config["sources"].items():
        assert "seeds" in entry, name
        if entry["type"] in ("train", "pretrained"):
            assert "normalize" in entry, name


def test_load_fills_every_schema_default_at_every_depth(tmp_path):
    """A user's config with a study and figures: every schema default filled (the values are the schema's), and
    the defaults that come from the config itself (a figure's lists, a study's metrics) as documented."""
    config = user_config(tmp_path)
    del config["sources"]["my_model"]["scores"]
    config["studies"] = {"learning_curve": {"sources": ["my_model"], "methods": ["ts"], "sizes": [50]}}
    config["figures"] = {"reliability": {}, "critical_difference": None}
    resolved = load(config)
    assert _missing(resolved, SCHEMA, "config") == []
    assert resolved["seeds"] == [0] and resolved["method_settings"] == {}
    assert resolved["downloads_dir"] == "resources/downloads"
    assert resolved["bootstrap"] == {"samples": 0, "level": 0.95, "interval": "basic"}
    assert resolved["sources"]["my_model"]["scores"] == "logits"
    assert resolved["sources"]["my_model"]["split"] == {"cal_size": 300, "stratify": True}
    assert resolved["studies"]["learning_curve"] == {"sources": ["my_model"], "methods": ["ts"], "sizes": [50],
                                                     "repeats": 10, "metrics": ["ece.conf.em15.l1", "acc"], "seed": 0}
    # a figure's lists default to the config's own; `null` switches a section off
    assert resolved["figures"] == {"reliability": {"sources": ["my_model"], "methods": ["uncal", "ts"],
                                                   "targets": ["conf", "cw"], "bins": 15, "scheme": "em",
                                                   "axis": "auto", "max_classes": 3}}
    assert "bootstrap" not in config and config["figures"]["critical_difference"] is None  # input untouched


def test_complete_source_fills_an_entry_as_load_does():
    entry = {"type": "train", "dataset": "digits", "model": "torchvision:resnet18", "weights": "w.pt"}
    filled = complete_source(entry, seeds=[3])
    assert _missing(filled, {"$ref": "#/$defs/source"}, "entry") == []
    assert filled["normalize"] == "imagenet" and filled["seeds"] == [3] and filled["device"] == "auto"
    assert entry == {"type": "train", "dataset": "digits", "model": "torchvision:resnet18", "weights": "w.pt"}


#: The code that reads a loaded config: it must not repeat a schema default.
READERS = sorted(
    [p for d in ("jobs", "models", "data", "cli") for p in (ROOT / "src" / "calbench" / d).rglob("*.py")]
    + list((ROOT / "workflow").rglob("*.smk")) + list((ROOT / "workflow" / "scripts").glob("*.py"))
    + list((ROOT / "workflow" / "report").glob("*.rst")) + [ROOT / "Snakefile"])
#: ``.get("key", default)`` or ``.setdefault("key", default)``.
DEFAULTED_GET = re.compile(r"""\.(?:get|setdefault)\(\s*["'](\w+)["']\s*,""")


def test_the_schema_defaults_are_not_repeated_in_the_code():
    repeated = [f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
                for path in READERS for text in [path.read_text()] for m in DEFAULTED_GET.finditer(text)
                if m.group(1) in DEFAULTED]
    assert repeated == [], "read the key the schema fills (calbench.config.load) instead:\n" + "\n".join(repeated)


def test_the_downloads_folder_is_named_once():
    default = SCHEMA["properties"]["downloads_dir"]["default"]
    named = [str(p.relative_to(ROOT)) for p in READERS if default in p.read_text()]
    assert named == []
