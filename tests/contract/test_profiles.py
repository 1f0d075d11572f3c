"""The SLURM profiles: cluster settings only in profiles, every GPU rule covered by both GPU spellings,
the calibrate/evaluate group bundled, and snakemake accepting each profile."""

from __future__ import annotations

import re

import pytest
import yaml

from conftest import REPO, run_snakemake
from workflow_helpers import tiny_config

PROFILES = {name: yaml.safe_load((REPO / "profiles" / name / "config.yaml").read_text())
            for name in ("slurm", "slurm-gres")}
RULE_FILES = sorted((REPO / "workflow" / "rules").glob("*.smk")) + [REPO / "Snakefile"]


def _rule_blocks() -> dict[str, str]:
    blocks = {}
    for path in RULE_FILES:
        parts = re.split(r"^(?:rule|checkpoint) (\w+):\n", path.read_text(), flags=re.M)
        blocks.update(dict(zip(parts[1::2], parts[2::2])))
    return blocks


GPU_RULES = sorted(name for name, body in _rule_blocks().items() if re.search(r"^\s+gpu\s*=", body, flags=re.M))


class _Job:
    """What the SLURM plugin reads of a job: its resources."""

    def __init__(self, resources):
        self.resources = type("Resources", (dict,), {"__getattr__": dict.__getitem__})(resources)


def test_cluster_settings_live_only_in_profiles():
    for path in RULE_FILES:
        found = re.findall(r"\b(slurm_\w+|gres|constraint|cpus_per_gpu)\s*=", path.read_text())
        assert not found, f"{path.name} sets {found}: cluster settings belong in profiles/slurm*"


def test_the_two_profiles_differ_only_in_the_gpu_spelling():
    strip = lambda p: {k: v for k, v in p.items() if k != "set-resources"}  # noqa: E731
    assert strip(PROFILES["slurm"]) == strip(PROFILES["slurm-gres"])
    assert PROFILES["slurm"]["executor"] == "slurm"


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_the_calibrate_evaluate_group_is_bundled(name):
    groups = {g for body in _rule_blocks().values() for g in re.findall(r"^\s+group:\s*\n\s+\"(\w+)\"", body, re.M)}
    assert "calibrate_evaluate" in groups
    assert PROFILES[name]["group-components"] == {g: 20 for g in groups}


def test_every_gpu_rule_requests_gpus_in_both_spellings():
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    listed = set(PROFILES["slurm-gres"]["set-resources"])
    assert listed  # the GPU rules of the model sources (train_model, dump_model)
    for rule in sorted(listed | set(GPU_RULES)):  # the rules say gpu=1; slurm-gres translates, slurm needs nothing
        gpus = PROFILES["slurm"].get("set-resources", {}).get(rule, {})
        gres = PROFILES["slurm-gres"]["set-resources"][rule]
        assert set_gres_string(_Job({"gpu": 1, **gpus})) == " --gpus=1", rule
        assert set_gres_string(_Job({"gpu": 1, **gres})) == " --gres=gpu:1", rule


@pytest.mark.workflow
@pytest.mark.parametrize("name", sorted(PROFILES))
def test_snakemake_accepts_the_profile(name, tmp_path):
    result = run_snakemake(tmp_path, tiny_config(), "-n", "--workflow-profile", str(REPO / "profiles" / name))
    assert "calibrate" in result.stdout
