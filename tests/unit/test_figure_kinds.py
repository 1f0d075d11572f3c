"""Every kind of reliability and shift figure holds in the configurations that broke them: one corruption family and
one seed (points with bars instead of zero-height boxes), 4 classes, and 100 classes (classwise panels of the
classes of largest ECE, named by ``class_names``). Each figure is checked as saved: no empty panel, no text under
8 pt, an aspect of at most 3:1; and a logit axis ends one decade beyond the data."""

from __future__ import annotations

import matplotlib.text
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy.special import softmax

from calbench.data import store
from calbench.jobs.reliability import ReliabilitySpec, reliability_job, reliability_panels
from calbench.report import plotting, reliability, shift
from calbench.report.plotting import save_figure


@pytest.fixture
def saved(monkeypatch):
    """The figures the modules save, kept open for inspection (then saved as usual)."""
    figures = []

    def keep(fig, path, crop=None):
        figures.append((fig, path))
        fig.canvas.draw()
        checks = _readable(fig)
        save_figure(fig, path, crop)
        figures[-1] = (checks, path)

    monkeypatch.setattr(reliability, "save_figure", keep)
    monkeypatch.setattr(plotting, "save_figure", keep)  # shift.py imports it when it draws
    return figures


def _readable(fig) -> dict:
    """What a reader needs of a figure: every visible panel draws something; the smallest visible text size."""
    panels = [ax for ax in fig.axes if ax.get_visible()]
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
    return {"empty": [ax.get_title() for ax in panels if not ax.has_data()],
            "smallest": min(t.get_fontsize() for t in texts), "legends": [t.get_text() for t in texts]}


def _check(checks, path):
    width, height = Image.open(path).size
    assert checks["empty"] == [], checks["empty"]
    assert checks["smallest"] >= 8, checks["smallest"]
    assert max(width, height) / min(width, height) <= 3, (width, height)


def _outputs(tmp_path, classes: int, seeds=(0,), n=3000, temperature=2.0):
    """Calibrated test outputs of an over-confident model (``uncal``) and a calibrated one (``ts``), per seed."""
    files = {"uncal": [], "ts": []}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        logits = rng.normal(size=(n, classes)) * 3 + 4 * np.eye(classes)[rng.integers(0, classes, n)]
        labels = np.array([rng.choice(classes, p=p) for p in softmax(logits, axis=1)])
        for method, t in (("uncal", temperature), ("ts", 1.0)):
            path = tmp_path / f"{method}{seed}.h5"
            probs = softmax(logits * t, axis=1)
            store.write_calibrated(path, probs[:2], probs, np.arange(2), np.arange(n), labels, {"method": method})
            files[method].append(str(path))
    return files


@pytest.mark.parametrize("classes, seeds", [(4, (0,)), (4, (0, 1)), (100, (0,))])
@pytest.mark.parametrize("target", ["conf", "cw"])
def test_reliability_figures_are_readable(tmp_path, saved, classes, seeds, target):
    names = [f"c{j:03d}" for j in range(classes)]
    reliability_job(spec=ReliabilitySpec(source="src", target=target, seeds=list(seeds), n_bins=15, scheme="em",
                                         max_classes=3, axis="auto", class_names=names,
                                         calibrated=_outputs(tmp_path, classes, seeds), figure=tmp_path / "f.png",
                                         table=tmp_path / "f.csv"))
    (checks, path), = saved
    _check(checks, path)
    if target == "cw":  # the classes named as the source names them
        assert any(text.startswith("c0") for text in checks["legends"]), checks["legends"]
    if target == "cw" and classes > reliability.CLASSWISE_ALL:  # the worst classes only, spread over the axis
        table = pd.read_csv(tmp_path / "f.csv")
        bins = table[(table["kind"] == "bin") & (table["count"] > 0)]
        assert set(bins["target"]) == {"3 classes of largest ECE pooled"}
        assert bins["mean_score"].max() > 0.5 and (bins["mean_score"] > 0.01).sum() >= 5
        assert any("classes of largest ECE" in text for text in checks["legends"])


@pytest.mark.parametrize("classes, seeds", [(4, (0,)), (4, (0, 1)), (100, (0,))])
def test_the_reports_row_of_panels_is_readable_and_fits_beneath_the_answer(tmp_path, saved, classes, seeds):
    """The report's first screen draws uncal beside the recommendation in one row (``row=True``): readable as the
    other figures, and shown 960 px wide (calbench.report.page) it stays under 560 px tall."""
    spec = ReliabilitySpec(source="src", target="conf", seeds=list(seeds), n_bins=15, scheme="em", max_classes=3,
                           axis="auto", class_names=None, calibrated=_outputs(tmp_path, classes, seeds),
                           figure=tmp_path / "f.png", table=tmp_path / "f.csv")
    panels, logit_axis, limits = reliability_panels(spec=spec)
    reliability.reliability_figure(panels, "conf", tmp_path / "row.png", "src", list(seeds), 15, "em", logit_axis,
                                   limits, row=True)
    (checks, path), = saved
    _check(checks, path)
    width, height = Image.open(path).size
    assert 960 * height / width <= 560, (width, height)
    assert not any(text.startswith("src: confidence reliability") for text in checks["legends"])  # the page's caption


def test_a_logit_axis_ends_one_decade_beyond_the_data():
    from scipy.special import expit

    from calbench.report.smooth_reliability import axis_range

    scores = np.concatenate([np.full(5, 1e-3), np.linspace(0.2, 1 - 1e-4, 990), np.full(5, 1 - 1e-4)])
    lo, hi = expit(np.array(axis_range(scores, True)))
    assert lo == pytest.approx(np.quantile(scores, 0.005) / 10) and 1 - hi == pytest.approx(1e-5)
    assert axis_range(scores, False) == (0.0, 1.0)


def _shift_long(families, seeds):
    rows = []
    for seed in seeds:
        for method, base in (("uncal", 0.9), ("ts", 0.5), ("vs", 0.55)):
            rows.append(("src", method, seed, "clean", "nll", base + 0.01 * seed))
            for k, family in enumerate(families):
                rows += [("src", method, seed, f"{family}/{s}", "nll", base + 0.1 * s * (1 + k)) for s in (1, 3, 5)]
    return pd.DataFrame(rows, columns=["source", "method", "seed", "test_set", "metric", "value"])


@pytest.mark.parametrize("families, seeds, boxes", [(["blur"], [0], False), (["blur", "noise"], [0, 1], False),
                                                    (["blur", "noise", "rotate"], [0, 1], True)])
def test_shift_figures_draw_boxes_only_over_five_values(tmp_path, saved, monkeypatch, families, seeds, boxes):
    """Ovadia et al. 2019 Fig. 2 draws boxes over corruption families; one family and one seed leave one value per
    box, drawn as a point with its range instead."""
    drawn = {"boxplot": 0, "errorbar": 0}
    for kind in drawn:
        original = getattr(plotting.plt.Axes, kind)

        def counted(self, *args, _original=original, _kind=kind, **kwargs):
            drawn[_kind] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(plotting.plt.Axes, kind, counted)
    numbers = shift.severity_figure(_shift_long(families, seeds), "src", ["nll"], tmp_path / "s.png")
    (checks, path), = saved
    _check(checks, path)
    # points for the clean split's seeds always (fewer than 5), boxes for the shifted severities from 5 values on
    assert (drawn["boxplot"] > 0, drawn["errorbar"] > 0) == (boxes, True)
    assert set(numbers["n"]) == {len(seeds), len(families) * len(seeds)}


def test_validate_checks_the_length_of_class_names(tmp_path, capsys):
    import yaml

    from calbench.__main__ import main

    rng = np.random.default_rng(0)
    np.save(tmp_path / "z.npy", rng.normal(size=(300, 4)).astype(np.float32))
    np.save(tmp_path / "y.npy", np.arange(300) % 4)
    source = {"type": "import", "format": "npy", "split": {"cal_size": 100}, "class_names": ["cat", "dog", "owl"],
              "files": {"logits": str(tmp_path / "z.npy"), "labels": str(tmp_path / "y.npy")}}
    config = {"seeds": [0], "methods": ["uncal", "ts"], "metrics": ["nll"], "sources": {"mine": source}}
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config))
    assert main(["validate", str(tmp_path / "my.yaml")]) == 1
    assert "sources.mine.class_names: 3 names, but the files hold 4 classes" in capsys.readouterr().err
    source["class_names"].append("eel")
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config))
    assert main(["validate", str(tmp_path / "my.yaml")]) == 0
