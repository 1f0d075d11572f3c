"""Run a rule's script (``workflow/scripts/calibrate.py``, ``evaluate.py``) from the job that the rule's shell
command describes (``workflow/scripts/job_runner/client.py``): in a child of the local job runner
(:mod:`calbench.jobs.runner`), or where there is none in a process of its own::

    python -m calbench.jobs.script_job JOB_JSON

The script reads what it needs of Snakemake's ``snakemake`` object (rule, config, wildcards, log, threads) from a
:class:`ScriptJob`; the config is the run's resolved config, which the Snakefile writes once per content
(:func:`config_snapshot`), so that no job's command carries it.
"""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path

from calbench.atomic import write_text_atomic

#: The folder of the config snapshots, in the run's working directory beside Snakemake's own records.
SNAPSHOTS = Path(".snakemake") / "calbench-config"


@dataclass(frozen=True)
class ScriptJob:
    """What the rule scripts read of Snakemake's ``snakemake`` object."""

    rule: str
    config: dict
    wildcards: dict
    threads: int = 1
    log: list = field(default_factory=list)


def config_snapshot(config: dict, folder: Path = SNAPSHOTS) -> str:
    """The path of the resolved ``config`` as JSON, named by its SHA-256 (written where missing)."""
    text = json.dumps(config, sort_keys=True)
    path = Path(folder) / f"{hashlib.sha256(text.encode()).hexdigest()}.json"
    if not path.exists():
        write_text_atomic(path, text)
    return str(path)


def run(job: dict) -> None:
    """Run ``job["script"]`` as Snakemake runs a script (``__main__``, its folder on ``sys.path``), its
    ``snakemake`` the :class:`ScriptJob` of ``job`` (the client's description)."""
    config = json.loads(Path(job["config"]).read_text())
    smk = ScriptJob(rule=job["rule"], config=config, wildcards=dict(job["wildcards"]), threads=int(job["threads"]),
                    log=[job["log"]] if job["log"] else [])
    script = job["script"]
    sys.path.insert(0, os.path.dirname(script))
    sys.argv = [script]
    runpy.run_path(script, init_globals={"snakemake": smk}, run_name="__main__")


if __name__ == "__main__":
    run(json.loads(sys.argv[1]))
