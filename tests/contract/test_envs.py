"""The conda environments of the rules (envs/) pin what pyproject.toml requires: envs/calbench.yaml every base
dependency but Snakemake's own packages (Snakemake runs outside the env), envs/torch.yaml the same plus the `models`
extra, each pinned to one version (``==``) inside pyproject.toml's range, and calbench itself from the checkout."""

from __future__ import annotations

import tomllib

import yaml
from packaging.requirements import Requirement

from conftest import REPO, load_script

#: Base dependencies that the rules' environments do not need: Snakemake and its executor run the workflow itself.
OUTSIDE = {"snakemake", "snakemake-executor-plugin-slurm"}


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _required(names) -> dict[str, Requirement]:
    return {(r := Requirement(spec)).name.lower(): r for spec in names}


def _pins(env: str) -> dict[str, str]:
    """``{package: version}`` of an env file's pip list, and its other entries checked."""
    deps = yaml.safe_load((REPO / "envs" / env).read_text())["dependencies"]
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert "-e ../" in pip, f"envs/{env}: calbench itself (-e ../) is not installed"
    pins = {}
    for line in pip:
        if line == "-e ../":
            continue
        requirement = Requirement(line)
        specs = list(requirement.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"envs/{env}: {line} is not pinned to one version"
        pins[requirement.name.lower()] = specs[0].version
    return pins


def _check(env: str, required: dict[str, Requirement]) -> None:
    pins = _pins(env)
    missing, extra = sorted(set(required) - set(pins)), sorted(set(pins) - set(required))
    assert not missing and not extra, f"envs/{env} differs from pyproject.toml: missing {missing}, extra {extra}"
    outside = [f"{name}=={pins[name]} (pyproject.toml: {required[name].specifier})" for name in pins
               if pins[name] not in required[name].specifier]
    assert not outside, f"envs/{env}: pins outside pyproject.toml's ranges: {outside}"


def test_the_calbench_env_pins_the_base_dependencies():
    base = {n: r for n, r in _required(_project()["dependencies"]).items() if n not in OUTSIDE}
    _check("calbench.yaml", base)


def test_the_torch_env_pins_them_and_the_models_extra():
    project = _project()
    required = {n: r for n, r in _required(project["dependencies"]).items() if n not in OUTSIDE}
    required |= _required(project["optional-dependencies"]["models"])
    _check("torch.yaml", required)
    base = _pins("calbench.yaml")
    assert {n: v for n, v in _pins("torch.yaml").items() if n in base} == base, "the two envs pin different versions"


def test_every_env_a_rule_names_exists():
    code_blocks = load_script("code_blocks")
    named = {r["conda"] for r in code_blocks.rules()} - {"method_conda_env"}
    assert named and all((REPO / env).is_file() for env in named), named
    assert {p.name for p in (REPO / "envs").glob("*.yaml")} == {"calbench.yaml", "torch.yaml"}
