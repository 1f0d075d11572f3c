"""The user's command line: fit → apply equals Python, bad inputs, recommend, listings."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import calbench
from calbench.__main__ import main
from calbench.methods import make
from calbench.scores import Scores

RNG = np.random.default_rng(0)
Z_CAL, Z_TEST = RNG.normal(size=(300, 4)) * 3, RNG.normal(size=(50, 4)) * 3
Y_CAL = RNG.integers(0, 4, 300)


@pytest.fixture
def files(tmp_path):
    np.save(tmp_path / "cal.npy", Z_CAL)
    np.save(tmp_path / "y.npy", Y_CAL)
    np.savetxt(tmp_path / "test.csv", Z_TEST, delimiter=",", fmt="%.17g")
    np.savez(tmp_path / "test.npz", logits=Z_TEST, other=np.zeros(3))
    return tmp_path


def test_fit_then_apply_equals_python_for_a_chain_with_settings(files):
    out = files / "cal.safetensors"
    assert main(["fit", "ts+lece", "--scores", str(files / "cal.npy"), "--labels", str(files / "y.npy"),
                 "--set", "lece.q=0.2", "--set", "lece.t=0", "--set", "lece.grid=null", "-o", str(out)]) == 0
    expected = make("ts+lece", lece={"q": 0.2, "t": 0.0, "grid": None}).fit(Z_CAL, Y_CAL).predict_proba(Z_TEST)
    assert main(["apply", str(out), str(files / "test.csv"), "-o", str(files / "p.npy")]) == 0
    assert main(["apply", str(out), str(files / "test.npz"), "-o", str(files / "p.csv")]) == 0
    np.testing.assert_allclose(np.load(files / "p.npy"), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.loadtxt(files / "p.csv", delimiter=","), expected, rtol=0, atol=1e-12)


def test_probabilities_fit_and_apply_as_probabilities(files):
    p_cal, p_test = Scores(Z_CAL).probs, Scores(Z_TEST).probs
    np.save(files / "pcal.npy", p_cal)
    np.save(files / "ptest.npy", p_test)
    out = files / "ts.safetensors"
    assert main(["fit", "ts", "--probs", "--scores", str(files / "pcal.npy"), "--labels", str(files / "y.npy"),
                 "-o", str(out)]) == 0
    assert main(["apply", str(out), str(files / "ptest.npy"), "-o", str(files / "p.npy")]) == 0
    expected = make("ts").fit(Scores.from_probs(p_cal), Y_CAL).predict_proba(Scores.from_probs(p_test))
    np.testing.assert_allclose(np.load(files / "p.npy"), expected, rtol=0, atol=1e-12)
    # the reverse mistake: logits given to a calibrator fitted on probabilities
    assert main(["apply", str(out), str(files / "test.csv"), "-o", str(files / "bad.npy")]) == 1
    assert not (files / "bad.npy").exists()


@pytest.fixture
def fitted(files):
    path = calbench.save(make("vs").fit(Z_CAL, Y_CAL), files / "vs.safetensors")
    return files, path


def _apply_fails(fitted, array, capsys, match):
    files, path = fitted
    np.save(files / "bad_in.npy", array)
    assert main(["apply", str(path), str(files / "bad_in.npy"), "-o", str(files / "out.npy")]) == 1
    assert not (files / "out.npy").exists()
    err = capsys.readouterr().err
    assert match in err, err


def test_wrong_number_of_classes(fitted, capsys):
    _apply_fails(fitted, np.zeros((5, 3)), capsys, "fitted on 4 classes")


def test_probabilities_given_to_a_logit_calibrator(fitted, capsys):
    _apply_fails(fitted, Scores(Z_TEST).probs, capsys, "fitted on logits: pass the classifier's logits")


def test_nan_and_inf_rows(fitted, capsys):
    bad = Z_TEST.copy()
    bad[3, 1] = np.nan
    _apply_fails(fitted, bad, capsys, "NaN or infinite values (first at row 3")
    bad[3, 1] = np.inf
    _apply_fails(fitted, bad, capsys, "NaN or infinite")


def test_truncated_calibrator_file(fitted, capsys):
    files, path = fitted
    path.write_bytes(path.read_bytes()[:-7])
    _apply_fails(fitted, Z_TEST, capsys, "truncated")


def test_unknown_method_and_bad_settings_are_one_line_errors(files, capsys):
    args = ["--scores", str(files / "cal.npy"), "--labels", str(files / "y.npy"), "-o", str(files / "x.safetensors")]
    assert main(["fit", "magic", *args]) == 1
    assert "unknown method 'magic'" in capsys.readouterr().err
    assert main(["fit", "ts+lece", "--set", "q=0.1", *args]) == 1
    assert "STAGE.NAME=VALUE" in capsys.readouterr().err
    assert not (files / "x.safetensors").exists()


def _long(tmp_path):
    """metrics_long.csv of a finished run: on src_a, ts beats uncal on every seed; on src_b, a near tie."""
    rows = []
    for seed in range(5):
        rows += [("src_a", "ts", seed, "nll", 0.50 + 0.01 * seed), ("src_a", "uncal", seed, "nll", 0.90 + 0.01 * seed),
                 ("src_a", "dir", seed, "nll", 0.60 + 0.02 * seed),
                 ("src_b", "ts", seed, "nll", 1.0 + 0.05 * (-1) ** seed), ("src_b", "uncal", seed, "nll", 1.01),
                 ("src_a", "ts", seed, "acc", 0.8)]
    (tmp_path / "tables").mkdir()
    pd.DataFrame(rows, columns=["source", "method", "seed", "metric", "value"]).to_csv(
        tmp_path / "tables/metrics_long.csv", index=False)
    saved = tmp_path / "calibrators/src_a/ts/seed0.safetensors"
    saved.parent.mkdir(parents=True)
    calbench.save(make("ts").fit(Z_CAL, Y_CAL), saved)
    return saved


def test_recommend_without_calibrated_outputs_ranks_the_table_and_tests_nothing(tmp_path, capsys):
    """A long table whose calibrated test outputs are gone: the means as the tables show them, no interval, no
    test (the paired bootstrap needs the test rows), the saved calibrator's path."""
    saved = _long(tmp_path)
    assert main(["recommend", str(tmp_path), "--metric", "nll"]) == 0
    out = capsys.readouterr().out.splitlines()
    a = next(line for line in out if line.startswith("src_a:"))
    assert a.startswith("src_a: ts 0.520 (no interval: the calibrated test outputs are missing"), a
    assert out[out.index(a) + 1].startswith("    untested: dir 0.640")
    assert f"saved calibrator: {saved}" in "\n".join(out)
    assert "(missing" in "\n".join(out)  # src_b's file does not exist in this fake run


def test_recommend_without_a_finished_run(tmp_path, capsys):
    assert main(["recommend", str(tmp_path)]) == 1
    assert "run the workflow first" in capsys.readouterr().err


def test_listings_are_plain_text(capsys):
    assert main(["methods", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "lece" in out and "settings: q=0.1, t=0.0, distance='kl', eps=1e-30" in out.replace("\n      ", " ")
    assert "keeps argmax: yes" in out and ":class:" not in out and "``" not in out
    assert main(["metrics"]) == 0
    metrics = capsys.readouterr().out
    assert "ece.{conf|cw}" in metrics and "(?P<" not in metrics and "\\." not in metrics


@pytest.mark.workflow
def test_console_script_entry_point_is_main():
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["calbench"] == "calbench.cli:main"
    assert subprocess.run([sys.executable, "-m", "calbench", "metrics"], capture_output=True).returncode == 0


@pytest.mark.filterwarnings("error::FutureWarning")
def test_readme_use_the_winner_runs_as_written(tmp_path, monkeypatch, capsys):
    """README's "Use the winner" blocks, run as written in a fresh directory (in this process: each
    ``calbench ...`` line through ``main``, the ``python -c`` and Python code through ``exec``)."""
    import re
    import shlex
    from pathlib import Path

    pytest.importorskip("timm")
    text = (Path(__file__).parents[2] / "README.md").read_text()
    section = text.split("## Use the winner", 1)[1].split("\n## ", 1)[0]
    shell, python = re.findall(r"```(?:bash|python)\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(tmp_path)
    for command in re.split(r"\n(?=calbench |python )", shell.strip()):
        words = shlex.split(command, comments=True)
        if words[0] == "calbench":
            assert main(words[1:]) == 0, command
        else:
            assert words[:2] == ["python", "-c"], command
            exec(words[2], {})
    exec(python, {})
    assert re.search(r"tensor\(\[1\.0*, 1\.0*\]\)", capsys.readouterr().out)
    np.testing.assert_allclose(np.load("probs.npy"), calbench.load("ts.safetensors").predict_proba(np.load("test.npy")),
                               rtol=0, atol=1e-12)
    assert abs(calbench.load("ts.safetensors").temperature_ - 3.0) < 0.3


def test_compile_warms_up_every_kernel_module_and_leaves_their_kernels_cached(capsys):
    """`calbench compile` (run by make after installing) runs each kernel module's warm-up once."""
    from calbench import kernels

    assert main(["compile"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [module.__name__.rsplit(".", 1)[-1] for module in kernels.modules()]
    assert [line.split(":")[0] for line in lines] == names
    assert {"piecewise", "neighbour_sums", "scaled_softmax", "kernel_sums", "softmax_residual"} <= set(names)
    cached = {path.name.split(".")[0] for path in Path(kernels.__file__).parent.glob("__pycache__/*.nbi")}
    assert set(names) <= cached


def test_fit_reports_its_progress_on_stderr(files, capsys):
    assert main(["fit", "dir_l2", "--scores", str(files / "cal.npy"), "--labels", str(files / "y.npy"),
                 "--set", "grid={reg_lambda: [0.01, 1.0]}", "-o", str(files / "d.safetensors")]) == 0
    err = capsys.readouterr().err
    assert "calbench fit: fitting dir_l2 on 300 x 4 logits" in err
    assert "fold 1/5 done (2 points" in err and "dir_l2 fitted in" in err


def test_validate_names_a_missing_config_once(tmp_path, capsys):
    missing = tmp_path / "nosuch.yaml"
    assert main(["validate", str(missing)]) == 1
    assert capsys.readouterr().err == f"{missing}: no such config file\n"
