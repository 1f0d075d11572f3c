"""Errors of the model code: a download that failed offline, the `models` extra not installed, and a torch file
that holds more than tensors (read without running code)."""

import importlib

#: The optional dependencies of calbench.models and KCal (pyproject.toml's `models` extra).
MODELS_EXTRA = ("torch", "torchvision", "timm")


def load_tensors(path, what: str):
    """``torch.load`` of a file that may hold only tensors and plain values (``weights_only=True``: nothing in it
    runs code); ``what`` names it (config key or role) in the error that refuses anything else."""
    import pickle

    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise ValueError(f"{what}: {path} holds objects other than tensors and plain values, which calbench does not "
                         f"load (loading them could run code): {first}. Save a state dict of tensors "
                         "(torch.save(model.state_dict(), path)) or a .safetensors file") from None


class OfflineError(RuntimeError):
    """A download failed; the message says what was tried and how to provide the file offline."""


def require_models_extra(who: str, packages=MODELS_EXTRA) -> None:
    """Raise an ImportError naming ``who`` and the install command when a package of the extra is missing."""
    missing = []
    for package in packages:  # imported, not only found: the caller imports them next anyway
        try:
            importlib.import_module(package)
        except ImportError:
            missing.append(package)
    if missing:
        raise ImportError(f"{who} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not "
                          "installed: pip install 'calbench[models]' (the base install runs every other method "
                          "and metric on your own logits)")
