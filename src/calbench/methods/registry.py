"""Registry of calibration methods and the front door :func:`make`.

A method is one class decorated with :func:`register` in a module of this package; the registry imports every
module of the package that registers one (a line starting ``@register(``), so registering needs no other edit,
and the modules of shared machinery (torch export among them) are imported only by their users. Method names are
lower-case identifiers; ``+`` joins names into a :class:`~calbench.methods.chain.Chain`.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import pkgutil
import re
from pathlib import Path

from calbench.imports import code_files as closure

_REGISTRY: dict[str, type] = {}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_REGISTERS = re.compile(r"^@register\(", re.MULTILINE)


def register(name: str):
    """Class decorator: make the calibrator available as ``name`` in config and :func:`make`."""
    if not _NAME.match(name):
        raise ValueError(f"method name {name!r} must match {_NAME.pattern}")

    def decorate(cls):
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"method {name!r} is registered twice ({_REGISTRY[name]} and {cls})")
        _REGISTRY[name] = cls
        cls.method_name = name
        return cls

    return decorate


@functools.cache
def _load_all() -> None:
    """Import each module of this package that registers a method (once per process: it reads their sources)."""
    package = importlib.import_module("calbench.methods")
    for info in pkgutil.iter_modules(package.__path__):
        source = Path(info.module_finder.path, f"{info.name}.py")
        if not info.ispkg and _REGISTERS.search(source.read_text(encoding="utf-8")):
            importlib.import_module(f"calbench.methods.{info.name}")


def available() -> list[str]:
    """Sorted names of every registered method."""
    _load_all()
    return sorted(_REGISTRY)


def split_chain(name: str) -> list[str]:
    """``"ts+lece"`` → ``["ts", "lece"]``; raises with the allowed names on an unknown one."""
    parts = name.split("+")
    known = available()
    unknown = [p for p in parts if p not in _REGISTRY]
    if unknown or not name:
        close = [c for u in unknown for c in difflib.get_close_matches(u, known, n=3, cutoff=0.6)]
        guess = f"did you mean {' or '.join(map(repr, dict.fromkeys(close)))}? " if close else ""
        raise ValueError(
            f"unknown method {', '.join(repr(u) for u in unknown) or repr(name)} in {name!r}; {guess}"
            f"allowed: {', '.join(known)} (join names with '+' to chain them)"
        )
    return parts


def resolved(name: str) -> str:
    """The calibrator that method (or chain) ``name`` builds, named as briefly as it can be: ``uncal`` stages (the
    identity map) left out of a chain, and a stage repeated right after itself left out where its class
    ``composes_to_itself`` (``ts+ts`` is ``ts``). Two names that resolve alike fit the same calibrator."""
    parts = [p for p in split_chain(name) if p != "uncal"] or ["uncal"]
    kept = [p for k, p in enumerate(parts) if k == 0 or p != parts[k - 1] or not _REGISTRY[p].composes_to_itself]
    return "+".join(kept)


def method_class(name: str) -> type:
    """The class registered as ``name``."""
    (single,) = split_chain(name)
    return _REGISTRY[single]


def chain_needs(name: str) -> frozenset[str]:
    """What the stages of method (or chain) ``name`` read: the union of their ``needs``
    (:data:`calbench.methods.base.NEEDS`)."""
    return frozenset().union(*(_REGISTRY[part].needs for part in split_chain(name)))


def runs_on(name: str, entry) -> bool:
    """Whether method (or chain) ``name`` runs on the source ``entry`` (a resolved config entry): methods that need
    embeddings (a training split, perturbed calibration images) run only on sources that have them."""
    from calbench.data.entry import has_embeddings, has_train, is_model

    needs = chain_needs(name)
    return ("embeddings" not in needs or has_embeddings(entry)) and ("train" not in needs or has_train(entry)) and (
        "perturbed_cal" not in needs or is_model(entry))


def chain_settings(name: str, method_settings: dict) -> dict:
    """The settings of each stage of method (or chain) ``name`` in the config key ``method_settings``: the config
    slice its jobs depend on."""
    return {part: method_settings.get(part, {}) for part in split_chain(name)}


def code_files(name: str) -> list[str]:
    """The calbench files that the stages of method (or chain) ``name`` can execute: the closure of the imports
    of each stage's class module (:func:`calbench.imports.code_files`; its base classes, the modules it imports,
    lazily too), which the registry imports by name. With the calibrate job's own closure, the rule's code input."""
    return closure(*dict.fromkeys(_REGISTRY[part].__module__ for part in split_chain(name)))


def make(name: str, **settings):
    """Build a calibrator from its registered name and settings.

    Parameters
    ----------
    name : a registered name (``"ts"``) or a chain (``"ts+lece"``).
    settings : for a single method, its hyperparameters plus the optional reserved keys ``grid`` and
        ``cv``. A hyperparameter given here is held fixed: the class's default grid (k-fold CV) searches
        only the ones left unset, and no search runs when all of them are given. ``grid`` replaces the
        default grid (a dict of lists, searched as given; ``None``: no search); a setting that it also
        searches is an error. ``cv`` holds settings of :class:`~calbench.methods.tuning.GridSearch`.
        For a chain, one dict per stage name, e.g. ``make("ts+lece", lece={"q": 0.1})``.
    """
    from calbench.methods.chain import Chain
    from calbench.methods.constraints import check_grid, check_settings
    from calbench.methods.tuning import GridSearch, grid_names, without_fixed

    parts = split_chain(name)
    if len(parts) > 1:
        unknown = set(settings) - set(parts)
        if unknown:
            raise ValueError(f"settings for {sorted(unknown)} given to chain {name!r}; key them by stage name {parts}")
        return Chain([make(part, **(settings.get(part) or {})) for part in parts])
    cls = _REGISTRY[parts[0]]
    settings = dict(settings)
    explicit_grid = "grid" in settings
    grid = settings.pop("grid", None)
    cv = settings.pop("cv", None)
    allowed = cls._get_param_names()  # scikit-learn: the keyword arguments of __init__, sorted
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise ValueError(f"method {name!r}: unknown setting(s) {unknown}; allowed settings: {allowed + ['grid', 'cv']}")
    check_settings(cls._parameter_constraints, settings)
    check_grid(cls, grid)  # as GridSearch's fit checks it
    if cv is not None:
        GridSearch.check_cv(cv)
    estimator = cls(**settings)
    if explicit_grid:
        both = sorted(set(settings) & grid_names(grid)) if grid else []
        if both:
            raise ValueError(f"method {name!r}: {both} both set and searched by the grid; drop the setting(s) to "
                             "search them, or drop them from `grid` to hold them fixed")
    elif cls.default_grid:
        grid = without_fixed(cls.default_grid, settings)
    if not grid:
        if cv:
            raise ValueError(f"method {name!r}: `cv` settings {cv} given, but no grid is searched (every searched "
                             "setting is given, or `grid` is null); drop `cv` or leave a setting to search")
        return estimator
    return GridSearch(estimator, grid, **{**cls.default_cv, "extend": not explicit_grid, **(cv or {})})


def build_method(method: str, settings: dict, seed: int):
    """The calibrator of a workflow job: ``settings`` maps each stage name to its config slice; ``seed``
    drives every source of randomness (CV folds, initialisations, sampling) of every stage."""
    parts = split_chain(method)
    estimator = make(method, **settings[parts[0]]) if len(parts) == 1 else make(method, **settings)
    _set_seed(estimator, seed)
    return estimator


def _set_seed(estimator, seed: int) -> None:
    for child in getattr(estimator, "steps", []):
        _set_seed(child, seed)
    if hasattr(estimator, "estimator"):
        _set_seed(estimator.estimator, seed)
    if "seed" in estimator.get_params(deep=False):
        estimator.set_params(seed=seed)
