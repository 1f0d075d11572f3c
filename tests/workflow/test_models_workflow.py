"""Workflow: a `train` source trains for one epoch, dumps train/cal/test, and KCal runs on it."""

from __future__ import annotations

import pytest

from calbench.data import store
from conftest import dry_run_jobs, run_snakemake

pytest.importorskip("torch", reason="train sources and KCal need torch: pip install 'calbench[models]'")

CONFIG = {
    "seeds": [0],
    "sources": {
        "digits_tiny": {
            "type": "train", "dataset": "digits", "sizes": {"train": 150, "cal": 100, "test": 100},
            "model": "timm:vit_tiny_patch16_224",
            "model_kwargs": {"img_size": 8, "patch_size": 4, "in_chans": 1, "depth": 1, "embed_dim": 16,
                             "num_heads": 2},
            "recipe": {"epochs": 1, "batch_size": 50},
        },
        "synthetic": {"type": "synthetic", "task": "planted_temperature", "n_cal": 200, "n_test": 200},
    },
    "methods": ["uncal", "kcal", "kcal_logits"],
    "method_settings": {"kcal": {"steps_per_epoch": 5, "max_epochs": 2, "n_folds": 3},
                        "kcal_logits": {"steps_per_epoch": 5, "max_epochs": 2, "n_folds": 3}},
    "metrics": ["acc", "nll", "ece.cw.em15.l1"],
    "figures": None,  # the source and KCal are the point: no reliability diagrams
}


@pytest.mark.workflow
def test_train_source_trains_dumps_and_feeds_kcal(tmp_path):
    run_snakemake(tmp_path, CONFIG)
    dump = tmp_path / "results" / "dumps" / "digits_tiny.h5"
    assert store.list_groups(dump) == ["cal", "test", "train"]
    assert store.read_group(dump, "train", ["embeddings"])["embeddings"].shape == (150, 16)
    assert (tmp_path / "results" / "models" / "digits_tiny" / "model.pt").exists()
    assert not (tmp_path / "results" / "models" / "digits_tiny" / "checkpoint.pt").exists()
    assert "epoch 1/1" in (tmp_path / "logs" / "train" / "digits_tiny.log").read_text()
    table = (tmp_path / "results" / "tables" / "metrics_long.csv").read_text()
    assert "digits_tiny,kcal," in table and "digits_tiny,kcal_logits," in table
    # The methods that learn from a training split skip the synthetic source, which has none.
    assert "synthetic,kcal" not in table and "synthetic,uncal," in table
    assert dry_run_jobs(tmp_path) == {}
