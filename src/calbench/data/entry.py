"""A source of the resolved config as a typed value: what kind it is and which of its optional sections it has, read
in one place instead of from the raw entry by every stage (the workflow's rules, the job specs, the command line)."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

#: The source types whose dump is computed by a model (torch, the GPU rules).
MODEL_TYPES = ("train", "pretrained")


def is_model(entry: dict) -> bool:
    """Whether the source entry's dump is computed by a model (``train`` or ``pretrained``)."""
    return entry.get("type") in MODEL_TYPES


def has_embeddings(entry: dict) -> bool:
    """Model sources and the ``imagenet_like`` network dump embeddings; imports may carry them."""
    if is_model(entry) or entry.get("task") == "imagenet_like":
        return True
    files = entry.get("files", {})
    return "embeddings" in files or any(isinstance(v, dict) and "embeddings" in v for v in files.values())


def has_train(entry: dict) -> bool:
    """Model sources dump the classifier's training split (unless ``sizes.train`` is 0); imports may carry
    one (``files.train``), and synthetic networks with ``n_train``."""
    if is_model(entry):
        return entry["sizes"].get("train") != 0  # filled by calbench.config.load
    return "train" in entry.get("files", {}) or bool(entry.get("n_train"))


@dataclass(frozen=True)
class Source:
    """One source of a resolved config (:func:`calbench.config.load` has filled its defaults): its ``name`` and its
    ``entry``, read-only."""

    name: str
    entry: MappingProxyType

    @classmethod
    def of(cls, config: dict, name: str) -> Source:
        """Source ``name`` of the resolved ``config``; a clear error naming the known ones where it has none."""
        if name not in config["sources"]:
            raise KeyError(f"no source {name!r} in config key sources ({', '.join(config['sources'])})")
        return cls(name, MappingProxyType(config["sources"][name]))

    @property
    def type(self) -> str:
        return self.entry["type"]

    @property
    def is_model(self) -> bool:
        return is_model(self.entry)

    @property
    def is_imagefolder(self) -> bool:
        """A model source that reads a folder of images (its model rules read the folder's manifest)."""
        return self.is_model and self.entry["dataset"] == "imagefolder"

    @property
    def seeds(self) -> list[int]:
        return list(self.entry["seeds"])

    @property
    def split(self) -> dict | None:
        """A pooled source's split settings; ``None`` for a source with fixed calibration and test parts."""
        return self.entry.get("split")

    @property
    def scores(self) -> str:
        """What its classifier outputs are: ``logits`` or ``probs``."""
        return self.entry["scores"]

    def has(self, section: str) -> bool:
        """Whether the entry sets the optional section ``section`` (``shifts``, ``ood``, ``label_shift``)."""
        return bool(self.entry.get(section))

    def without(self, *keys: str) -> dict:
        """The entry without ``keys`` (a plain dict)."""
        return {k: v for k, v in self.entry.items() if k not in keys}


def sources(config: dict, *, model: bool | None = None, having: str | None = None) -> list[Source]:
    """The sources of the resolved ``config`` in its order: with ``model``, only the model sources (``True``) or the
    others (``False``); with ``having``, only those that set that section (:meth:`Source.has`). The one way the
    workflow and the jobs select sources."""
    found = [Source.of(config, name) for name in config["sources"]]
    return [s for s in found if (model is None or s.is_model == model) and (having is None or s.has(having))]
