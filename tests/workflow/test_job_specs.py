"""Each rule's files are its job's spec (calbench.jobs.spec): for every job of the DAG of every shipped config, the
inputs Snakemake resolved (but the code input) and the outputs it declared equal, name by name, the files of
``spec(config, **wildcards)``, its params hold the spec's settings, and every rule with a script has a spec. The
DAG is read in a fresh process through Snakemake's API (a dry run), once per shipped config: that dry run is also the
test that every shipped config passes one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from calbench.config import load
from calbench.jobs.spec import SPECS, spec_function
from conftest import REPO, stand_in_image_folders

CONFIGS = sorted(p.name for p in (REPO / "config").glob("*.yaml"))
#: One worker builds each config's DAG once for all the tests that read it (~3 to 9 CPU-s a config).
pytestmark = pytest.mark.xdist_group("job_specs")
#: Rules without a job: the target rule.
NO_JOB = {"all"}

DAG_JOBS = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings, StorageSettings

snakefile, configfile, workdir = sys.argv[1:4]
with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    workflow = api.workflow(snakefile=Path(snakefile), workdir=Path(workdir),
                            config_settings=ConfigSettings(configfiles=[Path(configfile)]),
                            resource_settings=ResourceSettings(cores=1), storage_settings=StorageSettings())
    workflow.dag(dag_settings=DAGSettings()).execute_workflow(executor="dryrun")
    jobs = [{"rule": job.rule.name, "wildcards": dict(job.wildcards_dict),
             "input": {name: [str(f) for f in ([files] if isinstance(files, str) else files)]
                       for name, files in job.input._allitems() if name},
             "output": {name: [str(f) for f in ([files] if isinstance(files, str) else files)]
                        for name, files in job.output._allitems() if name},
             "params": dict(job.params.items())}
            for job in workflow._workflow.dag.jobs]
    rules = {rule.name: bool(rule.script or "job_runner/client.py" in (rule.shellcmd or ""))
             for rule in workflow._workflow.rules}
print(json.dumps({"jobs": jobs, "rules": rules}))
"""


@pytest.fixture(scope="module")
def dags(tmp_path_factory):
    """Config name → (resolved config, the DAG's jobs, rule → runs a script, by ``script:`` or the job runner's
    client) of that shipped config, each built once when a test first asks for it: a cache, not a parametrised
    module fixture, which the random order would set up again at every change of parameter."""
    built = {}

    def dag(name):
        if name not in built:
            where = tmp_path_factory.mktemp(name.removesuffix(".yaml"))
            config = stand_in_image_folders(yaml.safe_load((REPO / "config" / name).read_text()), where)
            (where / name).write_text(yaml.safe_dump(config, sort_keys=False))
            run = subprocess.run([sys.executable, "-c", DAG_JOBS, str(REPO / "Snakefile"), str(where / name),
                                  str(where)], cwd=where, capture_output=True, text=True, timeout=600)
            assert run.returncode == 0, (name, run.stderr[-4000:])
            found = json.loads(run.stdout.strip().splitlines()[-1])
            built[name] = load(config), found["jobs"], found["rules"]
        return built[name]

    return dag


@pytest.fixture(params=CONFIGS)
def dag(request, dags):
    """(resolved config, the DAG's jobs, rule → runs a script) of a shipped config."""
    return dags(request.param)


def test_every_shipped_config_passes_a_dry_run(dag):
    """The dry run of the fixture ended without an error (it asserts so, naming the config) and planned jobs."""
    config, jobs, _ = dag
    assert config["sources"] and {job["rule"] for job in jobs} > NO_JOB


def test_every_rule_with_a_script_has_a_spec(dag):
    _, _, rules = dag
    assert {rule for rule, script in rules.items() if script} == set(SPECS)


def test_each_jobs_declared_files_and_params_are_its_specs(dag):
    config, jobs, _ = dag
    differ = []
    for job in jobs:
        if job["rule"] in NO_JOB:
            continue
        spec = spec_function(job["rule"])(config, **job["wildcards"])
        inputs = {name: files for name, files in job["input"].items() if name != "code"}
        expected = {name: files for name, files in spec.inputs().items()}
        if inputs != expected:
            differ.append((job["rule"], job["wildcards"], "input", inputs, expected))
        if job["output"] != spec.outputs():
            differ.append((job["rule"], job["wildcards"], "output", job["output"], spec.outputs()))
        if job["params"].get("settings", spec.params()) != spec.params():
            differ.append((job["rule"], job["wildcards"], "params", job["params"], spec.params()))
    assert not differ, differ[:3]
    assert len(jobs) > 1


def test_a_spec_names_its_files_by_role():
    """The roles of a spec's fields: files read, files written, settings (canonical JSON), the rest neither."""
    from calbench.jobs.calibrate import CalibrateSpec

    spec = CalibrateSpec(source="s", method="ts", seed=0, method_settings={"ts": {"b": 1, "a": 2}}, split=None,
                         input_kind="logits", dump="d.h5", test_rows=None, perturbed_cal=None, calibrated="c.h5",
                         calibrator="c.safetensors")
    assert spec.inputs() == {"dump": ["d.h5"], "test_rows": [], "perturbed_cal": []}
    assert spec.outputs() == {"calibrated": ["c.h5"], "calibrator": ["c.safetensors"]}
    assert json.loads(spec.params()) == {"method_settings": {"ts": {"a": 2, "b": 1}}, "split": None,
                                         "input_kind": "logits"}
    assert spec.params().index('"a"') < spec.params().index('"b"')  # sorted keys: reformatting changes nothing
