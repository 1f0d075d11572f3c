"""The scale benchmarks of the parametric methods (src/calbench/perf/scale_param.py)."""

import numpy as np
import pytest

from calbench.methods import available, make
from calbench.perf import discover
from calbench.perf.scale_param import PARAMETRIC, overconfident_logits


def test_overconfident_logits_are_accurate_and_overconfident_by_their_planted_temperature():
    z, y = overconfident_logits(3000, seed=0)
    assert z.shape == (3000, 1000)
    assert 0.75 < np.mean(z.argmax(axis=1) == y) < 0.85  # an ImageNet-1k CNN's top-1
    assert make("ts").fit(z, y).temperature_ == pytest.approx(1.5, abs=0.1)


def test_every_parametric_method_has_both_scale_benchmarks():
    names = {name for name, _, _ in discover()}
    for method in PARAMETRIC:
        assert all(step in available() for step in method.split("+"))
        assert {f"scale_param_1000.{method}", f"scale_param_cifar100.{method}"} <= names
