"""Tiny configs and table readers shared by the workflow tests of tests/test_{slurm,reruns,resume,faults}.py."""

from __future__ import annotations

from pathlib import Path

TINY_METRICS = ["acc", "nll", "ece.conf.ew15.l1"]


def tiny_config(methods=("uncal", "ts"), seeds=(0,), metrics=TINY_METRICS, n_cal=300, n_test=500,
                method_settings=None) -> dict:
    """One small planted-temperature source: each job takes well under a second of computing."""
    config = {
        "seeds": list(seeds),
        "sources": {"tiny": {"type": "synthetic", "task": "planted_temperature", "num_classes": 4,
                             "temperature": 2.0, "n_cal": n_cal, "n_test": n_test}},
        "methods": list(methods),
        "metrics": list(metrics),
    }
    if method_settings:
        config["method_settings"] = method_settings
    return config


def table_texts(workdir: Path) -> dict[str, str]:
    """Every file of ``results/tables`` but runtime.md (timings differ between runs), by name."""
    tables = Path(workdir) / "results" / "tables"
    return {p.name: p.read_text() for p in sorted(tables.iterdir()) if p.name != "runtime.md"}
