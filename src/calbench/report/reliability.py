"""Reliability diagrams with diagonal filling (fit-on-test paper §4.5, Fig. 4; docs/figures_and_studies.md).

Each panel draws, for every bin k with edges [b_{k−1}, b_k], mean score p̄_k and observed frequency ȳ_k:

1. the classical bar outline at height ȳ_k (black);
2. the *diagonal filling*: a blue trapezoid over the bin whose top is the slope-1 line through
   (p̄_k, ȳ_k), i.e. y = x + (ȳ_k − p̄_k); the vertical distance between that top and the diagonal,
   averaged over instances, is the ECE (it is the paper's Theorem-2 fit-on-test map);
3. a red dot at (p̄_k, ȳ_k) and the dashed diagonal;
4. below the diagram, the histogram of bin counts (Fig. 4 row 3).

Targets: ``conf`` (top-label confidence against correctness, LECE paper Eq. 1) and ``cw`` (each class j
on its own: p̂_j against 1[y = j] over all instances, the classwise-ECE convention of the Dirichlet paper
Eq. 4). Bins follow :mod:`calbench.metrics.binning`; for equal-mass bins the edge between two bins is
the midpoint between the largest score of the one and the smallest of the next (0 and 1 at the ends).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.ticker import NullLocator

from calbench.metrics.binning import assign_bins, bin_sums, equal_mass_sizes
from calbench.report.plotting import plt, save_figure
from calbench.scores import check_labels, check_logits

TARGETS = ("conf", "cw")
#: Inches per panel (a method's diagram and histogram, for one class), and the fixed margins within it: what
#: constrained layout chooses for these labels, placed directly (laying out the 100 axes of a classwise figure
#: took 4 of its 9 s). ``left``: y label and tick labels; ``right``: the last x tick label; ``title``: the
#: two-line title above the diagram; ``gap``: between diagram and histogram; ``bottom``: x tick labels and
#: label; ``suptitle``: the figure title's band, ``suptitle_top`` the space above that title.
PANEL_SIZE = (3.4, 4.4)
LAYOUT = {"left": 0.58, "right": 0.15, "title": 0.47, "gap": 0.17, "bottom": 0.48, "suptitle": 0.25,
          "suptitle_top": 0.04}
#: Tick positions of the score and frequency axes (fixed: locating ticks anew on each of a classwise figure's 100
#: axes was a third of its drawing time).
TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
COLUMNS = ["method", "target", "bin", "lower", "upper", "count", "weight", "mean_score", "frequency", "gap"]


def _bin_edges(scores: np.ndarray, n_bins: int, scheme: str) -> np.ndarray:
    """Edges ``[n_cols, n_bins + 1]`` of the bins of each column of ``scores`` ``[N, n_cols]``."""
    n_cols = scores.shape[1]
    if scheme == "ew":
        return np.broadcast_to(np.linspace(0.0, 1.0, n_bins + 1), (n_cols, n_bins + 1)).copy()
    ordered = np.sort(scores, axis=0)
    ends = np.cumsum(equal_mass_sizes(scores.shape[0], n_bins))[:-1]  # first sorted position of bins 1..B−1
    inner = (ordered[np.maximum(ends - 1, 0)] + ordered[np.minimum(ends, scores.shape[0] - 1)]) / 2
    edges = np.concatenate([np.zeros((1, n_cols)), inner, np.ones((1, n_cols))]).T
    return np.maximum.accumulate(edges, axis=1)


def target_scores(probs: np.ndarray, labels: np.ndarray, target: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Scores and hits ``[N, n_cols]`` of a target, and the name of each column."""
    if target == "conf":
        hits = (probs.argmax(axis=1) == labels).astype(np.float64)
        return probs.max(axis=1, keepdims=True), hits[:, None], ["conf"]
    if target == "cw":
        onehot = np.zeros_like(probs)
        onehot[np.arange(labels.size), labels] = 1.0
        return probs, onehot, [f"class{j}" for j in range(probs.shape[1])]
    raise ValueError(f"reliability target must be one of {TARGETS}, got {target!r}")


def reliability_bins(probs, labels, target: str = "conf", n_bins: int = 15, scheme: str = "em",
                     method: str = "") -> pd.DataFrame:
    """Per-bin numbers of a diagram, one row per (target column, bin); columns :data:`COLUMNS`.

    ``mean_score`` is p̄_k, ``frequency`` ȳ_k (accuracy for ``conf``), ``gap`` ȳ_k − p̄_k, ``weight``
    |B_k|/n; empty bins have NaN means. Σ weight·|gap| over a column's bins is its binned ECE.
    """
    probs = check_logits(probs, name="probs").astype(np.float64)
    labels = check_labels(labels, probs.shape[1], probs.shape[0])
    if n_bins < 1:
        raise ValueError(f"reliability diagram: n_bins must be at least 1, got {n_bins}")
    scores, hits, names = target_scores(probs, labels, target)
    bins = assign_bins(scores, n_bins, scheme)
    counts, score_sum, hit_sum = bin_sums(bins, n_bins, scores, hits)
    edges = _bin_edges(scores, n_bins, scheme)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_score, frequency = score_sum / counts, hit_sum / counts
    n_cols = len(names)
    return pd.DataFrame({
        "method": method,
        "target": np.repeat(names, n_bins),
        "bin": np.tile(np.arange(n_bins), n_cols),
        "lower": edges[:, :-1].ravel(),
        "upper": edges[:, 1:].ravel(),
        "count": counts.ravel().astype(np.int64),
        "weight": (counts / probs.shape[0]).ravel(),
        "mean_score": mean_score.ravel(),
        "frequency": frequency.ravel(),
        "gap": (frequency - mean_score).ravel(),
    }, columns=COLUMNS)


def binned_ece(table: pd.DataFrame) -> float:
    """Σ_k |B_k|/n · |ȳ_k − p̄_k| of one diagram's rows (empty bins count zero)."""
    return float(np.nansum(table["weight"] * table["gap"].abs()))


def _quads(lower, upper, top_lower, top_upper) -> np.ndarray:
    """Corners ``[n, 4, 2]`` of quadrilaterals standing on y = 0 over [lower, upper], their top at height
    ``top_lower`` above ``lower`` and ``top_upper`` above ``upper``: bars, or the diagonal filling."""
    zero = np.zeros_like(lower)
    return np.stack([np.stack([lower, upper, upper, lower], 1), np.stack([zero, zero, top_upper, top_lower], 1)],
                    axis=2)


def _add_quads(ax, corners: np.ndarray, **style) -> None:
    """A panel's bars as one collection (one draw call instead of a patch per bin), resting on y = 0 as ``bar``'s."""
    quads = ax.add_collection(PolyCollection(corners, **style))
    quads.sticky_edges.y.append(0.0)


def draw_reliability(ax, ax_hist, table: pd.DataFrame, title: str, xlabel: str, ylabel: str) -> None:
    """One diagram (bars, diagonal filling, bin averages, diagonal) and its count histogram."""
    full = table[table["count"] > 0]
    lo, hi, gap, freq = (full[c].to_numpy() for c in ("lower", "upper", "gap", "frequency"))
    _add_quads(ax, _quads(lo, hi, lo + gap, hi + gap), facecolors="tab:blue", edgecolors="none", alpha=0.55,
               label="diagonal filling")
    _add_quads(ax, _quads(lo, hi, freq, freq), facecolors="none", edgecolors="black", linewidths=0.8,
               label="bin frequency")
    ax.plot([0, 1], [0, 1], linestyle="--", color="black", linewidth=0.8)
    ax.scatter(full["mean_score"], freq, s=12, color="tab:red", zorder=3, label="bin average")
    ax.set(xlim=(0, 1), ylim=(0, 1), ylabel=ylabel, title=f"{title}\nECE×100 = {100 * binned_ece(table):.2f}")
    ax.set(xticks=TICKS, yticks=TICKS)
    ax.tick_params(labelbottom=False)
    count = table["count"].to_numpy(np.float64)
    _add_quads(ax_hist, _quads(table["lower"].to_numpy(), table["upper"].to_numpy(), count, count),
               facecolors="0.6", edgecolors="0.3", linewidths=0.5)
    ax_hist.set(xlim=(0, 1), xticks=TICKS, xlabel=xlabel, ylabel="count")
    ax_hist.set_yscale("symlog", linthresh=1)
    ax_hist.yaxis.set_minor_locator(NullLocator())


def _panel_axes(fig, row: int, col: int, n_rows: int):
    """The diagram and histogram axes of panel (``row``, ``col``), placed at the fixed offsets :data:`LAYOUT`;
    the histogram is a third as tall as the diagram."""
    width, height = fig.get_size_inches()
    pitch = (height - LAYOUT["suptitle"]) / n_rows
    unit = (pitch - LAYOUT["title"] - LAYOUT["gap"] - LAYOUT["bottom"]) / 4
    left = col * PANEL_SIZE[0] + LAYOUT["left"]
    ax_width = PANEL_SIZE[0] - LAYOUT["left"] - LAYOUT["right"]
    hist_bottom = height - LAYOUT["suptitle"] - (row + 1) * pitch + LAYOUT["bottom"]
    diagram_bottom = hist_bottom + unit + LAYOUT["gap"]
    ax = fig.add_axes((left / width, diagram_bottom / height, ax_width / width, 3 * unit / height))
    return ax, fig.add_axes((left / width, hist_bottom / height, ax_width / width, unit / height))


SCHEME_NAMES = {"em": "equal-mass", "ew": "equal-width"}


def binning_text(target: str, n_bins: int, scheme: str) -> str:
    """``15 equal-mass bins, as the tables' ece.conf.em15.l1``: what a figure's ECE values are."""
    text = f"{n_bins} {SCHEME_NAMES[scheme]} bins, as the tables' ece.{target}.{scheme}{n_bins}.l1"
    return text + (" (the mean of the classes' values)" if target == "cw" else "")


def reliability_figure(tables: dict[str, pd.DataFrame], target: str, path, source: str = "",
                       max_classes: int = 10, scheme: str = "em") -> None:
    """Methods side by side (columns); for ``cw`` one row per class (the first ``max_classes``). The title
    names the binning (``scheme``: ``em`` equal mass, the default of the tables' ECE, or ``ew``), so that the
    panels' ECE values can be matched to a table."""
    methods = list(tables)
    if not methods:
        raise ValueError(f"reliability diagram of {source or 'a source'}: no method to draw; list methods that run "
                         "on this source under figures.reliability.methods")
    names = list(dict.fromkeys(tables[methods[0]]["target"]))[:max_classes]
    fig = plt.figure(figsize=(PANEL_SIZE[0] * len(methods), PANEL_SIZE[1] * len(names)))
    for row, name in enumerate(names):
        for col, method in enumerate(methods):
            sub = tables[method][tables[method]["target"] == name]
            ax, ax_hist = _panel_axes(fig, row, col, len(names))
            if target == "conf":
                draw_reliability(ax, ax_hist, sub, method, "confidence (top probability)", "accuracy")
            else:
                j = name.removeprefix("class")
                draw_reliability(ax, ax_hist, sub, f"{method}, class {j}", f"p̂_{j}", f"frequency of class {j}")
    n_bins = int(tables[methods[0]]["bin"].max()) + 1
    fig.suptitle(f"{source}: {'confidence' if target == 'conf' else 'classwise'} reliability diagrams, "
                 f"{binning_text(target, n_bins, scheme)}",
                 y=1 - LAYOUT["suptitle_top"] / fig.get_size_inches()[1])
    save_figure(fig, path, crop=False)
