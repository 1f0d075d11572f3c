"""What validates, runs: every setting of every registered method is declared once (type and range,
``_parameter_constraints``), and ``config.load`` (hence ``validate`` and ``snakemake -n``) refuses exactly the
values ``fit`` refuses, with the same message. Probed with values of every kind on small data; a value the
declaration allows must fit."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from calbench.config import ConfigError, load
from calbench.methods import available, method_class
from calbench.methods.constraints import InvalidSetting, check_settings
from calbench.methods.tuning import GridSearch

#: Values of every kind a config can hold (none so large that a fit allowing it would be slow).
PROBES = [-1, 0, 1, 2, 0.5, 1.5, float("nan"), "x", "cpu", None, True, [], [0.5, 2.0], [2.0, 0.5], {"a": 1}]
#: Settings that keep a fit small where the defaults train for long (KCal's projection).
FAST = {"kcal": {"max_epochs": 1, "steps_per_epoch": 2, "n_folds": 2, "m": 2, "batch_size": 8, "dim": 4},
        "kcal_logits": {"max_epochs": 1, "steps_per_epoch": 2, "n_folds": 2, "m": 2, "batch_size": 8, "dim": 4}}
METHODS = available()


def _config(method: str, settings: dict) -> dict:
    return {"sources": {"s": {"type": "synthetic", "task": "planted_temperature", "num_classes": 3, "n_cal": 50,
                              "n_test": 50}},
            "methods": ["uncal"], "metrics": ["acc"], "method_settings": {method: settings}}


def _data(seed=0):
    from calbench.scores import Scores

    rng = np.random.default_rng(seed)
    labels = np.tile(np.arange(3), 30)
    logits = rng.normal(size=(labels.size, 3)) + 2.0 * np.eye(3)[labels]
    return Scores(logits=logits, embeddings=np.hstack([logits, rng.normal(size=(labels.size, 2))])), labels


def _fit(method: str, settings: dict):
    cls = method_class(method)
    estimator = cls(**{**FAST.get(method, {}), **settings})
    scores, y = _data()
    kwargs = {"train": _data(1)} if "train" in cls.needs else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(scores, y, **kwargs)


@pytest.mark.parametrize("method", METHODS)
def test_every_setting_is_declared(method):
    cls = method_class(method)
    assert set(cls._get_param_names()) <= set(cls._parameter_constraints), (
        f"{method}: settings without a declared type and range (_parameter_constraints): "
        f"{sorted(set(cls._get_param_names()) - set(cls._parameter_constraints))}")


@pytest.mark.parametrize("method", METHODS)
def test_validate_refuses_what_fit_refuses_with_the_same_message(method):
    cls = method_class(method)
    for name in cls._get_param_names():
        for value in PROBES:
            try:
                check_settings(cls._parameter_constraints, {name: value})
                declared = None
            except InvalidSetting as err:
                declared = err
            try:
                load(_config(method, {name: value}))
                validated = None
            except ConfigError as err:
                validated = str(err)
            if declared is not None:
                assert validated == f"config key method_settings.{method}.{name}: {declared.detail}", (name, value)
                with pytest.raises(InvalidSetting) as refused:
                    _fit(method, {name: value})
                assert str(refused.value) == str(declared)
            elif "perturbed_cal" not in cls.needs and validated is None:  # perturb fits on perturbed images only
                _fit(method, {name: value})  # allowed, so it fits


@pytest.mark.parametrize(("settings", "message"), [
    ({"cv": {"folds": "x"}}, "cv.folds: 'x' is not allowed; expected an integer >= 2"),
    ({"cv": {"folds": 1}}, "cv.folds: 1 is not allowed; expected an integer >= 2"),
    ({"cv": {"fold": 5}}, "cv.fold: not a setting of the grid search"),
    ({"grid": {"q": []}}, "grid.q: expected a non-empty list of values, got []"),
    ({"grid": {"k": [0.1]}}, "grid.k: not a setting of lece"),
    ({"grid": {"q": [2.0]}}, "grid.q: 2.0 is not allowed"),
])
def test_grid_and_cv_settings_are_checked_by_validate_as_by_fit(settings, message):
    with pytest.raises(ConfigError, match="^config key method_settings.lece." + message.replace(".", r"\.")
                       .replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        load(_config("lece", settings))
    if "fold:" not in message:  # an unknown cv key: GridSearch takes no such argument
        search = GridSearch(method_class("lece")(), settings.get("grid", {"q": [0.1]}), **settings.get("cv", {}))
        with pytest.raises(InvalidSetting) as refused:
            search.fit(*_data())
        assert str(refused.value).startswith(message)


def test_a_grid_for_a_method_without_that_setting_is_refused():
    with pytest.raises(ConfigError, match=r"method_settings\.ts\.grid\.q: not a setting of ts"):
        load(_config("ts", {"grid": {"q": [0.1]}}))


@pytest.mark.parametrize("name", METHODS)
def test_settings_are_keyword_only(name):
    """scikit-learn's convention (since 0.24): a calibrator's settings are keyword-only arguments of ``__init__``
    (after ``*``), so that a call names every setting it changes and a reordering cannot silently swap two."""
    init = method_class(name).__init__
    if init is object.__init__:
        return  # no settings
    settings = list(inspect.signature(init).parameters.values())[1:]
    assert settings, f"{name}: an __init__ without settings; drop it"
    positional = [p.name for p in settings if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert positional == [], f"{name}: settings {positional} not keyword-only; write `def __init__(self, *, ...)`"
