"""A model source's warnings travel as an imported source's do: what its train and dump jobs raise is recorded in the
dump's attributes (the train job's through the weights file), and from there reaches every calibrate and evaluate
job, results/tables/warnings.csv, the tables of summary.md, the console's closing lines and ``calbench recommend``."""

import json
import warnings

import pytest
import yaml

pytest.importorskip("torch", reason="the model sources need torch: pip install 'calbench[models]'")

from calbench.cli import main  # noqa: E402
from calbench.config import load  # noqa: E402
from calbench.data import store  # noqa: E402
from calbench.jobs import calibrate, evaluate, model_dump, model_specs, paths, sources, tables  # noqa: E402
from calbench.jobs import models as train_jobs  # noqa: E402
from calbench.report.warnings import read_warnings  # noqa: E402
from conftest import DOWNLOADS  # noqa: E402
from snakemake_logger_plugin_calbench import closing_lines  # noqa: E402

METHODS, METRICS = ["uncal", "ts"], ["acc", "nll"]
TRAINED, DUMPED = "the training loss did not fall (stand-in)", "the held-out images are few (stand-in)"


def _warning_after(function, message):
    def warned(*args, **kwargs):
        out = function(*args, **kwargs)
        warnings.warn(message, UserWarning, stacklevel=2)
        return out
    return warned


def test_warnings_of_the_train_and_dump_jobs_of_a_model_source_reach_the_tables_console_and_recommend(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({
        "seeds": [0], "methods": METHODS, "metrics": METRICS, "downloads_dir": str(DOWNLOADS),
        "sources": {"tiny": {"type": "train", "dataset": "digits", "sizes": {"train": 120, "cal": 60, "test": 60},
                             "split": {"cal_size": 60}, "model": "timm:vit_tiny_patch16_224",
                             "model_kwargs": {"img_size": 8, "patch_size": 4, "in_chans": 1, "depth": 1,
                                              "embed_dim": 16, "num_heads": 2},
                             "recipe": {"epochs": 1, "batch_size": 32, "seed": 3}, "threads": 1}}}))
    config = load("config.yaml")
    monkeypatch.setattr(train_jobs, "train", _warning_after(train_jobs.train, TRAINED))
    monkeypatch.setattr(model_dump, "model_outputs", _warning_after(model_dump.model_outputs, DUMPED))
    train_jobs.train_job(spec=model_specs.train_spec(config, source="tiny"), progress=False)
    model_dump.dump_model_job(spec=model_specs.dump_spec(config, source="tiny"), progress=False)
    dumped = store.read_warnings(paths.DUMP.format(source="tiny"))
    assert [(w["stage"], w["message"]) for w in dumped] == [("train", TRAINED), ("dump", DUMPED)]
    sources.draw_split_job(spec=sources.split_spec(config, source="tiny", seed=0))
    for method in METHODS:
        calibrate.calibrate_job(spec=calibrate.spec(config, source="tiny", method=method, seed=0))
        evaluate.evaluate_job(spec=evaluate.spec(config, source="tiny", method=method, seed=0))
    tables.aggregate_job(spec=tables.spec(config))

    rows = read_warnings(tmp_path / "results")
    assert {(r["method"], r["stage"], r["message"]) for r in rows} >= {
        (m, stage, message) for m in METHODS for stage, message in (("train", TRAINED), ("dump", DUMPED))}
    summary = (tmp_path / paths.SUMMARY).read_text()
    assert f"- tiny (every method; seed 0), dump job: UserWarning: {DUMPED}" in summary
    assert f"- tiny (every method; seed 0), train job: UserWarning: {TRAINED}" in summary
    closing = "\n".join(closing_lines(["snakemake", "--configfile", "config.yaml"]))
    assert TRAINED in closing and DUMPED in closing
    assert main(["recommend", "results", "--metric", "nll"]) == 0
    out = capsys.readouterr().out
    assert f"dump job: UserWarning: {DUMPED}" in out and f"train job: UserWarning: {TRAINED}" in out
    assert main(["recommend", "results", "--metric", "nll", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)[0]
    assert {w["message"] for w in best["warnings"]} >= {TRAINED, DUMPED}
