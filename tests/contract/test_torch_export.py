"""calbench.torch.calibrated: every registered method (and chains of exportable stages) either exports a torch
module equal to its predict_proba, or refuses naming the method; a model's probability outputs are read as the
calibrator was fitted (``input_kind_``) or refused."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import calbench  # noqa: E402
import calbench.torch as ctorch  # noqa: E402
from calbench import Scores  # noqa: E402
from calbench.methods import available, make, method_class  # noqa: E402
from calbench.methods.temperature import TemperatureScaling  # noqa: E402

K = 5
#: Small but real settings (speed only): fewer folds and grid points than the defaults.
GRID = {"reg_lambda": [1e-3, 1e-1], "reg_mu": [1e-3]}
FAST = {"pl_ovr": {"n_folds": 3}, "pl3_ovr": {"n_folds": 3}, "pl_conf": {"n_folds": 3}, "pl3_conf": {"n_folds": 3},
        "lece": {"grid": {"q": [0.1, 1.0]}, "cv": {"folds": 3}},
        "lecd": {"grid": {"q": [0.1, 1.0]}, "cv": {"folds": 3}},
        "dir_l2": {"grid": {"reg_lambda": [0.1, 1.0]}, "cv": {"folds": 3}},
        "ms_odir": {"grid": GRID, "cv": {"folds": 3}}, "dir_odir": {"grid": GRID, "cv": {"folds": 3}},
        "kcal": {"steps_per_epoch": 5, "max_epochs": 2, "n_folds": 3, "device": "cpu"},
        "kcal_logits": {"steps_per_epoch": 5, "max_epochs": 2, "n_folds": 3, "device": "cpu"}}
#: Chains of exportable stages (SMS/SVS and the affine maps after TS, a map after a map) and two that refuse.
CHAINS = ["ts+sms", "ts+svs", "ts+vs", "ts+dir_odir", "ts+platt", "ets+ms", "dir+ts", "sms+ts", "ts+ms_odir+beta",
          "ts+lece", "vs+irm"]
#: (rows, classes) of the calibration set; the test set has 97 rows.
SIZES = [(150, 2), (300, 6), (500, 10)]


def build(name: str):
    return make(name, **({p: FAST.get(p, {}) for p in name.split("+")} if "+" in name else FAST.get(name, {})))


def random_scores(rng, n: int, k: int, embeddings: bool = False):
    """Logits of a classifier that is right ~60 % of the time, overconfident (scale 3), every class present."""
    y = rng.integers(0, k, n)
    y[:k] = np.arange(k)
    z = 3.0 * (rng.normal(0.0, 1.5, (n, k)) + 2.0 * np.eye(k)[y])
    return Scores(z, rng.normal(size=(n, 6)) + 3.0 * np.eye(k, 6)[y] if embeddings else None), y


def fitted(name: str, rng, n: int, k: int):
    trains = "train" in method_class(name.split("+")[0]).needs
    cal, y = random_scores(rng, n, k, embeddings=trains)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of small fits are not the point here
        if trains:
            train, y_train = random_scores(rng, n, k, embeddings=True)
            return build(name).fit(cal, y, train=(train, y_train))
        return build(name).fit(cal, y)


@pytest.mark.parametrize("name", available() + CHAINS)
def test_every_method_exports_what_predict_proba_computes_or_refuses(name):
    """The property of the export contract (``Calibrator.torch_stage``): on random logits of several sizes the
    exported module equals ``predict_proba`` within 1e-6, or ``calibrated`` refuses naming the method."""
    rng = np.random.default_rng(sum(map(ord, name)))
    for n, k in SIZES:
        if "train" in method_class(name.split("+")[0]).needs and k != 6:
            continue  # one size: each fit trains a projection
        cal = fitted(name, rng, n, k)
        test, _ = random_scores(rng, 97, k, embeddings="embeddings" in cal.needs)
        try:
            head = ctorch.calibration_module(cal, outputs="logits")
        except ValueError as error:
            assert "cannot be exported to torch" in str(error)
            assert any(part in str(error) for part in name.split("+")), str(error)
            return
        with torch.no_grad():
            got = head(torch.from_numpy(test.logits)).numpy()
        np.testing.assert_allclose(got, cal.predict_proba(test), rtol=0, atol=1e-6, err_msg=f"{name}, {k} classes")


def test_methods_that_export_are_the_parametric_maps():
    """Guards the property above against vacuity: the parametric maps (SMS and SVS included) do export."""
    rng = np.random.default_rng(0)
    exported = []
    for name in available():
        if "train" in method_class(name).needs:
            continue
        try:
            fitted(name, rng, 150, 3).to_torch()
            exported.append(name)
        except ValueError:
            pass
    assert exported == ["bcts", "beta", "conf_ts", "dir", "dir_diag", "dir_l2", "dir_odir", "ets", "ms", "ms_odir",
                        "nbvs", "platt", "quad_scaling", "sms", "svs", "ts", "tva_ts", "uncal", "vs"]


def test_a_subclass_that_computes_differently_refuses_to_export():
    """A class that overrides the prediction but not ``torch_stage`` inherits no export it does not compute."""

    class Squared(TemperatureScaling):
        def _predict_proba(self, scores):
            p = super()._predict_proba(scores) ** 2
            return p / p.sum(axis=1, keepdims=True)

    rng = np.random.default_rng(1)
    cal, y = random_scores(rng, 200, 3)
    with pytest.raises(ValueError, match="cannot be exported to torch: Squared overrides _predict_proba"):
        ctorch.calibrated(torch.nn.Identity(), Squared().fit(cal, y))


class TinyNet(torch.nn.Module):
    """A small convolutional classifier with random weights (no download)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(4, K)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3))) * 20.0


@pytest.fixture(scope="module")
def data():
    torch.manual_seed(0)
    net = TinyNet().eval()
    with torch.no_grad():
        x_cal, x_test = torch.randn(300, 3, 8, 8), torch.randn(40, 3, 8, 8)
        z_cal, z_test = net(x_cal).double().numpy(), net(x_test).numpy()
    y_cal = np.random.default_rng(0).integers(0, K, 300)
    y_cal[:K] = np.arange(K)
    return net, z_cal, y_cal, x_test, z_test


@pytest.mark.parametrize("name", ["ts", "sms", "dir_odir", "ts+svs"])
def test_a_loaded_calibrator_inside_a_model_scripts_and_exports(name, data, tmp_path):
    """What a user ships: the saved and loaded calibrator after a float32 model, eager, TorchScript and
    ``torch.export`` (batch size free), probabilities and log-probabilities."""
    net, z_cal, y_cal, x_test, z_test = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calbench.load(calbench.save(build(name).fit(z_cal, y_cal), tmp_path / "c.safetensors"))
    expected = cal.predict_proba(z_test.astype(np.float64))
    wrapped = ctorch.calibrated(net, cal).eval()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", FutureWarning)
        scripted = torch.jit.script(wrapped)
    exported = torch.export.export(wrapped, (x_test[:4],), dynamic_shapes=({0: torch.export.Dim.AUTO},)).module()
    with torch.no_grad():
        log_out = ctorch.calibrated(net, cal, log=True)(x_test)
        outs = [wrapped(x_test), scripted(x_test), exported(x_test), log_out.exp()]
    assert outs[0].dtype == torch.float32
    for out in outs:
        np.testing.assert_allclose(out.numpy(), expected, rtol=0, atol=1e-5)


def test_timm_model_wrapped(data):
    timm = pytest.importorskip("timm")
    _, z_cal, y_cal, _, _ = data
    model = timm.create_model("resnet10t", pretrained=False, num_classes=K).eval()
    x = torch.randn(4, 3, 32, 32)
    cal = make("ts").fit(z_cal, y_cal)
    with torch.no_grad():
        expected = cal.predict_proba(model(x).double().numpy())
        got = ctorch.calibrated(model, cal)(x)
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-5)


def test_a_model_ending_in_softmax_is_read_as_the_calibrator_was_fitted(data, tmp_path):
    """A model that outputs probabilities: a calibrator fitted on probabilities (``input_kind_ == "probs"``)
    reads ln p as at its fit, from the probabilities or from the logits alike; one fitted on logits refuses
    them (detected per batch, or declared with ``outputs="probs"``), naming the fix."""
    net, z_cal, y_cal, x_test, z_test = data
    softmax_net = torch.nn.Sequential(net, torch.nn.Softmax(dim=1)).eval()
    p_cal = Scores(z_cal).probs
    p_test = torch.softmax(torch.from_numpy(z_test).double(), dim=1).numpy()
    on_probs = calbench.load(calbench.save(make("dir").fit(Scores.from_probs(p_cal), y_cal), tmp_path / "p.safetensors",
                                           input_kind="probs"))
    expected = on_probs.predict_proba(Scores.from_probs(p_test))
    with torch.no_grad():
        for model in (softmax_net, net):
            for outputs in ("auto", "probs" if model is softmax_net else "logits"):
                got = ctorch.calibrated(model, on_probs, outputs=outputs)(x_test).numpy()
                np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5, err_msg=outputs)
        on_logits = make("dir").fit(z_cal, y_cal)
        with pytest.raises(ValueError, match="the model outputs probabilities .* fitted on logits; pass the model "
                                             "without its final softmax"):
            ctorch.calibrated(softmax_net, on_logits)(x_test)
        wrapped = ctorch.calibrated(softmax_net, on_logits)
        exported = torch.export.export(wrapped, (x_test[:4],), dynamic_shapes=({0: torch.export.Dim.AUTO},)).module()
        with pytest.raises(RuntimeError, match="the model outputs probabilities"):
            exported(x_test)
    with pytest.raises(ValueError, match="outputs='probs' declares probabilities .* fitted on logits"):
        ctorch.calibrated(softmax_net, on_logits, outputs="probs")
    with pytest.raises(ValueError, match="outputs: expected one of"):
        ctorch.calibrated(softmax_net, on_logits, outputs="softmax")


def test_importing_calbench_torch_keeps_the_real_torch():
    import importlib

    assert importlib.import_module("torch").nn is torch.nn and ctorch.nn is torch.nn
