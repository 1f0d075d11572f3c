"""Shifted test sets of a trained model (docs/shift.md): the shift dump copies the held-out pool, corrupted, and
the model's accuracy falls with the severity."""

import json

import numpy as np
import pytest
import yaml

from calbench.config import load
from calbench.corruptions import FAMILIES, SEVERITIES, levels
from calbench.data import store
from calbench.jobs.model_specs import ModelDumpSpec, PerturbedCalSpec, TrainSpec
from calbench.jobs.shift import corrupted_images
from conftest import DOWNLOADS, REPO

jobs = pytest.importorskip("calbench.jobs.models", exc_type=ImportError)
model_dump = pytest.importorskip("calbench.jobs.model_dump", exc_type=ImportError)
model_shifts = pytest.importorskip("calbench.jobs.model_shifts", exc_type=ImportError)
perturbed_cal = pytest.importorskip("calbench.jobs.perturbed_cal", exc_type=ImportError)

DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["sources"]["digits_vit"]
#: The five-severity families (Ovadia et al.'s full grids are the same corruptions at more levels).
FIVE = [family for family in FAMILIES if levels(family) == SEVERITIES]


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    """The default config's digits ViT, trained for 20 of its 100 epochs, and every family at every severity."""
    folder = tmp_path_factory.mktemp("shift_models")
    entry = {**DEFAULT, "recipe": {**DEFAULT["recipe"], "epochs": 20},
             "shifts": {family: list(SEVERITIES) for family in FIVE}}
    entry = load({"sources": {"d": entry}, "methods": ["ts"], "metrics": ["acc"]})["sources"]["d"]
    run = {"source": "d", "entry": entry, "cache_dir": DOWNLOADS, "threads": 1}
    jobs.train_job(spec=TrainSpec(**run, model=folder / "model.pt"), progress=False)
    model_dump.dump_model_job(spec=ModelDumpSpec(**run, weights=folder / "model.pt", output=folder / "dump.h5"),
                              progress=False)
    model_shifts.dump_model_shifts_job(spec=ModelDumpSpec(**run, weights=folder / "model.pt",
                                                          output=folder / "shifts.h5"), progress=False)
    return folder, entry


def _accuracy(path, group):
    part = store.read_group(path, group, ["logits", "labels"])
    return np.mean(part["logits"].argmax(1) == part["labels"])


def test_shift_dump_holds_every_set_as_a_corrupted_copy_of_the_held_out_pool(shifted):
    folder, entry = shifted
    assert store.list_groups(folder / "shifts.h5") == sorted(f"shift/{f}/{s}" for f in FIVE for s in SEVERITIES)
    assert store.read_attrs(folder / "shifts.h5")["rows_of"] == "all"
    assert corrupted_images(folder / "shifts.h5") == (1, 8)  # the digits' own side: the constants' side
    pool = store.read_group(folder / "dump.h5", "all")
    rotated = store.read_group(folder / "shifts.h5", "shift/rotate/1")
    np.testing.assert_array_equal(rotated["labels"], pool["labels"])  # the same rows in the same order
    assert rotated["embeddings"].shape == pool["embeddings"].shape
    assert not np.allclose(rotated["logits"], pool["logits"])


def test_shifted_accuracy_falls_with_severity_on_the_default_trained_model(shifted):
    """Averaged over every five-severity family (Ovadia et al. Fig. 2), accuracy falls at every severity step (the
    elastic transform too, its severities scaled to grow; docs/corruptions.md)."""
    folder, _ = shifted
    clean = _accuracy(folder / "dump.h5", "all")
    by_family = {f: [_accuracy(folder / "shifts.h5", f"shift/{f}/{s}") for s in SEVERITIES] for f in FIVE}
    by_severity = np.mean([by_family[f] for f in FIVE], axis=0)
    assert clean > 0.9
    assert np.all(np.diff([clean, *by_severity]) < 0), (clean, by_family)


def test_perturbed_calibration_accuracy_falls_with_level_to_chance_on_the_default_trained_model(shifted, tmp_path):
    """Tomani et al. (2021; the authors' estimate_epsilons): level 0 is the seed's clean calibration rows (the
    pool less its drawn test rows); the noise grows with the level and the accuracy falls from the clean accuracy
    to chance (1/K) within the tolerances."""
    from calbench.data.splits import split_pool

    folder, entry = shifted
    pool = store.read_group(folder / "dump.h5", "all")
    cal_rows, test_rows = split_pool(pool["labels"], 0, **{k: v for k, v in entry["split"].items()})
    np.save(tmp_path / "test_rows.npy", test_rows)
    perturbed_cal.dump_perturbed_cal_job(spec=PerturbedCalSpec(
        source="d", seed=0, entry=entry, perturb={"levels": 5, "clip": False}, cache_dir=DOWNLOADS, threads=1,
        weights=folder / "model.pt", test_rows=tmp_path / "test_rows.npy", output=tmp_path / "perturbed.h5"))
    attrs = {k: json.loads(v) for k, v in store.read_attrs(tmp_path / "perturbed.h5").items()
             if k in ("epsilons", "accuracies", "target_accuracies")}
    assert store.list_groups(tmp_path / "perturbed.h5") == [f"level/{i}" for i in range(5)]
    np.testing.assert_allclose(store.read_group(tmp_path / "perturbed.h5", "level/0")["logits"],
                               pool["logits"][cal_rows], atol=1e-4)
    accuracies, targets = np.array(attrs["accuracies"]), np.array(attrs["target_accuracies"])
    assert attrs["epsilons"][0] == 0 and np.all(np.diff(attrs["epsilons"]) > 0)
    assert np.all(np.diff(accuracies) < 0), accuracies
    assert np.all(np.abs(accuracies - targets) <= [0.03 * accuracies[0]] * 4 + [0.05 * accuracies[0]])
    assert targets[-1] == pytest.approx(0.1)


def test_ood_sets_of_the_default_trained_model(shifted, tmp_path):
    """Another built-in dataset resized to the source's 8 × 8 grey images, and uniform noise: the model's outputs
    on each (logits and embeddings, the rows asked for); the noise images draw a lower top softmax probability
    than the test images."""
    ood_model = pytest.importorskip("calbench.jobs.ood_model", exc_type=ImportError)
    from scipy.special import softmax

    from calbench.jobs.ood import read_ood

    folder, entry = shifted
    entry = {**entry, "ood": {"mnist": {"dataset": "mnist5k", "rows": 120}, "noise": {"noise": "uniform", "rows": 60}}}
    ood_model.dump_model_ood_job(spec=ModelDumpSpec(source="d", entry=entry, cache_dir=DOWNLOADS, threads=1,
                                                    weights=folder / "model.pt", output=tmp_path / "ood.h5"))
    sets = read_ood(tmp_path / "ood.h5")
    assert {k: v["logits"].shape for k, v in sets.items()} == {"mnist": (120, 10), "noise": (60, 10)}
    assert sets["noise"]["embeddings"].shape[0] == 60
    test_conf = softmax(store.read_group(folder / "dump.h5", "all")["logits"], axis=1).max(1).mean()
    assert softmax(sets["noise"]["logits"], axis=1).max(1).mean() < test_conf
