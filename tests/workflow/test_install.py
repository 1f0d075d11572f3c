"""The package as installed: a wheel in a fresh virtual environment validates a config, fits and applies (its
data files ship inside it); and without the `models` extra (torch, torchvision, timm, mlxtend) every non-model
method and metric imports and runs, and KCal says how to get torch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import yaml

from calbench.version import __version__

REPO = Path(__file__).resolve().parents[2]

#: Runs in a fresh interpreter where importing any package of the extra fails, as on a base install.
WITHOUT_EXTRA = """
import importlib.abc
import sys


class Blocker(importlib.abc.MetaPathFinder):  # `import torch` raises ImportError; find_spec gives None
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("torch", "torchvision", "timm", "mlxtend"):
            raise ModuleNotFoundError(f"No module named {name!r}")


sys.meta_path.insert(0, Blocker())
import numpy as np
import calbench
from calbench import Scores
from calbench.methods import available, make, method_class
from calbench.metrics import evaluate

rng = np.random.default_rng(0)
y = rng.integers(0, 3, 300)
z = rng.normal(size=(300, 3)) + 2.0 * np.eye(3)[y]
for name in available():
    if "train" in method_class(name).needs:
        try:
            scores = Scores(z, embeddings=z)
            make(name).fit(scores, y, train=(scores, y))
        except ImportError as err:
            assert "pip install 'calbench[models]'" in str(err), err
        else:
            raise AssertionError(name + " fitted without torch")
        continue
    settings = {"grid": None} if method_class(name).default_grid else {}
    cal = make(name, **settings).fit(z[:200], y[:200])
    probs = cal.predict_proba(z[200:])
    evaluate(probs, y[200:], METRICS, uncal_probs=probs)
    calbench.save(cal, PATH)  # saved calibrators need safetensors (a core dependency), not torch
    assert np.array_equal(calbench.load(PATH).predict_proba(z[200:]), probs)
print("ok", len(available()))
"""


def test_every_method_and_metric_runs_without_the_models_extra(tmp_path):
    metrics = [m for m in yaml.safe_load((REPO / "config" / "config.yaml").read_text())["metrics"]
               if not m.startswith(("true_ce", "cmee"))]  # these need a synthetic source's true map
    code = f"METRICS = {metrics!r}\nPATH = {str(tmp_path / 'cal.safetensors')!r}\n" + WITHOUT_EXTRA
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok")


def _run(args, cwd, env):
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def test_the_wheel_installed_in_a_fresh_environment_validates_fits_and_applies(tmp_path):
    """Build the wheel from the sources, install it (no dependencies) into a new virtual environment whose
    dependencies come from this one's site-packages, and run `calbench validate`, `fit` and `apply` there,
    outside the repository and without PYTHONPATH: the calbench that runs is the wheel's, and `calbench report` finds
    the Snakefile the wheel installed."""
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "Snakefile"):
        shutil.copy(REPO / name, tree / name)
    for folder in ("workflow", "profiles"):  # the workflow the wheel installs under share/calbench
        shutil.copytree(REPO / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w",
          tmp_path / "dist", tree], tmp_path, env)
    (wheel,) = (tmp_path / "dist").glob("calbench-*.whl")
    assert wheel.name.startswith(f"calbench-{__version__}-"), wheel.name  # pyproject reads calbench.version
    assert "calbench/config.schema.yaml" in zipfile.ZipFile(wheel).namelist()
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path, env)
    python = venv / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([python, "-c", purelib], tmp_path, env).strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # this one's packages
    _run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel], tmp_path, env)
    work = tmp_path / "work"
    work.mkdir()
    where = _run([python, "-c", "import calbench; print(calbench.__file__)"], work, env)
    assert Path(where.strip()).is_relative_to(site), where
    found = _run([python, "-c", "from calbench.cli.report import snakefile; print(snakefile(None))"], work, env)
    assert Path(found.strip()) == (venv / "share" / "calbench" / "Snakefile").resolve(), found  # calbench report's
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 600)
    z = 3.0 * (rng.normal(size=(600, 4)) + 1.5 * np.eye(4)[y])
    np.save(work / "cal.npy", z[:400])
    np.save(work / "y.npy", y[:400])
    np.save(work / "test.npy", z[400:])
    np.save(work / "logits.npy", z)
    np.save(work / "labels.npy", y)
    config = {"seeds": [0], "methods": ["ts", "dir_odir"], "metrics": ["nll", "ece.conf.em15.l1"],
              "sources": {"mine": {"type": "import", "format": "npy", "files": {"logits": "logits.npy",
                                                                                 "labels": "labels.npy"},
                                   "split": {"cal_size": 400}}}}
    (work / "my.yaml").write_text(yaml.safe_dump(config))
    calbench = venv / "bin" / "calbench"
    assert "valid" in _run([calbench, "validate", "my.yaml"], work, env)
    _run([calbench, "fit", "ts", "--scores", "cal.npy", "--labels", "y.npy", "-o", "ts.safetensors"], work, env)
    _run([calbench, "apply", "ts.safetensors", "test.npy", "-o", "probs.npy"], work, env)
    probs = np.load(work / "probs.npy")
    assert probs.shape == (200, 4) and np.allclose(probs.sum(axis=1), 1.0)
