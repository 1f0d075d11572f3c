"""calbench.torch.calibrated (issue 13): parametric calibrators inside a torch model, equal to predict_proba."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")

import calbench  # noqa: E402
import calbench.torch as ctorch  # noqa: E402
from calbench.methods import make  # noqa: E402

K = 5
GRID = {"reg_lambda": [1e-3, 1e-1], "reg_mu": [1e-3]}
CASES = {
    "uncal": {}, "ts": {}, "ets": {}, "vs": {}, "ms": {}, "dir": {}, "dir_diag": {},
    "dir_l2": {"grid": {"reg_lambda": [0.1, 1.0]}, "cv": {"folds": 3}},
    "ms_odir": {"grid": GRID, "cv": {"folds": 3}}, "dir_odir": {"grid": GRID, "cv": {"folds": 3}},
    "platt": {}, "beta": {},
}
CHAINS = {"ts+dir_odir": {"dir_odir": {"grid": GRID, "cv": {"folds": 3}}}, "ts+platt": {}, "ets+ms": {},
          "dir+ts": {}}


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


def _check(net, cal, x_test, z_test, tmp_path):
    cal = calbench.load(calbench.save(cal, tmp_path / "c.safetensors"))  # export what a user would load
    expected = cal.predict_proba(z_test.astype(np.float64))
    wrapped = ctorch.calibrated(net, cal).eval()
    scripted = torch.jit.script(wrapped)
    with torch.no_grad():
        out, out_scripted = wrapped(x_test), scripted(x_test)
        log_out = ctorch.calibrated(net, cal, log=True)(x_test)
    assert out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(out_scripted.numpy(), expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(log_out.exp().numpy(), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_parametric_methods_export_equal_to_predict_proba(name, data, tmp_path):
    net, z_cal, y_cal, x_test, z_test = data
    _check(net, make(name, **CASES[name]).fit(z_cal, y_cal), x_test, z_test, tmp_path)


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_chains_export_equal_to_predict_proba(chain, data, tmp_path):
    net, z_cal, y_cal, x_test, z_test = data
    _check(net, make(chain, **CHAINS[chain]).fit(z_cal, y_cal), x_test, z_test, tmp_path)


def test_timm_model_wrapped(data):
    timm = pytest.importorskip("timm")
    _, z_cal, y_cal, _, _ = data
    model = timm.create_model("resnet10t", pretrained=False, num_classes=K).eval()
    x = torch.randn(4, 3, 32, 32)
    cal = make("ts").fit(z_cal, y_cal)
    with torch.no_grad():
        expected = cal.predict_proba(model(x).double().numpy())
        got = torch.jit.script(ctorch.calibrated(model, cal))(x)
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["lece", "irova", "hist", "pl_ovr", "ts+irm"])
def test_non_parametric_methods_refuse_clearly(name, data):
    net, z_cal, y_cal, _, _ = data
    settings = {"lece": {"grid": None}, "pl_ovr": {"n_folds": 3, "max_pieces": 2}}.get(name, {})
    cal = make(name, **settings).fit(z_cal, y_cal)
    with pytest.raises(ValueError, match="cannot be exported to torch"):
        ctorch.calibrated(net, cal)


def test_importing_calbench_torch_keeps_the_real_torch():
    import importlib

    assert importlib.import_module("torch").nn is torch.nn and ctorch.nn is torch.nn
