"""Errors of the model code: a download that failed offline, and the `models` extra not installed."""

import importlib

#: The optional dependencies of calbench.models and KCal (pyproject.toml's `models` extra).
MODELS_EXTRA = ("torch", "torchvision", "timm")


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
