"""What validates, runs: `calbench.config.load` (so `validate` and `snakemake -n`) refuses up front, naming the
metric or method and the sources, every combination that no job can produce. (That every shipped config passes a
dry run: tests/workflow/test_job_specs.py, whose DAG of each one is a dry run.)"""

from __future__ import annotations

import pytest

from calbench.__main__ import main
from calbench.config import ConfigError, load
from conftest import run_snakemake, user_config

IMPOSSIBLE = {
    "true-map metric without a synthetic source": (
        {"metrics": ["nll", "true_ce.conf.l1"]},
        r"config key metrics: true_ce.conf.l1 compares with the true calibration map, .* none of the sources has "
        r"one: my_model \(import\); drop true_ce.conf.l1"),
    "cmee without a synthetic source": ({"metrics": ["cmee.conf.beta.l1"]}, "cmee.conf.beta.l1 compares with the true"),
    "kcal without embeddings": (
        {"methods": ["ts", "kcal"]},
        r"config key methods: kcal needs embeddings and a training split, which none of the sources has: "
        r"my_model \(import\)"),
    "a chain ending in kcal": ({"methods": ["ts+kcal"]}, "methods: ts\\+kcal needs embeddings and a training split"),
    "learning curve of a true-map metric on real logits": (
        {"sources": "with synthetic", "studies": {"learning_curve": {"sources": ["my_model"], "methods": ["ts"],
                                                                      "metrics": ["true_ce.cw.l1"], "sizes": [100]}}},
        r"studies.learning_curve.metrics: true_ce.cw.l1 compares .* my_model \(import\)"),
}


def _impossible(tmp_path, name):
    change, message = IMPOSSIBLE[name]
    config = user_config(tmp_path)
    change = dict(change)
    if change.pop("sources", None):
        config["sources"]["synthetic"] = {"type": "synthetic", "task": "lece3", "n_cal": 200, "n_test": 200}
    return {**config, **change}, message


@pytest.mark.parametrize("name", sorted(IMPOSSIBLE))
def test_load_refuses_what_no_job_can_produce(name, tmp_path):
    config, message = _impossible(tmp_path, name)
    with pytest.raises(ConfigError, match=message):
        load(config)


def test_a_true_map_metric_runs_where_some_source_has_the_map(tmp_path):
    """The default config's mix: true_ce on synthetic and real sources is computed where the map exists."""
    config = user_config(tmp_path, seeds=[0])
    config["sources"]["synthetic"] = {"type": "synthetic", "task": "lece3", "n_cal": 200, "n_test": 200}
    load({**config, "metrics": ["nll", "true_ce.conf.l1"]})


@pytest.mark.workflow
def test_a_real_logits_config_with_an_impossible_metric_is_refused_by_validate_and_a_dry_run(tmp_path, capsys):
    import yaml

    config, message = _impossible(tmp_path, "true-map metric without a synthetic source")
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config))
    assert main(["validate", str(tmp_path / "my.yaml")]) == 1
    assert "true_ce.conf.l1 compares with the true calibration map" in capsys.readouterr().err
    result = run_snakemake(tmp_path / "work", config, "-n", check=False)
    assert result.returncode != 0
    assert "calbench: invalid config: config key metrics: true_ce.conf.l1" in result.stdout + result.stderr

