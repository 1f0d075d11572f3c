"""Shift tables (docs/shift.md): severity means over families and seeds, ranks, and `recommend --under-shift`."""

import numpy as np
import pandas as pd
import pytest

from calbench.__main__ import main
from calbench.data import store
from calbench.jobs.shift import corrupted_images
from calbench.report.shift import (
    UNDER_SHIFT,
    figure_metrics,
    ranking_markdown,
    ranking_rows,
    severity_markdown,
    severity_means,
    shift_cells,
)


def _long():
    """On src: ts is best on the clean split, tsx degrades less and is best under shift."""
    rows = []
    for seed in (0, 1):
        rows += [("src", "ts", seed, "clean", "nll", 0.30 + 0.01 * seed), ("src", "tsx", seed, "clean", "nll", 0.35)]
        for family, step in (("rotate", 0.1), ("gaussian_noise", 0.3)):
            for severity in (1, 3):
                rows += [("src", "ts", seed, f"{family}/{severity}", "nll", 0.3 + step * severity),
                         ("src", "tsx", seed, f"{family}/{severity}", "nll", 0.35 + step * severity / 2)]
    return pd.DataFrame(rows, columns=["source", "method", "seed", "test_set", "metric", "value"])


def test_severity_means_average_families_and_seeds_as_ovadia():
    means = severity_means(_long(), "nll").loc["src"]
    assert means.at["ts", 0] == pytest.approx(0.305)
    assert means.at["ts", 1] == pytest.approx(0.3 + (0.1 + 0.3) / 2)
    assert means.at["tsx", 3] == pytest.approx(0.35 + (0.3 + 0.9) / 4)
    assert means.at["ts", UNDER_SHIFT] == pytest.approx(0.3 + (0.1 + 0.3 + 0.3 + 0.9) / 4)
    assert list(means.columns) == [0, 1, 3, UNDER_SHIFT]


def test_ranking_rows_keep_clean_rows_or_averages_the_shifted_sets():
    clean = ranking_rows(_long())
    assert "test_set" not in clean and len(clean) == 4
    shifted = ranking_rows(_long(), under_shift=True).set_index(["method", "seed"])["value"]
    assert shifted[("ts", 0)] == pytest.approx(0.3 + (0.1 + 0.3 + 0.3 + 0.9) / 4)
    with pytest.raises(ValueError, match="no shifted test sets"):
        ranking_rows(_long().query("test_set == 'clean'"), under_shift=True)


def test_recommend_under_shift_ranks_by_the_mean_over_shifted_sets(tmp_path, capsys):
    (tmp_path / "tables").mkdir()
    _long().to_csv(tmp_path / "tables/metrics_long.csv", index=False)
    assert main(["recommend", str(tmp_path), "--metric", "nll"]) == 0
    assert next(line for line in capsys.readouterr().out.splitlines() if line.startswith("src:")).startswith("src: ts ")
    assert main(["recommend", str(tmp_path), "--metric", "nll", "--under-shift"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("ranked by the mean over the shifted test sets")
    assert next(line for line in out if line.startswith("src:")).startswith("src: tsx 0.550 ")


def test_a_metric_without_shifted_rows_gets_a_note_and_no_ranking_column():
    synthetic = pd.DataFrame([("syn", "ts", 0, "clean", "true_ce.conf.l1", 0.01)], columns=_long().columns)
    long = pd.concat([_long(), synthetic])
    rng = np.random.default_rng(0)
    outputs = {"probs": rng.dirichlet(np.ones(3), 50), "labels": rng.integers(3, size=50), "index": np.arange(50)}
    cells = shift_cells(long, ["nll", "true_ce.conf.l1"], lambda *key: outputs, resamples=20)
    assert set(cells["source"]) == {"src"} and set(cells["metric"]) == {"nll"}
    assert "No source with shifted test sets has this metric" in severity_markdown(long, "true_ce.conf.l1", cells)
    assert "true_ce" not in ranking_markdown(long, ["nll", "true_ce.conf.l1"])
    assert "**syn**" not in severity_markdown(long, "nll", cells) and "**src**" in severity_markdown(long, "nll", cells)


def test_the_tables_name_the_families_run_with_constants_scaled_to_the_image_side(tmp_path):
    """The note under a source's table comes from the corruptions' own rules at the corrupted images' side:
    pixelate's sides where :func:`calbench.corruptions.downsampled_sides` changed an int(side · c), the blur's
    factor where :func:`calbench.corruptions.blur_scale` is not 1, the elastic transform always."""
    extra = [("src", m, seed, f"{family}/1", "nll", 0.5) for m in ("ts", "tsx") for seed in (0, 1)
             for family in ("pixelate", "gaussian_blur", "elastic_transform")]
    long = pd.concat([_long(), pd.DataFrame(extra, columns=_long().columns)])
    rng = np.random.default_rng(0)
    outputs = {"probs": rng.dirichlet(np.ones(3), 50), "labels": rng.integers(3, size=50), "index": np.arange(50)}
    cells = shift_cells(long, ["nll"], lambda *key: outputs, resamples=20)

    def note(images):
        return [line for line in severity_markdown(long, "nll", cells, images=images).splitlines()
                if line.startswith("Constants")]

    (grey28,) = note({"src": (1, 28)})
    assert grey28.startswith("Constants scaled to these 28 px grey images")
    assert "`pixelate`: downsampled sides 17, 14, 11, 9, 7 px (int(side · c): 16, 14, 11, 8, 7)" in grey28
    assert "`elastic_transform`" in grey28 and "gaussian_blur" not in grey28 and "rotate" not in grey28
    (grey8,) = note({"src": (1, 8)})
    assert "`gaussian_blur`: the published stds × 0.286" in grey8
    assert "`pixelate`: downsampled sides 6, 5, 4, 3, 2 px (int(side · c): 4, 4, 3, 2, 2)" in grey8
    (colour32,) = note({"src": (3, 32)})
    assert "`elastic_transform`" in colour32 and "pixelate" not in colour32 and "gaussian_blur" not in colour32
    assert note(None) == [] and note({"other": (1, 28)}) == []
    no_elastic = long[~long["test_set"].str.startswith(("elastic", "pixelate"))]
    assert "every family's published ones on these 32 px colour images" in severity_markdown(
        no_elastic, "nll", cells, images={"src": (3, 32)})
    group = {"shift/rotate/1": {"logits": np.zeros((2, 3)), "labels": np.zeros(2, dtype=int)}}
    store.write_dump(tmp_path / "made.h5", group, {"rows_of": "test", "image_shape": [1, 28, 28]})
    store.write_dump(tmp_path / "imported.h5", group, {"rows_of": "own"})
    assert corrupted_images(tmp_path / "made.h5") == (1, 28) and corrupted_images(tmp_path / "imported.h5") is None


def test_the_figure_shows_ece_nll_brier_and_accuracy_of_the_configured_metrics():
    assert figure_metrics(["acc", "nll", "ece.cw.em15.l1", "ece.conf.em15.l1", "ece.conf.ew15.l1", "brier"]) == [
        "ece.conf.em15.l1", "nll", "brier", "acc"]


def test_the_figure_draws_boxes_over_families_and_seeds_with_their_numbers(tmp_path):
    """Ovadia et al. 2019 Fig. 2: per severity a box per method over corruption families (and seeds)."""
    from PIL import Image

    from calbench.report.shift import BOX_COLUMNS, severity_figure

    numbers = severity_figure(_long(), "src", ["nll"], tmp_path / "src.png")
    assert list(numbers.columns) == BOX_COLUMNS
    ts3 = numbers[(numbers["method"] == "ts") & (numbers["severity"] == 3)].iloc[0]
    values = np.array([0.6, 1.2, 0.6, 1.2])  # rotate and gaussian_noise at severity 3, two seeds each
    assert ts3["n"] == 4 and ts3["median"] == pytest.approx(np.median(values))
    assert [ts3["q1"], ts3["q3"]] == pytest.approx(np.quantile(values, [0.25, 0.75]).tolist())
    width, height = Image.open(tmp_path / "src.png").size
    assert max(width, height) / min(width, height) <= 3 and width * height <= 8e6


def test_the_figure_keeps_uncal_and_the_best_methods_under_shift_and_no_colour_twice():
    from calbench.report.plotting import distinct_colours
    from calbench.report.shift import FIGURE_METHODS, drawn_methods

    rows = [("src", f"m{i}", 0, test_set, "nll", i + severity) for i in range(10)
            for test_set, severity in (("clean", 0), ("rotate/1", 1))]
    long = pd.DataFrame(rows + [("src", "uncal", 0, "clean", "nll", 9.0), ("src", "uncal", 0, "rotate/1", "nll", 20)],
                        columns=_long().columns)
    methods, how = drawn_methods(long, "nll")
    assert methods == ["m0", "m1", "m2", "m3", "m4", "uncal"] and len(methods) == FIGURE_METHODS
    assert how == "uncal and the best under shift by nll"
    for n in (5, 16, 30):
        assert len(set(distinct_colours(n))) == n
