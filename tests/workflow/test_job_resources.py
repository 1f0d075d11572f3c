"""Each job declares the threads it runs on and reserves a GPU only where it uses one, so that Snakemake and
SLURM never put two multi-threaded jobs on one core nor hold a GPU for a CPU model (docs/operations.md)."""

from __future__ import annotations

import re

import pytest

from conftest import run_snakemake
from workflow_helpers import tiny_config


def _planned(workdir, config) -> dict[tuple[str, str], dict[str, str]]:
    """``(rule, source)`` → ``{"threads": ..., "gpu": ...}`` of every job ``snakemake -n`` plans."""
    out = run_snakemake(workdir, config, "-n").stdout
    jobs = {}
    # one block per job, from its "rule NAME:" line to the next (Snakemake puts no blank line between job blocks)
    for block in re.split(r"\n(?=\s*(?:local)?rule \w+:)", out):
        rule = re.search(r"^\s*(?:local)?rule (\w+):", block, flags=re.M)
        source = re.search(r"wildcards: source=([\w.-]+)", block)
        if rule and source:
            threads = re.search(r"^\s*threads: (\d+)", block, flags=re.M)
            gpu = re.search(r"\bgpu=(\d+)", block)
            jobs[(rule.group(1), source.group(1))] = {"threads": threads.group(1) if threads else "1",
                                                      "gpu": gpu.group(1) if gpu else "0"}
    return jobs


@pytest.mark.workflow
def test_calibrate_declares_calibrate_threads_and_model_jobs_reserve_a_gpu_only_for_cuda(tmp_path):
    config = tiny_config(methods=("ts",))
    digits = {"type": "train", "dataset": "digits", "sizes": {"train": 100, "cal": 40, "test": 40},
              "model": "torchvision:resnet18", "recipe": {"epochs": 1}}
    config["sources"].update({"cpu_model": digits, "gpu_model": {**digits, "device": "cuda", "threads": 2}})
    jobs = _planned(tmp_path / "default", config)
    assert {v["threads"] for (rule, _), v in jobs.items() if rule == "calibrate"} == {"1"}  # the schema's default
    assert jobs[("train_model", "cpu_model")] == {"threads": "1", "gpu": "0"}  # device auto: the CPU, no GPU held
    assert jobs[("train_model", "gpu_model")] == {"threads": "2", "gpu": "1"}
    assert jobs[("dump_model", "gpu_model")] == {"threads": "2", "gpu": "1"}

    jobs = _planned(tmp_path / "two", {**config, "calibrate_threads": 2})
    assert {v["threads"] for (rule, _), v in jobs.items() if rule == "calibrate"} == {"2"}
