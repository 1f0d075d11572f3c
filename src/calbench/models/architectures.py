"""torchvision and timm models by name, and their penultimate-layer embeddings.

A model is named ``torchvision:<name>`` (any ``torchvision.models.get_model`` name) or
``timm:<name>`` (any ``timm.create_model`` name); ``model_kwargs`` go to the constructor, e.g.
``{img_size: 8, patch_size: 2, in_chans: 1, depth: 2}`` for a small timm ViT. The embedding is the
input of the final classification layer: timm's ``forward_head(..., pre_logits=True)``, and for
torchvision the input of the last ``nn.Linear`` (``fc`` of ResNets, the end of ``classifier`` elsewhere).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from calbench.models.errors import OfflineError, load_tensors


def parse_spec(spec: str, where: str) -> tuple[str, str]:
    library, _, name = spec.partition(":")
    if library not in ("torchvision", "timm") or not name:
        raise ValueError(f"{where}.model: expected 'torchvision:<name>' or 'timm:<name>', got {spec!r}")
    return library, name


def input_channels(spec: str, kwargs: dict) -> int:
    """Channels the model takes: timm's ``in_chans`` (default 3); torchvision models take 3."""
    return int(kwargs.get("in_chans", 3)) if spec.startswith("timm:") else 3


def final_linear(model: nn.Module) -> tuple[str, nn.Linear]:
    """The final classification layer: timm's ``get_classifier()``, else the last ``nn.Linear``."""
    if hasattr(model, "get_classifier"):
        layer = model.get_classifier()
        name = next(n for n, m in model.named_modules() if m is layer)
        return name, layer
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError(f"{type(model).__name__} has no nn.Linear classification layer; calbench reads the "
                         "embeddings at the input of the last nn.Linear: choose another architecture")
    return linears[-1]


def _replace_head(model: nn.Module, num_classes: int) -> None:
    name, layer = final_linear(model)
    if layer.out_features != num_classes:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, nn.Linear(layer.in_features, num_classes))


def _offline_message(spec: str, err: Exception, where: str) -> str:
    if spec.startswith("timm:"):
        hub = os.environ.get("HF_HOME", "~/.cache/huggingface")
        return (f"{where}: timm could not load the pretrained weights of {spec} from the Hugging Face Hub or its "
                f"cache ({type(err).__name__}: {err}). Offline: copy the model's files into the Hub cache ({hub}) "
                "and set HF_HUB_OFFLINE=1, or download the weights elsewhere and set `weights: /path/to/file` "
                "(a .safetensors/.pth/.bin state dict) in the source.")
    folder = Path(torch.hub.get_dir()) / "checkpoints"
    return (f"{where}: torchvision could not download the weights of {spec} into {folder} ({type(err).__name__}: "
            f"{err}). Offline: copy the .pth file there (set TORCH_HOME to use another cache folder) or set "
            "`weights: /path/to/file.pth` in the source.")


def _read_state_dict(path: Path, where: str) -> dict:
    """A state dict from ``.safetensors`` or a torch file (bare, or under ``state_dict``/``model``)."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    state = load_tensors(path, f"{where}.weights")
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict):
        raise ValueError(f"{where}.weights: {path} holds no state dict")
    return state


def _load_local(model: nn.Module, path: Path, where: str) -> None:
    """Load a local state dict strictly, first sizing the head to the file's number of classes."""
    state = _read_state_dict(path, where)
    name, _ = final_linear(model)
    if f"{name}.weight" in state:
        _replace_head(model, state[f"{name}.weight"].shape[0])
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"{where}.weights: {path} does not fit the architecture: {err}") from None


def build(spec: str, num_classes: int | None, *, pretrained: bool = False, weights: str | None = None,
          kwargs: dict | None = None, where: str = "model") -> nn.Module:
    """Build ``spec``; with ``pretrained`` load its published weights, with ``weights`` a local file.

    ``num_classes`` replaces the classification layer (a fresh head for fine-tuning) where it
    differs; ``None`` keeps the head of the weights (the `pretrained` source evaluates a model as is).
    """
    library, name = parse_spec(spec, where)
    kwargs = dict(kwargs or {})
    if weights is not None and not Path(weights).is_file():
        raise FileNotFoundError(f"{where}.weights: {weights} is not a file")
    published = pretrained and weights is None
    try:
        if library == "timm":
            import timm

            model = timm.create_model(name, pretrained=published, **kwargs)
        else:
            import torchvision

            model = torchvision.models.get_model(name, weights="DEFAULT" if published else None, **kwargs)
    except OSError as err:  # urllib, huggingface_hub and missing-cache errors are all OSErrors
        raise OfflineError(_offline_message(spec, err, where)) from None
    if weights is not None:
        _load_local(model, Path(weights), where)
    if num_classes is not None:
        _replace_head(model, num_classes)
    return model


def num_outputs(model: nn.Module) -> int:
    return final_linear(model)[1].out_features


@torch.no_grad()
def embed(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(embeddings, logits)`` of a batch; the embeddings are the input of the final linear layer."""
    if hasattr(model, "forward_head"):  # timm
        features = model.forward_features(x)
        return model.forward_head(features, pre_logits=True), model.forward_head(features)
    captured = []
    handle = final_linear(model)[1].register_forward_hook(lambda _m, inputs, _out: captured.append(inputs[0]))
    try:
        logits = model(x)
    finally:
        handle.remove()
    return captured[-1], logits
