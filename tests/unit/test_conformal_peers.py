"""calbench's conformal sets against the reference implementations on the same probabilities, calibration rows and
randomisation draws: MAPIE 1.6 (``SplitConformalClassifier``, prefit) and TorchCP 1.2 (``SplitPredictor`` with its
``LAC``, ``APS``, ``RAPS`` scores). Tolerance: MAPIE's thresholds agree to 1e-12, the memberships exactly (every
computation in float64 on both sides; TorchCP sums in another order: its thresholds agree to 1e-8)."""

import sys
import types

import numpy as np
import pytest

from calbench.metrics import conformal as cp
from conftest import reference

pytestmark = pytest.mark.peers

N_CAL, N_TEST, CLASSES, SEED = 400, 300, 7, 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    logits = rng.normal(size=(N_CAL + N_TEST, CLASSES)) * 2.0
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = (probs.cumsum(1) > rng.random(probs.shape[0])[:, None]).argmax(1)
    return probs, np.minimum(labels, CLASSES - 1)


class _Fixed:
    """A prefit classifier whose ``predict_proba`` of row indices returns those rows of a probability matrix."""

    def __init__(self, probs):
        self.probs, self.classes_ = probs, np.arange(probs.shape[1])

    def fit(self, X, y):
        return self

    def predict_proba(self, X):
        return self.probs[np.asarray(X)[:, 0].astype(int)]

    def predict(self, X):
        return self.predict_proba(X).argmax(1)


@pytest.mark.parametrize("score, ours, params", [("lac", "lac", None), ("aps", "aps", "randomized")])
def test_mapie_sets_and_thresholds(data, score, ours, params):
    classification = reference("mapie.classification", "MAPIE")
    probs, labels = data
    rows = np.arange(probs.shape[0])[:, None]
    model = classification.SplitConformalClassifier(estimator=_Fixed(probs), confidence_level=0.9,
                                                    conformity_score=score, prefit=True, random_state=SEED)
    model.conformalize(rows[:N_CAL], labels[:N_CAL])
    _, sets = model.predict_set(rows[N_CAL:], conformity_score_params=params and {"include_last_label": params})
    # MAPIE's APS score is cumsum − v·p̂_y with v = RandomState(seed).uniform, drawn again at prediction: u = 1 − v
    v = np.random.RandomState(SEED).uniform(size=N_CAL)
    mine, info = cp.prediction_sets(probs[:N_CAL], labels[:N_CAL], probs[N_CAL:], ours, 0.1, u_cal=1 - v,
                                    u_test=1 - np.random.RandomState(SEED).uniform(size=N_TEST))
    assert model._mapie_classifier.conformity_score_function_.quantiles_[0] == pytest.approx(info["q"], abs=1e-12)
    assert np.array_equal(sets[:, :, 0], mine)


@pytest.fixture()
def torchcp(monkeypatch):
    """TorchCP's classification package; its ConfTr losses import ``torchsort``, which no scores or predictor use
    and which does not build from source everywhere: a stand-in module lets the package import without it."""
    pytest.importorskip("torch", reason="TorchCP needs torch (extra `models`)")
    if "torchsort" not in sys.modules:
        try:
            import torchsort  # noqa: F401
        except ImportError:
            stand_in = types.ModuleType("torchsort")

            def unused(*args, **kwargs):
                raise AssertionError("torchsort stand-in: only TorchCP's ConfTr losses call it")

            stand_in.soft_rank = stand_in.soft_sort = unused
            monkeypatch.setitem(sys.modules, "torchsort", stand_in)
    # The Makefile installs TorchCP without its dependencies (pyproject's `reference` extra says why), so under
    # CALBENCH_REQUIRE_PEERS=1 a missing TorchCP fails like every other peer.
    score = reference("torchcp.classification.score", "torchcp")
    predictor = reference("torchcp.classification.predictor", "torchcp")
    return score, predictor


@pytest.mark.parametrize("construction", ["lac", "aps", "raps"])
def test_torchcp_sets_and_thresholds(data, torchcp, monkeypatch, construction):
    import torch

    score_module, predictor_module = torchcp
    probs, labels = data
    rng = np.random.default_rng(SEED)
    u_cal, u_test = rng.random(N_CAL), rng.random(N_TEST)
    settings = {"k_reg": 2, "lam": 0.05} if construction == "raps" else {}
    score = {"lac": lambda: score_module.LAC(score_type="identity"),
             "aps": lambda: score_module.APS(score_type="identity", randomized=True),
             "raps": lambda: score_module.RAPS(score_type="identity", randomized=True, penalty=0.05, kreg=2)}
    predictor = predictor_module.SplitPredictor(score[construction](), temperature=1)

    # TorchCP's score is cumsum − U·p̂ (U per row to calibrate, per entry for the sets): U = 1 − u of the row
    def rand(*shape, **kwargs):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, torch.Size)) else shape
        u = u_cal if shape == (N_CAL,) else np.broadcast_to(u_test[:, None], shape)
        return torch.as_tensor(1 - u, dtype=torch.float64)

    monkeypatch.setattr(torch, "rand", rand)
    predictor.calculate_threshold(torch.as_tensor(probs[:N_CAL]), torch.as_tensor(labels[:N_CAL]), alpha=0.1)
    theirs = predictor.predict_with_logits(torch.as_tensor(probs[N_CAL:])).numpy().astype(bool)  # [m, K] 0/1
    mine, info = cp.prediction_sets(probs[:N_CAL], labels[:N_CAL], probs[N_CAL:], construction, 0.1, u_cal=u_cal,
                                    u_test=u_test, **settings)
    assert float(predictor.q_hat) == pytest.approx(info["q"], abs=1e-8)
    assert np.array_equal(theirs, mine)
