"""Config validation: every mistake names the key and what is allowed."""

import copy

import pytest

from calbench.config import ConfigError, load

BASE = {"seeds": [0], "sources": {"s": {"type": "synthetic", "task": "lece3", "n_cal": 100, "n_test": 100}},
        "methods": ["uncal", "ts"], "metrics": ["acc", "nll"]}


def check(mutate):
    config = copy.deepcopy(BASE)
    mutate(config)
    return load(config)


@pytest.mark.parametrize("mutate, message", [
    (lambda c: c.update(sede=[1]), r"config key \(top level\): Additional properties are not allowed \('sede' was "
                                   r"unexpected\); allowed keys here: .*method_settings, methods, metrics.*seeds, "
                                   r"sources"),
    (lambda c: c.update(seeds="0"), r"config key seeds: '0' is not of type 'array'"),
    (lambda c: c["sources"]["s"].update(task="lece4"), r"config key sources.s.task: 'lece4' is not allowed; allowed "
                                                       r"values: lece3, planted_temperature"),
    (lambda c: c["sources"]["s"].update(type="fetch"), r"config key sources.s.type: 'fetch' is not allowed; allowed "
                                                       r"values: synthetic, import, download"),
    (lambda c: c["sources"]["s"].update(n_cal="many"), r"config key sources.s.n_cal: 'many' is not of type 'integer'"),
    (lambda c: c["sources"]["s"].update(ncal=5), r"config key sources.s: .*'ncal' was unexpected"),
    (lambda c: c.update(methods=["ts", "tempscale"]), r"config key methods: unknown method 'tempscale' in "
                                                      r"'tempscale'; allowed: .*ts, .*uncal"),
    (lambda c: c.update(methods=["TS"]), r"config key methods.0: 'TS' is not a method name"),
    (lambda c: c.update(method_settings={"ts": {"lr": 1}}), r"config key method_settings.ts: method 'ts': .*allowed "
                                                           r"settings: \['grid', 'cv'\]"),
    (lambda c: c.update(method_settings={"nope": {}}), r"config key method_settings.nope: unknown method 'nope'"),
    (lambda c: c.update(metrics=["acc", "ece.conf.em.l1"]), r"config key metrics: unknown metric id "
                                                            r"'ece.conf.em.l1'; closest known ids: ece.conf.emcv.l1"),
])
def test_config_errors_name_the_key_and_the_allowed_values(mutate, message):
    with pytest.raises(ConfigError, match=message):
        check(mutate)
