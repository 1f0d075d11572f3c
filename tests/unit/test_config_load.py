"""calbench.config.load and `validate`: a user's config stands alone, defaults come from the schema,
declared setting ranges and the named files are checked before any job runs (issues 17 and 18)."""

import copy
import os
import re
import subprocess

import numpy as np
import pytest
import yaml

from calbench.__main__ import main
from calbench.config import ConfigError, load
from calbench.methods import make
from calbench.methods.constraints import InvalidSetting
from conftest import REPO, SNAKEMAKE, run_snakemake, user_config
from workflow_helpers import copy_repository

# ---- load: defaults from the schema alone, null sections, cross-checks --------------------------------------

def test_figures_are_drawn_by_default_and_null_draws_none(tmp_path):
    config = user_config(tmp_path)
    config.pop("figures", None)
    assert set(load(config)["figures"]) == {"reliability"}
    assert load({**config, "figures": None})["figures"] == {}
    with pytest.raises(ConfigError, match=r"figures.reliability.seeds: source 'my_model' has no seed \[3\]"):
        load({**config, "figures": {"reliability": {"seeds": [0, 3]}}})


def test_the_default_config_resolves_as_the_rules_used_to_fill_it():
    """The defaults report_common.smk and config.py filled before (the default run is unchanged)."""
    resolved = load(REPO / "config" / "config.yaml")
    figures = resolved["figures"]
    assert figures["reliability"] == {"bins": 15, "scheme": "em", "targets": ["conf", "cw"], "max_classes": 3,
                                      "axis": "auto",
                                      "methods": ["uncal", "ts", "ts+lece", "dir_odir", "kcal"],
                                      "sources": list(resolved["sources"])}
    assert figures["simplex"]["divisions"] == 15
    assert figures["critical_difference"] == {"test": "bonferroni-dunn", "alpha": 0.05, "friedman_alpha": 0.005,
                                              "metrics": resolved["metrics"]}
    assert resolved["studies"]["learning_curve"]["seed"] == 0 and resolved["method_settings"]["ts"] == {}


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update(figures={"reliability": {"methods": ["kcal"]}}),
     r"^config key figures.reliability.methods: \['kcal'\] not in the config's methods \(uncal, ts\)$"),
    (lambda c: c.update(figures={"simplex": {"sources": ["cifar"]}}),
     r"^config key figures.simplex.sources: \['cifar'\] not in the config's sources \(my_model\)$"),
    (lambda c: c.update(studies={"learning_curve": {"sources": ["my_model"], "methods": ["ts"], "sizes": [9],
                                                    "metrics": ["ece.conf.em.l1"]}}),
     r"^config key studies.learning_curve.metrics: unknown metric id"),
    (lambda c: c.update(paper_comparison={"table": "lece_table1", "source": "other"}),
     r"^config key paper_comparison.source: \['other'\] not in the config's sources"),
    (lambda c: c.update(method_settings={"lece": {"q": 2}}),
     r"^config key method_settings.lece.q: 2 is not allowed; expected a number in \(0, 1\]$"),
    (lambda c: c.update(method_settings={"lece": {"grid": {"t": [0.0, -1]}}}),
     r"^config key method_settings.lece.grid.t: -1 is not allowed; expected a number in \[0, 1\]$"),
    (lambda c: c.update(method_settings={"pl_conf": {"max_pieces": 0}}),
     r"^config key method_settings.pl_conf.max_pieces: 0 is not allowed; expected None or an integer >= 1$"),
])
def test_load_cross_checks_names_and_declared_ranges_in_one_line(change, message, tmp_path):
    config = user_config(tmp_path)
    change(config)
    with pytest.raises(ConfigError, match=message):
        load(config)


def test_declared_ranges_guard_make_and_fit():
    with pytest.raises(InvalidSetting, match=r"^q: 2 is not allowed"):
        make("lece", q=2)
    with pytest.raises(InvalidSetting, match=r"^n_bins: 2.5 is not allowed; expected an integer >= 1"):
        make("hist").set_params(n_bins=2.5).fit(np.zeros((4, 2)), np.array([0, 1, 0, 1]))
    with pytest.raises(InvalidSetting, match=r"^reg_scale: 'Paper' is not allowed; expected one of 'paper', 'code'"):
        make("dir_l2", reg_scale="Paper")
    assert make("lece", q=1, t=0, grid=None).q == 1  # the closed ends are allowed


# ---- validate: the files, one line per problem --------------------------------------------------------------

def _broken(folder, name):
    config = user_config(folder, rows=400)
    entry = config["sources"]["my_model"]
    if name == "missing file":
        entry["files"]["labels"] = str(folder / "no_such_labels.npy")
    elif name == "cal_size too big":
        entry["split"] = {"cal_size": 50000}
    elif name == "test without labels":
        np.save(folder / "test_logits.npy", np.zeros((10, 5)))
        entry.pop("split")
        entry["files"] = {"cal": dict(entry["files"]), "test": {"logits": str(folder / "test_logits.npy")}}
    elif name == "probs declared as logits":
        logits = np.load(folder / "logits.npy")
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        np.save(folder / "probs.npy", probs)
        entry["files"]["logits"] = str(folder / "probs.npy")
    elif name == "q: 2":
        config.update(methods=["lece"], method_settings={"lece": {"q": 2}})
    return config


BROKEN = {
    "missing file": r"sources.my_model.files: .*no_such_labels.npy does not exist",
    "cal_size too big": r"sources.my_model.split.cal_size: must lie in \(0, 400\) for a pool of 400 rows, got 50000",
    "test without labels": r"sources.my_model.files: split 'test' has no labels",
    "probs declared as logits": r"declared `scores: logits` but every row is a probability vector; "
                                r"declare `scores: probs`",
    "q: 2": r"config key method_settings.lece.q: 2 is not allowed; expected a number in \(0, 1\]",
}


@pytest.mark.parametrize("name", BROKEN)
def test_validate_opens_the_files_and_prints_one_line_per_problem(name, tmp_path, capsys):
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(_broken(tmp_path, name)))
    assert main(["validate", str(path)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}: ")
    assert re.search(BROKEN[name], lines[0]), lines[0]


def test_validate_lists_every_problem_and_passes_a_good_config(tmp_path, capsys):
    config = user_config(tmp_path)
    config["sources"]["other"] = copy.deepcopy(config["sources"]["my_model"])
    config["sources"]["other"]["split"] = {"cal_size": 600}
    config["sources"]["my_model"]["files"]["logits"] = str(tmp_path / "gone.npy")
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["validate", str(path)]) == 1
    assert len(capsys.readouterr().err.splitlines()) == 2
    path.write_text(yaml.safe_dump(user_config(tmp_path)))
    assert main(["validate", str(path)]) == 0
    assert "valid (1 sources, 2 methods" in capsys.readouterr().out


# ---- the workflow: a user's config stands alone; snakemake -n stops early in one line ----------------------

@pytest.mark.workflow
@pytest.mark.parametrize("name", ["missing file", "cal_size too big", "q: 2"])
def test_dry_run_stops_on_a_bad_config_in_one_line(name, tmp_path):
    config = _broken(tmp_path, name)
    result = run_snakemake(tmp_path / "work", config, "-n", check=False)
    assert result.returncode != 0
    message = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("sources.")
               or line.startswith("calbench: invalid config: config key")]
    assert len(message) == 1 and re.search(BROKEN[name], message[0]), result.stderr[-2000:]


@pytest.mark.workflow
def test_the_readme_command_runs_a_user_config_from_the_repository_root(tmp_path):
    """README "Your own logits": `snakemake --cores 1 --configfile my.yaml` in the repository root (a
    copy of it, so that no results are left in the checkout) runs the user's source alone."""
    root = copy_repository(REPO, tmp_path / "calbench")
    data = tmp_path / "data"
    data.mkdir()
    config = user_config(data) | {"methods": ["ts"], "metrics": ["nll"], "figures": {"simplex": None}}
    (root / "my.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    run = lambda *args: subprocess.run([SNAKEMAKE, *args], cwd=root, env=env, capture_output=True,  # noqa: E731
                                       text=True, timeout=600)
    result = run("--cores", "1", "--configfile", "my.yaml")  # the README's command
    assert result.returncode == 0, result.stderr[-4000:]
    assert sorted(p.name for p in (root / "results" / "metrics").iterdir()) == ["my_model"]
    assert not (root / "results" / "figures").exists()  # the default config's figures are not inherited
    assert "| my_model |" in (root / "results" / "tables" / "nll.md").read_text()

    # with no --configfile the default config applies, the same as naming it (that every shipped config passes a
    # dry run: tests/workflow/test_job_specs.py)
    default, named = (run("-n", "--quiet", "rules", "--cores", "1", *args).stdout
                      for args in ((), ("--configfile", "config/config.yaml")))
    counts = lambda out: [line.split() for line in out.splitlines() if re.fullmatch(r"\S+ +\d+", line)]  # noqa: E731
    assert ["train_model", "2"] in counts(default) and counts(default) == counts(named)


def test_the_readme_config_for_your_own_logits_validates_as_written(tmp_path, capsys):
    """README "Your own logits": its YAML, with /data/my_model pointing at 8,000 × 20 logits, is valid."""
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index("**Your own logits.**"):].split("```yaml\n", 1)[1].split("```", 1)[0]
    user_config(tmp_path, rows=8000, classes=20)
    path = tmp_path / "my.yaml"
    path.write_text(block.replace("/data/my_model", str(tmp_path)))
    assert main(["validate", str(path)]) == 0, capsys.readouterr().out
