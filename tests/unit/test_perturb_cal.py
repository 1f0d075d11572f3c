"""Calibrators fitted on perturbed calibration images (Tomani et al., CVPR 2021; docs/shift.md): the
perturbation, the target accuracies of its levels, the `perturb` stage's config checks, and the workflow."""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest
import yaml

from calbench.__main__ import main
from calbench.config import ConfigError, load
from calbench.corruptions import gaussian_perturbation
from calbench.data import store
from calbench.data.store import read_calibrated
from calbench.methods import make
from conftest import run_snakemake
from workflow_helpers import planned_jobs

jobs = pytest.importorskip("calbench.jobs.perturbed_cal", exc_type=ImportError)


def test_gaussian_perturbation_is_deterministic_and_grows_with_epsilon():
    images = np.random.default_rng(0).integers(0, 256, size=(6, 1, 8, 8), dtype=np.uint8)
    np.testing.assert_array_equal(gaussian_perturbation(images, 0.0, seed=[1, 2]), images.astype(np.float32))
    np.testing.assert_array_equal(gaussian_perturbation(images, 0.2, seed=[1, 2]),
                                  gaussian_perturbation(images, 0.2, seed=[1, 2]))
    change = [np.abs(gaussian_perturbation(images, e, seed=3) - images).mean() for e in (0.05, 0.2, 0.8)]
    assert change[0] < change[1] < change[2]
    with pytest.raises(ValueError, match="standard deviation"):
        gaussian_perturbation(images, -0.1)


def test_perturbation_is_unclipped_float_as_the_authors_cifar_branch():
    """Tomani et al.'s code (perturbation_generator.py, ``general_gaussian_noise``): x/255 + N(0, ε²), clipped to
    [0, 1] only in the ImageNet branch, never rounded; the draws are the same at every ε."""
    x = np.full((4, 1, 8, 8), 250, dtype=np.uint8)
    out = gaussian_perturbation(x, 0.5, seed=1)
    assert out.dtype == np.float32 and out.max() > 255 and out.min() < 0
    np.testing.assert_allclose(gaussian_perturbation(x, 0.5, seed=1, clip=True), np.clip(out, 0, 255))
    np.testing.assert_allclose((gaussian_perturbation(x, 1.0, seed=1) - 250) / 2, out - 250, rtol=1e-5, atol=1e-3)


def test_the_perturbed_calibration_set_defaults_are_the_authors():
    """run_experiments.py: ``perturb_levels`` defaults to 6 (ε₀ = 0 included); CIFAR/MNIST branch unclipped."""
    assert load(_config({"d": IMAGES}, ["perturb+ts"]))["perturbed_cal"] == {"levels": 6, "clip": False}


def test_the_perturb_stage_declares_its_data_and_has_no_settings():
    """The perturbed calibration set is a data stage read through ``needs``, as embeddings are."""
    assert make("perturb").get_params() == {} and "perturbed_cal" in make("perturb").needs


def test_level_targets_fall_in_equal_steps_from_the_clean_accuracy_to_chance():
    """Tomani et al. (the authors' estimate_epsilons): level 0 is the clean set, the last level is at chance (1/K)."""
    np.testing.assert_allclose(jobs.perturbation_targets(0.9, 10, 5), [0.9, 0.7, 0.5, 0.3, 0.1])


def _config(sources, methods, settings=None, perturbed=None):
    config = {"sources": sources, "methods": methods, "method_settings": settings or {}, "metrics": ["acc"]}
    return config | ({"perturbed_cal": perturbed} if perturbed is not None else {})


IMAGES = {"type": "train", "dataset": "digits", "model": "timm:vit_tiny_patch16_224"}
LOGITS = {"type": "synthetic", "task": "planted_temperature", "n_cal": 50, "n_test": 50}


@pytest.mark.parametrize("methods, settings, perturbed, sources, field", [
    (["ts+perturb"], None, None, {"d": IMAGES}, "config key methods: 'ts+perturb'"),
    (["perturb"], None, None, {"d": IMAGES}, "config key methods: 'perturb'"),
    (["perturb+ts"], None, {"levels": 1}, {"d": IMAGES}, "config key perturbed_cal.levels"),
    (["perturb+ts"], None, {"levls": 4}, {"d": IMAGES}, "config key perturbed_cal"),
    (["perturb+ts"], None, {"clip": "yes"}, {"d": IMAGES}, "config key perturbed_cal.clip"),
    (["perturb+ts"], {"perturb": {"levels": 4}}, None, {"d": IMAGES},
     "config key method_settings.perturb: the stage perturb has no settings; the perturbed calibration set's levels "
     "and clipping are the config key perturbed_cal"),
    (["perturb+ts"], None, None, {"s": LOGITS}, "needs the images of a train or pretrained source"),
])
def test_perturb_stage_is_refused_with_the_field_named(methods, settings, perturbed, sources, field):
    with pytest.raises(ConfigError, match=field.replace("+", r"\+").replace(".", r"\.")):
        load(_config(sources, methods, settings, perturbed))


CLASSES = 10
WORKFLOW = {
    "seeds": [0, 1],
    "sources": {
        "digits_tiny": {
            "type": "train", "dataset": "digits", "sizes": {"train": 300, "cal": 100, "test": 100},
            "split": {"cal_size": 100},
            "model": "timm:vit_tiny_patch16_224",
            "model_kwargs": {"img_size": 8, "patch_size": 4, "in_chans": 1, "depth": 1, "embed_dim": 16,
                             "num_heads": 2},
            "recipe": {"epochs": 15, "batch_size": 50, "lr": 0.003},
            "shifts": {"gaussian_noise": [5], "rotate": [3]},
        },
        "synthetic": LOGITS,
    },
    "methods": ["ts", "perturb+ts"],
    "perturbed_cal": {"levels": 4},
    "metrics": ["acc", "nll", "ece.conf.ew15.l1"],
    "figures": None,  # the perturbed sets and their calibrators are the point: no reliability diagrams
}


@pytest.fixture(scope="module")
def planned_then_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("perturb_cal")
    (work / "config.yaml").write_text(yaml.safe_dump(WORKFLOW, sort_keys=False))
    planned = planned_jobs(work)
    run_snakemake(work, None)
    return work, planned


@pytest.mark.workflow
@pytest.mark.xdist_group("perturb_cal")
def test_perturb_schedules_one_perturbed_dump_per_model_source_and_its_calibrations(planned_then_run):
    _, planned = planned_then_run
    assert {w for rule, w in planned if rule == "dump_perturbed_cal"} == {"digits_tiny/0", "digits_tiny/1"}
    assert {w for rule, w in planned if rule == "calibrate"} == {
        *(f"digits_tiny/{m}/{s}" for m in ("ts", "perturb+ts") for s in (0, 1)), "synthetic/ts/0", "synthetic/ts/1"}


@pytest.mark.workflow
@pytest.mark.xdist_group("perturb_cal")
def test_perturbed_ts_fits_on_every_level_and_is_evaluated_under_shift(planned_then_run):
    work, _ = planned_then_run
    pool = store.read_group(work / "results/dumps/digits_tiny.h5", "all", ["labels"])["labels"]
    for seed in (0, 1):
        perturbed = work / f"results/perturbed_cal/digits_tiny/seed{seed}.h5"
        with h5py.File(perturbed) as f:
            assert sorted(f["level"]) == ["0", "1", "2", "3"]
            epsilons = json.loads(f.attrs["epsilons"])
            accuracies = json.loads(f.attrs["accuracies"])
        assert epsilons[0] == 0 and np.all(np.diff(epsilons) > 0)
        assert accuracies[0] > accuracies[-1]
        # ε is tuned on the seed's 100 calibration rows alone: no test row of the pool takes part
        test_rows = np.load(work / f"results/splits/digits_tiny/seed{seed}.test_rows.npy")
        cal_rows = np.setdiff1d(np.arange(pool.size), test_rows)
        np.testing.assert_array_equal(store.read_group(perturbed, "level/3", ["labels"])["labels"], pool[cal_rows])
    # each seed fits on its own 100 calibration rows of the pool at each of the 4 levels
    assert "fitting perturb+ts on 400 x 10" in (work / "logs/calibrate/digits_tiny/perturb+ts/seed0.log").read_text()
    confidence = {}
    for method in ("ts", "perturb+ts"):
        test = read_calibrated(work / f"results/calibrated/digits_tiny/{method}/seed0.h5", "test")
        confidence[method] = test["probs"].max(1).mean()
        record = json.loads((work / f"results/metrics/digits_tiny/{method}/seed0.json").read_text())
        assert set(record["shifts"]) == {"gaussian_noise/5", "rotate/3"}
    # fitted on data down to chance accuracy, the temperature is larger: the predictions less confident
    assert confidence["perturb+ts"] < confidence["ts"]
    long = (work / "results/tables/metrics_long.csv").read_text()
    assert "digits_tiny,perturb+ts," in long and "synthetic,perturb+ts" not in long


@pytest.mark.workflow
@pytest.mark.xdist_group("perturb_cal")
def test_the_command_line_fits_perturbed_ts_as_the_workflow_does(planned_then_run, tmp_path, monkeypatch):
    """``python -m calbench job calibrate`` builds the job's spec as the rule's script does, the perturbed
    calibration set and the pooled source's drawn split included (calbench.jobs.calibrate.spec)."""
    work, _ = planned_then_run
    for folder in ("dumps", "splits", "perturbed_cal"):
        shutil.copytree(work / "results" / folder, tmp_path / "results" / folder)
    (tmp_path / "config.yaml").write_text((work / "config.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["job", "calibrate", "--config", "config.yaml", "--source", "digits_tiny", "--method", "perturb+ts",
                 "--seed", "1"]) == 0
    calibrated = "results/calibrated/digits_tiny/perturb+ts/seed1.h5"
    expected, got = (read_calibrated(folder / calibrated, "test") for folder in (work, tmp_path))
    for part in ("probs", "index", "labels"):
        np.testing.assert_array_equal(got[part], expected[part])
    calibrator = "results/calibrators/digits_tiny/perturb+ts/seed1.safetensors"
    assert (tmp_path / calibrator).read_bytes() == (work / calibrator).read_bytes()


@pytest.mark.workflow
@pytest.mark.xdist_group("perturb_cal")
def test_adding_a_shift_reruns_no_perturbed_dump_and_no_calibration(planned_then_run):
    work, _ = planned_then_run
    original = (work / "config.yaml").read_text()
    config = yaml.safe_load(original)
    config["sources"]["digits_tiny"]["shifts"]["contrast"] = [2]
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    try:
        rules = {rule for rule, _ in planned_jobs(work)}
    finally:  # the other tests of the run, in any order, see the config it ran
        (work / "config.yaml").write_text(original)
    assert "dump_shifts_model" in rules and "evaluate" in rules
    assert not rules & {"calibrate", "dump_perturbed_cal", "dump_model", "train_model"}
