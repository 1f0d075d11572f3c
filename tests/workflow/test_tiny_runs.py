"""End-to-end workflow runs on tiny configs: job counts, tables, a finished run plans nothing (what an edit reruns:
tests/workflow/test_reruns.py)."""

import numpy as np
import pandas as pd
import pytest
import yaml

import calbench
from calbench.__main__ import main
from calbench.data import splits, store
from conftest import REPO, dry_run_jobs, run_snakemake, shared_data

pytestmark = pytest.mark.workflow


def tiny_config(tmp_path):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 4)) * 3
    labels = rng.integers(4, size=400)
    np.save(tmp_path / "z.npy", logits)
    np.save(tmp_path / "y.npy", labels)
    return {
        "seeds": [0, 1],
        "sources": {
            "planted": {"type": "synthetic", "task": "planted_temperature", "num_classes": 4, "temperature": 3.0,
                        "n_cal": 300, "n_test": 300},
            "imported": {"type": "import", "format": "npy",
                         "files": {"logits": str(tmp_path / "z.npy"), "labels": str(tmp_path / "y.npy")},
                         "split": {"cal_fraction": 0.5}},
        },
        "methods": ["uncal", "ts", "ts+ets"],
        "method_settings": {"ts": {}},
        "metrics": ["acc", "nll", "ece.conf.em15.l1", "ece.cw.ew15.l1"],
        "figures": None,  # the tests count the tables' jobs (a config without the key draws reliability diagrams)
    }


def test_dry_run_counts_one_job_per_source_method_and_seed(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(tiny_config(tmp_path), sort_keys=False))
    # the pooled source's split is drawn once per seed (draw_split) for its calibrate jobs
    # the imported source's files enter by their digest table (source_digest)
    assert dry_run_jobs(tmp_path) == {"source_digest": 1, "dump_source": 2, "draw_split": 2, "calibrate": 12,
                                      "evaluate": 12, "aggregate": 1, "runtime_table": 1, "all": 1}


def test_full_run_writes_ranked_tables_and_then_plans_nothing(tmp_path, capsys):
    config = tiny_config(tmp_path)
    run_snakemake(tmp_path, config)
    long = pd.read_csv(tmp_path / "results/tables/metrics_long.csv")
    assert list(long.columns) == ["source", "method", "seed", "test_set", "metric", "value"]
    assert len(long) == 2 * 3 * 2 * 4
    nll = long[long.metric == "nll"].groupby(["source", "method"])["value"].mean().unstack()
    assert (nll["ts"] < nll["uncal"]).all()
    table = (tmp_path / "results/tables/nll.md").read_text()
    assert "| in best group |" in table and "| planted" in table  # 3 methods, 2 sources: methods as rows
    attrs = store.read_attrs(tmp_path / "results/calibrated/planted/ts/seed0.h5")
    assert abs(yaml.safe_load(attrs["fitted"])["temperature"] - 3.0) < 0.5
    saved = calbench.load(tmp_path / "results/calibrators/planted/ts+ets/seed1.safetensors")  # usable outside
    test = splits.load_split(tmp_path / "results/dumps/planted.h5", 1, None)["test"]
    written = store.read_calibrated(tmp_path / "results/calibrated/planted/ts+ets/seed1.h5", "test")["probs"]
    # the calibrated file stores the float64 probabilities the saved calibrator computes (docs/runtime.md)
    np.testing.assert_allclose(saved.predict_proba(test["logits"]), written, rtol=1e-12, atol=1e-300)
    # a calibrated file keeps only the calibration rows' index, not their outputs
    assert set(store.read_group(tmp_path / "results/calibrated/planted/ts/seed0.h5", "cal")) == {"index"}
    assert len(list(tmp_path.glob("results/calibrators/*/*/seed*.safetensors"))) == 12
    assert main(["recommend", str(tmp_path / "results"), "--metric", "nll"]) == 0  # on this finished run
    planted = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("planted:"))
    assert planted.startswith(("planted: ts ", "planted: ts+ets ")), planted
    assert dry_run_jobs(tmp_path) == {}  # (what an edit reruns: tests/workflow/test_reruns.py)


def test_cifar_config_downloads_and_checks_the_public_logits(tmp_path):
    """config/cifar.yaml with its GitHub URLs replaced by file:// URLs into ../shared/data."""
    config = yaml.safe_load((REPO / "config/cifar.yaml").read_text())
    keep = ["cifar10_resnet-20", "cifar100_resnet-20"]
    config["sources"] = {name: config["sources"][name] for name in keep}
    for name, entry in config["sources"].items():
        for field, location in entry["files"].items():
            location["url"] = shared_data("logits", name, location["url"].rsplit("/", 1)[-1]).as_uri()
    config.update(seeds=[0], methods=["uncal", "ts"], metrics=["acc", "nll", "ece.conf.em15.l1"])
    run_snakemake(tmp_path, config, "--config", f"downloads_dir={tmp_path / 'cache'}")
    for name, accuracy in [("cifar10_resnet-20", 0.9260), ("cifar100_resnet-20", 0.6883)]:
        pool = store.read_group(tmp_path / f"results/dumps/{name}.h5", "all")
        assert np.mean(pool["logits"].argmax(1) == pool["labels"]) == pytest.approx(accuracy, abs=5e-5)
    long = pd.read_csv(tmp_path / "results/tables/metrics_long.csv")
    nll = long[long.metric == "nll"].set_index(["source", "method"])["value"]
    for name in keep:
        assert nll[(name, "ts")] < nll[(name, "uncal")]
