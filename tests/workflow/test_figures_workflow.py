"""The figure and study rules in the workflow: DAG targets, config errors, one tiny run and its report."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from conftest import dry_run_jobs, run_snakemake

pytestmark = pytest.mark.workflow


def tiny_config(**extra) -> dict:
    return {
        "seeds": [0],
        "sources": {"lece": {"type": "synthetic", "task": "lece3", "n_cal": 300, "n_test": 600},
                    "planted": {"type": "synthetic", "task": "planted_temperature", "num_classes": 4,
                                "temperature": 2.0, "n_cal": 300, "n_test": 600}},
        "methods": ["uncal", "ts"],
        "metrics": ["acc", "ece.conf.ew15.l1"],
        **extra,
    }


FIGURES = {"reliability": {"bins": 10}, "simplex": {"sources": ["lece"], "divisions": 6},
           "critical_difference": {"test": "nemenyi"}}
STUDIES = {"learning_curve": {"sources": ["planted"], "methods": ["uncal", "ts"], "sizes": [128, 256],
                              "repeats": 2}}


def dry_run(workdir, config) -> dict[str, int]:
    workdir.mkdir(exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return dry_run_jobs(workdir)


def test_figure_and_study_targets_in_the_dag(tmp_path):
    jobs = dry_run(tmp_path / "on", tiny_config(figures=FIGURES, studies=STUDIES))
    assert jobs["reliability_diagram"] == 4  # 2 sources × (conf, cw)
    assert jobs["simplex_map"] == 1 and "critical_difference" not in jobs  # 2 sources: too few to rank (Demšar)
    five = tiny_config(figures=FIGURES)
    # three more planted sources, each at its own temperature (a source on the same data as another is refused)
    five["sources"] |= {f"planted{k}": {**five["sources"]["planted"], "temperature": 2.0 + k} for k in (1, 2, 3)}
    assert dry_run(tmp_path / "five", five)["critical_difference"] == 1
    assert jobs["learning_curve"] == 2 and jobs["learning_curve_summary"] == 1
    plain = dry_run(tmp_path / "default", tiny_config())  # no `figures` key: the reliability diagrams
    assert plain["reliability_diagram"] == 4
    assert not {"simplex_map", "critical_difference", "learning_curve"} & set(plain)
    off = dry_run(tmp_path / "off", tiny_config(figures=None))
    assert not {"reliability_diagram", "simplex_map", "critical_difference", "learning_curve"} & set(off)


@pytest.mark.parametrize("section, key, message", [
    ("figures", {"simplex": {"sources": ["nowhere"]}}, "figures.simplex.sources: ['nowhere'] not in"),
    ("studies", {"learning_curve": {"sources": ["lece"], "methods": ["nope"], "sizes": [128]}}, "unknown method"),
])
def test_bad_figure_and_study_config_is_named(tmp_path, section, key, message):
    result = run_snakemake(tmp_path, tiny_config(**{section: key}), "-n", check=False)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr


def test_tiny_run_draws_every_figure_and_the_report(tmp_path):
    config = tiny_config(figures={**FIGURES, "reliability": {"targets": ["conf"], "bins": 10}},
                         studies={"learning_curve": {**STUDIES["learning_curve"], "sources": ["lece"],
                                                     "methods": ["ts"]}})
    del config["sources"]["planted"]  # one source keeps the run short
    run_snakemake(tmp_path, config)
    figures = tmp_path / "results" / "figures"
    for name in ("reliability/lece/conf.png", "simplex/lece.png", "learning_curve/lece.png"):
        assert (figures / name).read_bytes()[:4] == b"\x89PNG", name
    assert not (figures / "critical_difference").exists()  # one source: no ranks across sources
    bins = pd.read_csv(figures / "reliability" / "lece" / "conf.csv").query("kind == 'bin'")
    assert set(bins["method"]) == {"uncal", "ts"} and bins.groupby("method")["count"].sum().tolist() == [600, 600]
    assert "Too few sources to rank methods across sources" in (tmp_path / "results" / "tables" /
                                                                "average_ranks.md").read_text()
    summary = pd.read_csv(tmp_path / "results" / "studies" / "learning_curve" / "summary.csv")
    assert sorted(set(summary["size"])) == [128, 256] and (summary["repeats"] == 2).all()
    run_snakemake(tmp_path, None, "--report", "results/report.html")
    html = (tmp_path / "results" / "report.html").read_text()
    assert "bootstrap band" in html and "Learning curves" in html
