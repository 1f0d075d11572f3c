"""calbench.jobs.script_job: the job a rule's shell command describes runs the rule's script as Snakemake would,
with the run's resolved config from its snapshot."""

from __future__ import annotations

import json

from calbench.jobs.script_job import config_snapshot, run


def test_the_config_snapshot_is_named_by_its_content_and_written_once(tmp_path):
    config = {"methods": ["ts", "ts+lece"], "sources": {"s": {"n_cal": 10}}, "seeds": [0, 1]}
    path = config_snapshot(config, folder=tmp_path)
    assert json.loads(open(path).read()) == config
    before = (tmp_path / path.split("/")[-1]).stat().st_mtime_ns
    assert config_snapshot(dict(reversed(config.items())), folder=tmp_path) == path  # the same content, any order
    assert (tmp_path / path.split("/")[-1]).stat().st_mtime_ns == before
    assert config_snapshot({**config, "seeds": [0]}, folder=tmp_path) != path


def test_run_gives_the_script_the_jobs_rule_config_wildcards_log_and_threads(tmp_path, monkeypatch):
    script = tmp_path / "rule_script.py"
    script.write_text("import json\nopen(snakemake.log[0], 'w').write(json.dumps([snakemake.rule, snakemake.config, "
                      "snakemake.wildcards, snakemake.threads, __name__]))\n")
    config = config_snapshot({"metrics": ["nll"]}, folder=tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    monkeypatch.setattr("sys.argv", ["pytest"])
    run({"rule": "evaluate", "script": str(script), "config": config, "threads": 2, "log": str(tmp_path / "job.log"),
         "wildcards": {"source": "s", "method": "ts", "seed": "0"}})
    assert json.loads((tmp_path / "job.log").read_text()) == [
        "evaluate", {"metrics": ["nll"]}, {"source": "s", "method": "ts", "seed": "0"}, 2, "__main__"]
