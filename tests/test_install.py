"""The base install (issue 17 point 7): without the `models` extra (torch, torchvision, timm, mlxtend)
every non-model method and metric imports and runs, and KCal says how to get torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

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
