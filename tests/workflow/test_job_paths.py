"""The two ways to run a job, the workflow's scripts and ``python -m calbench job dump|calibrate|evaluate``, build
its spec with the same functions (each stage's ``spec``, calbench.jobs.spec): every job kind the command line
offers gives the same files both ways, on a source with fixed parts and on a pooled one with label-shifted test
sets. (The chain ``perturb+ts`` on a model source: tests/unit/test_perturb_cal.py.)"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from calbench.__main__ import main
from calbench.data import store
from calbench.data.store import PEAK_KEY
from calbench.jobs import paths
from conftest import run_snakemake
from workflow_helpers import tiny_config

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("job_paths")]

METHODS = ["uncal", "ts", "ts+hist"]
SEEDS = [0, 1]


def _config(folder) -> dict:
    rng = np.random.default_rng(0)
    scores = rng.normal(scale=1.5, size=(600, 4))
    probs = np.exp(scores) / np.exp(scores).sum(1, keepdims=True)
    np.save(folder / "logits.npy", (2.0 * scores).astype(np.float32))
    np.save(folder / "labels.npy", (rng.random(600)[:, None] > probs.cumsum(1)).sum(1))
    config = tiny_config(methods=METHODS, seeds=SEEDS)
    config["sources"]["pooled"] = {
        "type": "import", "format": "npy", "split": {"cal_size": 300},
        "files": {"logits": str(folder / "logits.npy"), "labels": str(folder / "labels.npy")},
        "label_shift": {"dirichlet": [0.5], "draws": 1, "metrics": ["acc", "nll"]}}
    return config


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """One config run by Snakemake in one folder and job by job through the command line in another."""
    base = tmp_path_factory.mktemp("job_paths")
    config = _config(base)
    workflow, cli = base / "workflow", base / "cli"
    run_snakemake(workflow, config)
    cli.mkdir()
    (cli / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return workflow, cli, config


def _cli(folder, *args):
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        assert main(["job", *args, "--config", "config.yaml"]) == 0


def _arrays(path) -> dict:
    return {(group, field): value for group in store.list_groups(path)
            for field, value in store.read_group(path, group).items()}


def test_every_job_kind_of_the_command_line_writes_what_the_workflow_writes(both, capsys):
    workflow, cli, config = both
    for source in config["sources"]:
        _cli(cli, "dump", "--source", source)
        dump = paths.DUMP.format(source=source)
        expected, got = _arrays(workflow / dump), _arrays(cli / dump)
        assert expected.keys() == got.keys()
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{dump} {key}")
        for method in METHODS:
            for seed in SEEDS:
                where = {"source": source, "method": method, "seed": seed}
                _cli(cli, "calibrate", "--source", source, "--method", method, "--seed", str(seed))
                _cli(cli, "evaluate", "--source", source, "--method", method, "--seed", str(seed))
                calibrated = paths.CALIBRATED.format(**where)
                for part, value in store.read_calibrated(workflow / calibrated, "test").items():
                    np.testing.assert_array_equal(store.read_calibrated(cli / calibrated, "test")[part], value,
                                                  err_msg=f"{calibrated} {part}")
                calibrator = paths.CALIBRATOR.format(**where)
                assert (cli / calibrator).read_bytes() == (workflow / calibrator).read_bytes(), calibrator
                metrics = paths.METRICS.format(**where)
                records = [json.loads((folder / metrics).read_text()) for folder in (workflow, cli)]
                for record in records:
                    record.pop(PEAK_KEY)
                assert records[0] == records[1], where
                if source == "pooled":  # the saved calibrator reached the label-shifted sets
                    assert records[1]["shifts"] and all(name.startswith("prior/") for name in records[1]["shifts"])
    # the pooled source's split was drawn by the command line as rule draw_split draws it
    for seed in SEEDS:
        split = paths.SPLIT.format(source="pooled", seed=seed)
        np.testing.assert_array_equal(np.load(cli / split), np.load(workflow / split))


def test_a_source_or_method_the_config_lacks_is_a_one_line_error(both, capsys, monkeypatch):
    monkeypatch.chdir(both[1])
    assert main(["job", "calibrate", "--config", "config.yaml", "--source", "nope", "--method", "ts",
                 "--seed", "0"]) == 1
    assert "no source 'nope' in config key sources (tiny, pooled)" in capsys.readouterr().err
    assert main(["job", "calibrate", "--config", "config.yaml", "--source", "tiny", "--method", "tss",
                 "--seed", "0"]) == 1
    assert "--method 'tss'" in capsys.readouterr().err

