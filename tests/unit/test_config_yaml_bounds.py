"""A config file is read within bounds and by name: an alias bomb (a few hundred bytes naming billions of nodes) is
refused before anything walks it; keys YAML reads as numbers, booleans or dates are refused with the fix (quote
them); two sources whose names differ only in case are refused; merge keys (``<<: *defaults``) are merged, a key
the mapping gives itself overriding a merged one, and a key the mapping gives twice still refused."""

from __future__ import annotations

import pytest

from calbench.config import MAX_YAML_NODES, ConfigError, read_config_file

BOMB = "\n".join([f'{chr(97 + i)}: &{chr(97 + i)} [' + ",".join([f"*{chr(96 + i)}"] * 9) + "]" if i else
                  'a: &a ["x","x","x","x","x","x","x","x","x"]' for i in range(9)]) + "\nmodel_kwargs: *i\n"


def _read(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return read_config_file(path)


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path):
    assert len(BOMB) < 800
    with pytest.raises(ConfigError, match=rf"config.yaml: not valid YAML \(its aliases \(\*name\) expand it to "
                                          rf"[\d,]+ nodes, more than {MAX_YAML_NODES:,}"):
        _read(tmp_path, BOMB)
    assert _read(tmp_path, "a: &a [1, 2]\nb: [*a, *a]\n") == {"a": [1, 2], "b": [[1, 2], [1, 2]]}


@pytest.mark.parametrize("key, kind", [("1", "int"), ("on", "bool"), ("2024-01-01", "date"), ("1.5", "float")])
def test_a_key_yaml_reads_as_no_name_is_refused(tmp_path, key, kind):
    with pytest.raises(ConfigError, match=rf"key '{key}' \(line 2\) is not a name: YAML reads it as the {kind} .*; "
                                          rf"quote it: '{key}'"):
        _read(tmp_path, f"sources:\n  {key}: {{type: synthetic}}\n")


def test_sources_differing_only_in_case_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"sources 'Cifar' and 'cifar' differ only in case"):
        _read(tmp_path, "sources:\n  Cifar: {type: synthetic}\n  cifar: {type: synthetic}\n")


def test_merge_keys_are_merged_and_a_key_given_twice_is_still_refused(tmp_path):
    text = "base: &base {task: planted_temperature, n_cal: 50}\nsources:\n  s:\n    <<: *base\n    n_cal: 80\n"
    assert _read(tmp_path, text)["sources"]["s"] == {"task": "planted_temperature", "n_cal": 80}
    with pytest.raises(ConfigError, match=r"key 'n_cal' is given twice in one mapping \(lines 5 and 6\)"):
        _read(tmp_path, text + "    n_cal: 90\n")
