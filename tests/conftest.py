"""Shared fixtures: repository paths, the ../shared/data skip, the reference packages, a Snakemake runner for
workflow tests, and the guard that keeps ``make test-fast`` (``-m "not workflow and not peers and not slurm and not
browser"``) free of what is slow: a test that starts snakemake or a browser, or compares with a peer library, without
its marker fails, naming the marker."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
WORKFLOW_TESTS = REPO / "tests" / "workflow"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items):
    """Every test of tests/workflow/ carries the ``workflow`` marker by its folder (tests elsewhere that start a
    subprocess carry it by hand; tests/contract/test_test_layout.py checks both). A test that uses a module- or
    session-scoped fixture of its own module, and names no ``xdist_group``, is grouped with its module's tests, so
    that ``--dist loadgroup`` gives them one worker and the fixture is made once."""
    for item in items:
        if WORKFLOW_TESTS in item.path.parents:
            item.add_marker(pytest.mark.workflow)
        if item.get_closest_marker("xdist_group") is None and _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def _shares_a_module_fixture(item) -> bool:
    definitions = getattr(item, "_fixtureinfo", None)
    module = getattr(item, "module", None)
    if definitions is None or module is None:
        return False
    return any(fixture.scope in ("module", "session") and getattr(fixture.func, "__module__", None) == module.__name__
               for fixtures in definitions.name2fixturedefs.values() for fixture in fixtures)


def shared_data(*parts) -> Path:
    """Path inside ../shared/data; skips the test with a clear message where the folder is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs the real classifier outputs of {path} (the ../shared/data folder beside the repository); "
                    "absent here")
    return path


#: The test running in this process (set before its fixtures), for the marker guard; None between tests.
_RUNNING: list = [None]
#: What a test starts → the marker it must carry (pyproject's markers).
STARTS = {"snakemake": "workflow", "chromium": "browser", "chromium-browser": "browser", "google-chrome": "browser"}


#: Snakemake imports every executor plugin when it starts, and the SLURM plugin's help text runs ``scontrol show
#: config``, which waits ~2 s (slurm.conf's MessageTimeout) wherever SLURM's client is installed and no controller
#: runs, as in CI, which installs it for tests/workflow/test_slurm.py: the processes of every test not marked ``slurm``
#: find first on their PATH an ``scontrol`` that fails at once (the plugin then recommends no status command, which
#: a local run never uses).
_NO_SCONTROL: list = []


def _path_for(item) -> str:
    """PATH for ``item``'s processes: without the failing ``scontrol`` for a ``slurm`` test, with it otherwise."""
    if not _NO_SCONTROL:
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="calbench-no-scontrol-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        (Path(folder) / "scontrol").write_text("#!/bin/sh\nexit 1\n")
        (Path(folder) / "scontrol").chmod(0o755)
        _NO_SCONTROL[:] = [folder, os.environ.get("PATH", "")]
    folder, path = _NO_SCONTROL
    return path if item.get_closest_marker("slurm") else f"{folder}{os.pathsep}{path}"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _RUNNING[0] = item
    os.environ["PATH"] = _path_for(item)
    _fail_if_ungrouped(item)


def pytest_runtest_teardown(item):
    _RUNNING[0] = None


def require_marker(marker: str, what: str) -> None:
    """Fail the running test unless it (or its module or class) carries ``marker``: ``what`` needs it."""
    item = _RUNNING[0]
    if item is not None and item.get_closest_marker(marker) is None:
        pytest.fail(f"{item.nodeid} {what}: mark it @pytest.mark.{marker} (pyproject's markers; make test-fast "
                    f"deselects it)", pytrace=False)


def guarded_popen(init):
    """``subprocess.Popen.__init__`` that first fails the running test where it starts snakemake or a browser
    (:data:`STARTS`) without the marker."""

    def start(self, args, *rest, **options):
        argv = args.split() if isinstance(args, str) else [args] if isinstance(args, (bytes, os.PathLike)) else args
        for word in argv:
            name = Path(os.fsdecode(word)).name if isinstance(word, (str, bytes, os.PathLike)) else ""
            if name in STARTS:
                require_marker(STARTS[name], f"starts {name}")
        init(self, args, *rest, **options)

    return start


def pytest_configure(config):
    subprocess.Popen.__init__ = guarded_popen(subprocess.Popen.__init__)


#: Tests marked ``xdist_group`` that ``--dist loadgroup`` did not group (:func:`pytest_collection_finish`).
_UNGROUPED: set[str] = set()


def pytest_collection_finish(session):
    """Under ``--dist loadgroup`` a test marked ``xdist_group`` carries its group in its node id, which is how
    pytest-xdist sends a group to one worker. Where a pytest/xdist pairing drops it, each group's shared workflow run
    would be set up on every worker (the suite twice as long, with nothing failing): those tests fail instead."""
    if getattr(session.config.option, "loadgroup", False):
        _UNGROUPED.update(item.nodeid for item in session.items
                          if item.get_closest_marker("xdist_group") and "@" not in item.nodeid)


def _fail_if_ungrouped(item):
    if item.nodeid in _UNGROUPED:
        pytest.fail(f"--dist loadgroup does not group tests with pytest {pytest.__version__} and this pytest-xdist "
                    "(the group is missing from the test's node id): install the versions pyproject's `test` extra "
                    "names", pytrace=False)


def pytest_addoption(parser):
    parser.addoption("--cpu-seconds", type=int, metavar="N", default=None,
                     help="print the N tests that took the most CPU seconds, their own process's and those of the "
                          "processes they waited for (snakemake and its jobs), and the total; with -n 0")


#: CPU seconds of each test under --cpu-seconds (docs/developing.md, "Tests").
_CPU: dict[str, float] = {}


def _cpu_seconds() -> float:
    import resource

    return sum(usage.ru_utime + usage.ru_stime
               for usage in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under --cpu-seconds, the CPU seconds of the test's set-up (a shared run counts in its first test), call and
    teardown."""
    start = _cpu_seconds() if item.config.getoption("cpu_seconds") is not None else None
    yield
    if start is not None:
        _CPU[item.nodeid] = _cpu_seconds() - start


def pytest_terminal_summary(terminalreporter, config):
    count = config.getoption("cpu_seconds")
    if count is None or not _CPU:
        return
    terminalreporter.write_sep("=", f"{count} largest CPU seconds; all {len(_CPU)} tests: {sum(_CPU.values()):.0f} "
                                    "CPU-s")
    for nodeid, seconds in sorted(_CPU.items(), key=lambda item: -item[1])[:count]:
        terminalreporter.write_line(f"{seconds:8.1f}  {nodeid}")


def reference(module: str, distribution: str):
    """``module`` of a reference implementation of pyproject's ``reference`` extra (``distribution``). Where it is
    not importable the test skips, naming the package, or fails under ``CALBENCH_REQUIRE_PEERS=1`` (set by
    .ci/run, whose install includes that extra), so the comparisons with peers cannot skip in CI unnoticed. The
    test must be marked ``peers``."""
    require_marker("peers", f"compares with {distribution}")
    try:
        return importlib.import_module(module)
    except ImportError as error:
        reference_missing(f"{distribution} (extra `reference`: pip install -e '.[reference]') not importable: {error}")


def reference_missing(message: str):
    """Skip with ``message``, or fail under ``CALBENCH_REQUIRE_PEERS=1`` (see :func:`reference`)."""
    require_marker("peers", "compares with a peer library")
    if os.environ.get("CALBENCH_REQUIRE_PEERS") == "1":
        pytest.fail(message + " (CALBENCH_REQUIRE_PEERS=1)")
    pytest.skip(message)


def run_snakemake(workdir: Path, config: dict | None = None, *args: str, check: bool = True,
                  env: dict | None = None, snakefile: Path | None = None) -> subprocess.CompletedProcess:
    """Run the repository's Snakefile (or ``snakefile``) in ``workdir`` with ``config`` written to
    ``workdir/config.yaml``."""
    workdir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    cmd = [SNAKEMAKE, "-s", str(snakefile or REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "2", *args]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True,
                            env={**os.environ, **(env or {})}, timeout=900)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed ({result.returncode}):\n{result.stdout[-4000:]}\n"
                             f"{result.stderr[-6000:]}")
    return result


def image_folder(root: Path, classes: int = 3, per_class: int = 6, size: int = 12) -> Path:
    """A folder of ``classes`` class sub-folders (``n00``, ``n01``, …) of ``per_class`` random RGB PNGs of
    ``size`` × ``size + 2`` pixels, as torchvision's ``ImageFolder`` reads ImageNet's validation set."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for k in range(classes):
        (root / f"n0{k}").mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 256, size=(size, size + 2, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / f"n0{k}" / f"{i}.png")
    return root


def stand_in_image_folders(config: dict, where: Path) -> dict:
    """``config`` with each image-folder source's ``data_dir`` pointing at a stand-in :func:`image_folder` under
    ``where`` (two classes of one image), so that a dry run or a lint can build the DAG of a config whose images
    (ImageNet's validation set) are not on this machine; the images are inputs of its rules (docs/operations.md)."""
    sources = {name: {**entry, "data_dir": str(image_folder(where / "images" / name, classes=2, per_class=1))}
               if entry.get("dataset") == "imagefolder" else entry for name, entry in config["sources"].items()}
    return {**config, "sources": sources}


def user_config(folder, rows=600, classes=5, **source) -> dict:
    """A newcomer's config: their own npy logits (rows × classes) re-split into calibration and test."""
    import numpy as np

    rng = np.random.default_rng(0)
    np.save(folder / "logits.npy", (rng.normal(size=(rows, classes)) * 3).astype(np.float32))
    np.save(folder / "labels.npy", rng.integers(classes, size=rows))
    entry = {"type": "import", "format": "npy", "scores": "logits",
             "files": {"logits": str(folder / "logits.npy"), "labels": str(folder / "labels.npy")},
             "split": {"cal_size": rows // 2}, **source}
    return {"sources": {"my_model": entry}, "methods": ["uncal", "ts"], "metrics": ["acc", "nll", "ece.conf.em15.l1"]}


def dry_run_jobs(workdir: Path, *args: str, env: dict | None = None) -> dict[str, int]:
    """Job counts per rule that ``snakemake -n`` would run (empty when nothing is to do)."""
    result = run_snakemake(workdir, None, "-n", "--quiet", "rules", *args, env=env)
    counts = {}
    in_table = False
    for line in result.stdout.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            in_table = True
            continue
        if in_table and len(parts) == 2 and parts[1].isdigit():
            if parts[0] != "total":
                counts[parts[0]] = int(parts[1])
        elif in_table and parts and not set(parts[0]) <= {"-"}:
            in_table = False
    return counts


#: The config's download cache folder, as the schema defines it (jobs take it as the argument ``cache_dir``).
SCHEMA = yaml.safe_load((REPO / "src" / "calbench" / "config.schema.yaml").read_text())
DOWNLOADS = SCHEMA["properties"]["downloads_dir"]["default"]


class PlantedFile:
    """Unpickling this creates a file: what a crafted data or weights file could do to a plain ``pickle.load``
    or ``torch.load(weights_only=False)``. Tests pickle it and check that loading refuses it and nothing runs."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def write_label_shift_run(results: Path, long, resamples: dict) -> None:
    """A finished run's files as ``recommend --under-label-shift`` reads them: ``long`` as tables/metrics_long.csv
    and each ``(source, method, seed)``'s label-shift resamples in its metrics JSON."""
    import json

    (results / "tables").mkdir()
    long.to_csv(results / "tables" / "metrics_long.csv", index=False)
    for (source, method, seed), per_strength in resamples.items():
        folder = results / "metrics" / source / method
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"seed{seed}.json").write_text(json.dumps({"source": source, "method": method, "seed": seed,
                                                             "label_shift_resamples": per_strength}))


def write_finished_run(results: Path, outputs: dict, labels, metrics) -> None:
    """One seed of source ``src`` as a finished run leaves it in ``results``: each method's calibrated test outputs
    (``outputs``: method -> probabilities) and the long table of ``metrics`` on them."""
    import numpy as np
    import pandas as pd

    from calbench.data import store
    from calbench.metrics import evaluate

    rows = []
    for method, probs in outputs.items():
        path = results / "calibrated" / "src" / method / "seed0.h5"
        path.parent.mkdir(parents=True)
        store.write_calibrated(path, None, probs, [], np.arange(labels.size), labels, {})
        rows += [("src", method, 0, m, v) for m, v in evaluate(probs, labels, metrics).items()]
    (results / "tables").mkdir()
    pd.DataFrame(rows, columns=["source", "method", "seed", "metric", "value"]).to_csv(
        results / "tables" / "metrics_long.csv", index=False)


def load_script(name: str):
    """The module of ``scripts/NAME.py`` (the scripts are no package): the tests of generated pages call their
    functions."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
