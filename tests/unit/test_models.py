"""Model sources: dump round-trip, resume after an interrupted training, offline error messages."""

from __future__ import annotations

import urllib.error
import urllib.request

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch", reason="the model sources need torch: pip install 'calbench[models]'")

from calbench.config import complete_source  # noqa: E402
from calbench.data import splits, store  # noqa: E402
from calbench.jobs import model_dump  # noqa: E402
from calbench.jobs import models as jobs  # noqa: E402
from calbench.jobs.model_specs import ModelDumpSpec, TrainSpec  # noqa: E402
from calbench.models import architectures, datasets, training  # noqa: E402
from calbench.models.errors import OfflineError  # noqa: E402
from conftest import DOWNLOADS, REPO, PlantedFile, image_folder  # noqa: E402


def train(source: str, entry: dict, output) -> None:
    """The train job on one thread, its entry filled as calbench.config.load fills it."""
    jobs.train_job(spec=TrainSpec(source=source, entry=complete_source(entry), cache_dir=DOWNLOADS, threads=1,
                                  model=output), progress=False)


def dump_model(source: str, entry: dict, output, weights=None) -> None:
    """The dump job on one thread, its entry filled as calbench.config.load fills it."""
    model_dump.dump_model_job(spec=ModelDumpSpec(source=source, entry=complete_source(entry), cache_dir=DOWNLOADS,
                                                 threads=1, weights=weights, output=output), progress=False)


def load_images(entry: dict, where: str) -> datasets.ImageData:
    return datasets.load(complete_source(entry), where, DOWNLOADS)


TINY_VIT = {"img_size": 8, "patch_size": 4, "in_chans": 1, "depth": 1, "embed_dim": 16, "num_heads": 2}


def _entry(model="timm:vit_tiny_patch16_224", epochs=1, **extra):
    return {"type": "train", "dataset": "digits", "sizes": {"train": 120, "cal": 60, "test": 50},
            "model": model, "model_kwargs": TINY_VIT if model.startswith("timm:") else {},
            "recipe": {"epochs": epochs, "batch_size": 32, "seed": 3}, **extra}


@pytest.mark.parametrize("model,image_size", [("timm:vit_tiny_patch16_224", None),
                                              ("torchvision:shufflenet_v2_x0_5", 16)])
def test_dump_round_trip_holds_penultimate_activations(tmp_path, model, image_size):
    entry = _entry(model, image_size=image_size)
    weights, dump = tmp_path / "model.pt", tmp_path / "dump.h5"
    train("tiny", entry, weights)
    dump_model("tiny", entry, dump, weights)
    assert store.list_groups(dump) == ["cal", "test", "train"]
    groups = {g: store.read_group(dump, g) for g in ("train", "cal", "test")}
    for name, size in entry["sizes"].items():
        g = groups[name]
        assert g["logits"].shape == (size, 10) and g["logits"].dtype == np.float32
        assert g["labels"].shape == (size,) and g["labels"].dtype == np.int64
        assert g["embeddings"].dtype == np.float32 and g["embeddings"].shape[0] == size
    # Independent check: a forward hook on the classification layer sees the dumped embeddings as its input.
    saved = torch.load(weights, weights_only=False)
    net = architectures.build(model, 10, kwargs=entry["model_kwargs"])
    net.load_state_dict(saved["model"])
    net.eval()
    data = load_images(entry, "test")
    images = torch.stack([data.splits["test"][i][0] for i in range(len(data.splits["test"]))])
    channels = architectures.input_channels(model, entry["model_kwargs"])
    x = datasets.prepare_batch(images, saved["mean"], saved["std"], channels, image_size)
    seen = []
    _, head = architectures.final_linear(net)
    head.register_forward_hook(lambda _m, inputs, _out: seen.append(inputs[0].detach()))
    with torch.no_grad():
        logits = net(x)
    np.testing.assert_allclose(groups["test"]["embeddings"], seen[0].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(groups["test"]["logits"], logits.numpy(), rtol=1e-5, atol=1e-5)
    readout = groups["test"]["embeddings"] @ head.weight.detach().numpy().T + head.bias.detach().numpy()
    np.testing.assert_allclose(groups["test"]["logits"], readout, rtol=1e-4, atol=1e-4)
    assert np.array_equal(np.sort(groups["test"]["labels"]),
                          np.sort([int(data.splits["test"][i][1]) for i in range(50)]))


DEFAULT_SOURCES = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["sources"]
DEFAULT_TRAINED = sorted(name for name, entry in DEFAULT_SOURCES.items() if entry["type"] == "train")


def test_the_default_config_trains_a_torchvision_cnn_and_a_timm_vit():
    assert {DEFAULT_SOURCES[name]["model"].partition(":")[0] for name in DEFAULT_TRAINED} == {"torchvision", "timm"}


def test_the_default_trained_sources_resplit_their_held_out_pool_for_every_seed():
    """A trained source's cells are a spread over the run's seeds (re-splits of cal + test), not one value: one split
    would hide how much a result depends on the calibration set drawn."""
    for name in DEFAULT_TRAINED:
        entry = DEFAULT_SOURCES[name]
        assert entry["split"] == {"cal_size": entry["sizes"]["cal"]} and "seeds" not in entry, name


@pytest.mark.parametrize("name", DEFAULT_TRAINED)
def test_default_model_trains_an_epoch_and_dumps_a_held_out_pool_per_seed(tmp_path, name):
    """Each trained source of config/config.yaml, on a small split for one epoch; its cal + test form `all`."""
    default = DEFAULT_SOURCES[name]
    entry = {**default, "sizes": {"train": 100, "cal": 40, "test": 60}, "recipe": {**default["recipe"], "epochs": 1},
             "split": {"cal_size": 40}}
    train(name, entry, tmp_path / "model.pt")
    dump_model(name, entry, tmp_path / "dump.h5", tmp_path / "model.pt")
    assert store.list_groups(tmp_path / "dump.h5") == ["all", "train"]
    pool = store.read_group(tmp_path / "dump.h5", "all")
    assert pool["logits"].shape == (100, 10) and pool["embeddings"].shape[0] == 100
    seed0, seed1 = (splits.load_split(tmp_path / "dump.h5", seed, entry["split"]) for seed in (0, 1))
    assert len(seed0["cal"]["labels"]) == 40 and len(seed0["test"]["labels"]) == 60
    assert not np.array_equal(seed0["cal_index"], seed1["cal_index"])  # each seed draws its own calibration set


def test_killed_training_resumes_to_the_uninterrupted_weights(tmp_path, monkeypatch):
    entry = _entry(epochs=2)
    train("tiny", entry, tmp_path / "full" / "model.pt")

    saves = []
    real_save = training.save_checkpoint

    def save_then_die(path, state):
        real_save(path, state)
        saves.append(state["epoch"])
        raise KeyboardInterrupt("killed after the first epoch's checkpoint")

    monkeypatch.setattr(training, "save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train("tiny", entry, tmp_path / "killed" / "model.pt")
    assert saves == [1] and (tmp_path / "killed" / "checkpoint.pt").exists()
    assert not (tmp_path / "killed" / "model.pt").exists()

    def count_save(path, state):
        real_save(path, state)
        saves.append(state["epoch"])

    monkeypatch.setattr(training, "save_checkpoint", count_save)
    train("tiny", entry, tmp_path / "killed" / "model.pt")
    assert saves == [1, 2]  # the rerun trained only the second epoch
    full = torch.load(tmp_path / "full" / "model.pt", weights_only=False)["model"]
    resumed = torch.load(tmp_path / "killed" / "model.pt", weights_only=False)["model"]
    for key in full:
        torch.testing.assert_close(resumed[key], full[key], rtol=0, atol=0)
    assert not (tmp_path / "killed" / "checkpoint.pt").exists()


def test_checkpoint_of_another_recipe_is_not_resumed(tmp_path, monkeypatch):
    entry = _entry(epochs=1)
    recipe = training.Recipe(**complete_source(entry)["recipe"])
    training.save_checkpoint(tmp_path / "checkpoint.pt", {"fingerprint": "other", "epoch": 1})
    saves = []
    monkeypatch.setattr(training, "save_checkpoint", lambda p, s: saves.append(s["epoch"]))
    net = architectures.build(entry["model"], 10, kwargs=TINY_VIT)
    data = load_images(entry, "x")
    training.train(net, data.splits["train"], lambda x, a, g: datasets.prepare_batch(x, [0.5], [0.5], 1),
                   recipe, torch.device("cpu"), tmp_path / "checkpoint.pt", {}, progress=False)
    assert saves == [1]


def _no_network(*args, **kwargs):
    raise urllib.error.URLError("network unreachable (test)")


def test_dataset_download_failure_says_what_was_tried(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    entry = {"type": "train", "dataset": "cifar10", "data_dir": str(tmp_path / "cifar"),
             "sizes": {"train": 10, "cal": 10}}
    with pytest.raises(OfflineError) as err:
        load_images(entry, "sources.c10")
    text = str(err.value)
    assert "sources.c10" in text and "CIFAR10" in text and str(tmp_path / "cifar") in text and "Offline" in text


def test_torchvision_weights_download_failure_names_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setattr(torch.hub, "urlopen", _no_network)
    with pytest.raises(OfflineError) as err:
        architectures.build("torchvision:resnet18", 10, pretrained=True, where="sources.r18")
    text = str(err.value)
    assert str(tmp_path / "torch" / "hub" / "checkpoints") in text and "weights: /path/to/file.pth" in text


def test_timm_weights_offline_mentions_hf_hub_offline(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as HF_HUB_OFFLINE=1 at import
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    with pytest.raises(OfflineError) as err:
        architectures.build("timm:vit_tiny_patch16_224", 10, pretrained=True, where="sources.vit")
    text = str(err.value)
    assert "sources.vit" in text and "HF_HUB_OFFLINE=1" in text and str(tmp_path / "hf") in text
    assert "weights: /path/to/file" in text


def test_weights_and_checkpoints_load_tensors_only_and_refuse_a_crafted_file(tmp_path):
    """Model weights (`weights:`), trained models and checkpoints load with ``weights_only=True``: the project's
    own files (state dicts, optimiser and schedule states, plain values) load; a file holding any other object is
    refused naming the file and the fix, and does not run."""
    from calbench.models.errors import load_tensors

    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    schedule.step()
    own = {"fingerprint": "f", "epoch": 1, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
           "schedule": schedule.state_dict(), "mean": [0.5], "std": [0.25], "entry": {"model": "x", "sizes": {}}}
    torch.save(own, tmp_path / "own.pt")
    assert load_tensors(tmp_path / "own.pt", "checkpoint")["schedule"] == schedule.state_dict()
    planted = tmp_path / "planted"
    torch.save({"model": model.state_dict(), "extra": PlantedFile(planted)}, tmp_path / "crafted.pt")
    with pytest.raises(ValueError, match=r"sources.s.weights: .*crafted.pt holds objects other than tensors .* "
                                         r"Save a state dict of tensors"):
        architectures._read_state_dict(tmp_path / "crafted.pt", "sources.s")
    with pytest.raises(ValueError, match="training checkpoint: .*crafted.pt holds objects other than tensors"):
        training._load_checkpoint(tmp_path / "crafted.pt", "f")
    assert not planted.exists()


def test_pretrained_source_rejects_a_head_of_other_classes(tmp_path):
    net = architectures.build("timm:vit_tiny_patch16_224", 7, kwargs=TINY_VIT)
    torch.save(net.state_dict(), tmp_path / "w.pth")
    entry = {**_entry(), "type": "pretrained", "weights": str(tmp_path / "w.pth")}
    with pytest.raises(ValueError, match="outputs 7 classes but digits has 10"):
        dump_model("p", entry, tmp_path / "d.h5")


def test_pooled_split_is_stratified_disjoint_and_sized():
    labels = np.repeat(np.arange(4), 50)
    index = datasets._split_pool(labels, {"train": 100, "cal": 40, "test": 40}, 0, "x")
    assert [index[s].size for s in ("train", "cal", "test")] == [100, 40, 40]
    assert np.unique(np.concatenate(list(index.values()))).size == 180
    assert np.all(np.bincount(labels[index["cal"]]) == 10)
    with pytest.raises(ValueError, match="exceeds the 200 images"):
        datasets._split_pool(labels, {"train": 150, "cal": 40, "test": 40}, 0, "x")


def test_translation_augmentation_shifts_without_changing_content():
    x = torch.zeros(3, 1, 8, 8)
    x[:, :, 4, 4] = 1.0
    out = datasets._random_translate(x, 1, torch.Generator().manual_seed(0))
    assert out.shape == x.shape and torch.all(out.sum((1, 2, 3)) == 1.0)
    assert torch.all(out[:, 0, 3:6, 3:6].sum((1, 2)) == 1.0)


def test_imagenet_config_path_runs_offline_on_a_tiny_model_andimage_folder(tmp_path):
    """config/imagenet.yaml's sources with a random-weights timm ResNet and a generated image folder."""
    import yaml

    entry = yaml.safe_load(open("config/imagenet.yaml"))["sources"]["imagenet_resnet50"]
    net = architectures.build("timm:resnet10t", 3)
    torch.save(net.state_dict(), tmp_path / "w.pth")
    entry = {**entry, "data_dir": str(image_folder(tmp_path / "val")), "image_size": 8,
             "sizes": {"train": 0, "cal": 9, "test": 9}, "model": "timm:resnet10t", "weights": str(tmp_path / "w.pth")}
    dump_model("inet", entry, tmp_path / "d.h5")
    assert store.list_groups(tmp_path / "d.h5") == ["cal", "test"]
    cal, test = (store.read_group(tmp_path / "d.h5", g) for g in ("cal", "test"))
    assert cal["logits"].shape == test["logits"].shape == (9, 3) and cal["embeddings"].shape[0] == 9
    assert sorted(np.concatenate([cal["labels"], test["labels"]])) == sorted(np.repeat(np.arange(3), 6))


def test_imagenet_config_fails_clearly_without_images_or_weights(tmp_path, monkeypatch):
    import yaml

    entry = yaml.safe_load(open("config/imagenet.yaml"))["sources"]["imagenet_vit_b16"]
    with pytest.raises(FileNotFoundError, match=r"sources.v.data_dir: .*missing.* WordNet id"):
        dump_model("v", {**entry, "data_dir": str(tmp_path / "missing")}, tmp_path / "d.h5")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    data_dir = str(image_folder(tmp_path / "val", classes=2, per_class=2))
    with pytest.raises(OfflineError, match="sources.v: timm could not load .*vit_base_patch16_224.*weights: /path"):
        dump_model("v", {**entry, "data_dir": data_dir, "sizes": {"train": 0, "cal": 2, "test": 2}},
                   tmp_path / "d.h5")
    assert not (tmp_path / "d.h5").exists()
