"""The command line's conventions (docs/command_line.md): one exit-status table (0 done, 1 a user error, 2 a usage
error), a user error as one line on stderr and never a traceback, ``--json`` on every listing and on ``validate``,
``--version``, and the job-level debug commands under ``calbench job``."""

from __future__ import annotations

import json

import pytest
import yaml

from calbench.__main__ import main
from calbench.cli import OK, USAGE, USER_ERROR
from calbench.version import __version__
from conftest import user_config


def test_the_exit_statuses_are_the_documented_ones():
    assert (OK, USER_ERROR, USAGE) == (0, 1, 2)


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == OK and capsys.readouterr().out.strip() == f"calbench {__version__}"


def test_a_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["apply"])  # its arguments missing
    assert exit_.value.code == USAGE and "usage: calbench apply" in capsys.readouterr().err


def test_a_user_error_is_one_line_on_stderr_and_exits_1(tmp_path, capsys):
    assert main(["apply", str(tmp_path / "none.safetensors"), str(tmp_path / "x.npy"), "-o",
                 str(tmp_path / "y.npy")]) == USER_ERROR
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert captured.err.startswith("calbench apply: error: ") and "no such calibrator file" in captured.err


def test_validate_puts_problems_on_stderr_and_json_on_stdout(tmp_path, capsys):
    config = user_config(tmp_path)
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["validate", str(path), "--json"]) == OK
    assert json.loads(capsys.readouterr().out) == {"config": str(path), "valid": True, "problems": [],
                                                   "warnings": [], "sources": 1, "methods": 2}
    config["metrics"] = ["nope"]
    path.write_text(yaml.safe_dump(config))
    assert main(["validate", str(path)]) == USER_ERROR
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1 and "nope" in captured.err
    assert main(["validate", str(path), "--json"]) == USER_ERROR
    record = json.loads(capsys.readouterr().out)
    assert record["valid"] is False and len(record["problems"]) == 1 and record["sources"] is None


def test_every_listing_prints_json(capsys):
    from calbench.methods import available
    from calbench.metrics.registry import described_ids

    assert main(["methods", "--json"]) == OK
    methods = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in methods] == available() and all(m["summary"] for m in methods)
    assert main(["metrics", "--json"]) == OK
    metrics = json.loads(capsys.readouterr().out)
    assert [m["id"] for m in metrics] == [usage for usage, _, _ in described_ids()]
    assert {m["direction"] for m in metrics} <= {"higher is better", "lower is better", "signed, 0 is best",
                                                 "the direction of its base metric"}


def test_verbose_methods_json_holds_every_fact(capsys):
    assert main(["methods", "--json", "--verbose"]) == OK
    ts = next(m for m in json.loads(capsys.readouterr().out) if m["name"] == "ts")
    assert set(ts) == {"name", "summary", "settings", "grid", "input", "keeps_argmax", "cost", "exports_to_torch"}
    assert ts["keeps_argmax"] is True


def test_the_job_commands_are_under_job(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(user_config(tmp_path)))
    for old in ("dump", "calibrate", "evaluate"):
        with pytest.raises(SystemExit):
            main([old, "--config", "config.yaml", "--source", "my_model"])
    capsys.readouterr()
    assert main(["job", "dump", "--config", "config.yaml", "--source", "nope"]) == USER_ERROR
    assert capsys.readouterr().err.startswith("calbench job: error: config.yaml: no source 'nope'")
    assert main(["job", "dump", "--config", "config.yaml", "--source", "my_model"]) == OK
    assert (tmp_path / "results" / "dumps" / "my_model.h5").is_file()
