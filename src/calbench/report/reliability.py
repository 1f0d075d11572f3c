"""Reliability diagrams as small multiples, one panel per method (docs/figures_and_studies.md).

Each panel draws, for the test predictions of the chosen seeds pooled:

1. the **binned** curve: the bin averages (p̄_k, ȳ_k) of the tables' binning (red dots), with Bröcker & Smith's
   consistency bars around the diagonal (grey; :mod:`calbench.report.smooth_reliability`);
2. the **smooth** curve (Błasiok & Nakkiran 2023) with its 95 % bootstrap band (blue);
3. beneath, the density of the scores: a histogram on a log count axis, so that empty and crowded regions show.

Both axes are logit-scaled where most scores lie within 0.05 of 0 or 1 (``axis: auto``). Panels print the tables'
binned ECE as mean ± std over the seeds. Targets: ``conf`` (top-label confidence against correctness, LECE paper
Eq. 1) and ``cw`` (p̂_j against 1[y = j], the classwise-ECE convention of the Dirichlet paper Eq. 4): its panels
pool every class's pairs into one curve and add the smooth curves of the classes with the largest classwise ECE.
Bins follow :mod:`calbench.metrics.binning`; for equal-mass bins the edge between two bins is the midpoint
between the largest score of the one and the smallest of the next (0 and 1 at the ends).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, NullLocator

from calbench.metrics.binning import assign_bins, bin_sums, equal_mass_sizes
from calbench.report.plotting import distinct_colours, plt, save_figure
from calbench.report.smooth_reliability import GriddedPairs, consistency_bars, from_axis, to_axis
from calbench.scores import check_labels, check_logits

TARGETS = ("conf", "cw")
#: Inches of one panel (diagram, then the density strip beneath it), and the most panels in a row.
PANEL_SIZE, STRIP, MAX_COLUMNS = 3.1, 0.8, 4
#: The same in a figure of one row (``row=True``: the report's first screen), and the width of its legend.
ROW_PANEL, ROW_STRIP, ROW_LEGEND = 2.6, 0.55, 2.0
#: Cells of the grid merged into one bar of the density strip (``GRID / 10`` bars).
CELLS_PER_BAR = 10
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
    return pair_bins(scores, hits, names, n_bins, scheme, method)


def pair_bins(scores: np.ndarray, hits: np.ndarray, names, n_bins: int, scheme: str, method: str = "") -> pd.DataFrame:
    """:func:`reliability_bins` of score and hit columns ``[N, n_cols]`` named ``names``."""
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
        "weight": (counts / scores.shape[0]).ravel(),
        "mean_score": mean_score.ravel(),
        "frequency": frequency.ravel(),
        "gap": (frequency - mean_score).ravel(),
    }, columns=COLUMNS)


def binned_ece(table: pd.DataFrame) -> float:
    """Σ_k |B_k|/n · |ȳ_k − p̄_k| of one diagram's rows (empty bins count zero)."""
    return float(np.nansum(table["weight"] * table["gap"].abs()))


SCHEME_NAMES = {"em": "equal-mass", "ew": "equal-width"}
#: The CSV beside a figure: the bins (``kind`` bin; band = consistency bars) and the smooth curves (``kind``
#: smooth; ``mean_score`` the mesh point, ``frequency`` the curve, band = bootstrap band, ``density`` of scores).
CSV_COLUMNS = ["method", "target", "kind", "seeds", *COLUMNS[2:], "band_low", "band_high", "density", "sigma"]


def binning_text(target: str, n_bins: int, scheme: str) -> str:
    """``15 equal-mass bins, as the tables' ece.conf.em15.l1``: what a figure's ECE values are."""
    text = f"{n_bins} {SCHEME_NAMES[scheme]} bins, as the tables' ece.{target}.{scheme}{n_bins}.l1"
    return text + (" (the mean of the classes' values)" if target == "cw" else "")


@dataclass
class Panel:
    """What one method's panel draws: pooled bins with consistency bars, the smooth curve with its band, the
    density strip, the tables' ECE over seeds and (classwise) the smooth curves of the worst classes."""

    method: str
    bins: pd.DataFrame
    smooth: pd.DataFrame
    strip: np.ndarray
    ece: np.ndarray
    classes: dict[str, pd.DataFrame] = field(default_factory=dict)
    worst_only: bool = False


def pooled_pairs(outputs, target: str) -> tuple[np.ndarray, np.ndarray]:
    """Scores and hits of the seeds' ``(probs, labels)`` pooled into one column (classwise: every class's pairs)."""
    pairs = [target_scores(probs, labels, target)[:2] for probs, labels in outputs]
    return (np.concatenate([s.ravel() for s, _ in pairs]), np.concatenate([h.ravel() for _, h in pairs]))


def _smooth_rows(pairs, sigma: float, method: str, target: str) -> pd.DataFrame:
    curve, low, high, density = pairs.curves(sigma)
    mesh = from_axis(pairs.mesh(), pairs.logit_axis)
    return pd.DataFrame({"method": method, "target": target, "kind": "smooth", "mean_score": mesh,
                         "frequency": curve, "gap": curve - mesh, "band_low": low, "band_high": high,
                         "density": density, "sigma": sigma})


#: Above this many classes a classwise panel draws the pairs of its classes of largest ECE only (every class's pairs
#: pooled would put every equal-mass bin near 0).
CLASSWISE_ALL = 20


def drawn_axis_bins(scores: np.ndarray, hits: np.ndarray, name: str, n_bins: int, logit_axis: bool, limits,
                    method: str = "") -> pd.DataFrame:
    """:func:`pair_bins` of one column with ``n_bins`` bins of equal width on the drawn axis (in u, between the
    axis ``limits``; scores beyond them in the end bins), so that the bins spread over the whole axis."""
    u = np.clip((to_axis(scores, logit_axis) - limits[0]) / (limits[1] - limits[0]), 0, 1 - 1e-12)
    k = (u * n_bins).astype(np.int64)
    counts = np.bincount(k, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_score = np.bincount(k, scores, n_bins) / counts
        frequency = np.bincount(k, hits, n_bins) / counts
    edges = from_axis(np.linspace(*limits, n_bins + 1), logit_axis)
    return pd.DataFrame({"method": method, "target": name, "bin": np.arange(n_bins), "lower": edges[:-1],
                         "upper": edges[1:], "count": counts, "weight": counts / scores.size, "mean_score": mean_score,
                         "frequency": frequency, "gap": frequency - mean_score}, columns=COLUMNS)


def class_label(j: int, class_names=None) -> str:
    """A class as the figures name it: its name where the source gives ``class_names``, else ``class j``."""
    return str(class_names[j]) if class_names else f"class {j}"


def reliability_panel(method: str, outputs, target: str, n_bins: int, scheme: str, logit_axis: bool,
                      limits: tuple[float, float], max_classes: int = 3, class_names=None) -> Panel:
    """A method's panel from the test ``(probs, labels)`` of each seed: the tables' binned ECE per seed, the bins
    and smooth curve of the pooled pairs and, for ``cw``, the ``max_classes`` classes of largest classwise ECE
    (mean over seeds) with their own smooth curves, named by ``class_names`` where given. Above
    :data:`CLASSWISE_ALL` classes the bins and curve pool only those classes' pairs, in bins of equal width on the
    drawn axis (:func:`drawn_axis_bins`)."""
    per_seed = [reliability_bins(probs, labels, target, n_bins, scheme) for probs, labels in outputs]
    class_ece = np.array([table.groupby("target", sort=False).apply(binned_ece, include_groups=False)
                          for table in per_seed])  # [seeds, columns]
    worst = np.argsort(-class_ece.mean(axis=0), kind="stable")[:max_classes]
    worst_only = target == "cw" and outputs[0][0].shape[1] > CLASSWISE_ALL
    if worst_only:
        scores = np.concatenate([probs[:, worst].ravel() for probs, _ in outputs])
        hits = np.concatenate([(labels[:, None] == worst[None, :]).ravel() for _, labels in outputs]).astype(float)
        name = f"{len(worst)} classes of largest ECE pooled"
        bins = drawn_axis_bins(scores, hits, name, n_bins, logit_axis, limits, method)
    else:
        scores, hits = pooled_pairs(outputs, target)
        name = "conf" if target == "conf" else "all classes pooled"
        bins = pair_bins(scores[:, None], hits[:, None], [name], n_bins, scheme, method)
    low, high = consistency_bars(bins["count"].to_numpy(), bins["mean_score"].to_numpy())
    bins = bins.assign(kind="bin", band_low=low, band_high=high)
    pairs = GriddedPairs(scores, hits, logit_axis, limits)
    sigma = pairs.bandwidth()
    strip = pairs.counts.sum(axis=0).reshape(-1, CELLS_PER_BAR).sum(axis=1)
    panel = Panel(method, bins, _smooth_rows(pairs, sigma, method, name), strip, class_ece.mean(axis=1),
                  worst_only=worst_only)
    if target == "cw":
        for j in worst:
            column = [(probs[:, j], labels == j) for probs, labels in outputs]
            class_pairs = GriddedPairs(np.concatenate([c for c, _ in column]),
                                       np.concatenate([h for _, h in column]).astype(np.float64), logit_axis, limits)
            panel.classes[class_label(j, class_names)] = _smooth_rows(class_pairs, class_pairs.bandwidth(), method,
                                                                      f"class{j}")
    return panel


def panels_table(panels: list[Panel], seeds) -> pd.DataFrame:
    """The numbers of every panel, columns :data:`CSV_COLUMNS`."""
    frames = [frame for p in panels for frame in (p.bins, p.smooth, *p.classes.values())]
    return pd.concat(frames, ignore_index=True).assign(seeds=" ".join(map(str, seeds))).reindex(columns=CSV_COLUMNS)


#: Distances from 0 and 1 of the ticks of a logit axis.
LOGIT_ENDS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)


def axis_ticks(lo: float, hi: float, logit_axis: bool) -> list[float]:
    """Fixed ticks within [lo, hi] (placed once: locating a logit axis's ticks anew took most of the drawing time):
    quarters on a linear axis; 10⁻ᵏ, ½ and 1 − 10⁻ᵏ on a logit axis."""
    if not logit_axis:
        return [0.0, 0.25, 0.5, 0.75, 1.0]
    ticks = [t for t in sorted([*LOGIT_ENDS, 0.5, *(1 - e for e in LOGIT_ENDS)]) if lo <= t <= hi]
    if len(ticks) > 7:  # many decades: every other one, so that the labels do not overlap
        ticks = [t for t in ticks if round(-np.log10(min(t, 1 - t))) not in (1, 3, 5)]
    return ticks


def _draw_panel(ax, ax_strip, panel: Panel, logit_axis: bool, limits, target: str, colours) -> None:
    lo, hi = (float(v) for v in from_axis(np.array(limits), logit_axis))
    bins, smooth = panel.bins[panel.bins["count"] > 0], panel.smooth
    ax.plot([lo, hi], [lo, hi], linestyle="--", color="black", linewidth=0.8, label="perfect calibration")
    ax.vlines(bins["mean_score"], bins["band_low"].clip(lo, hi), bins["band_high"].clip(lo, hi), colors="0.85",
              linewidth=2.0, zorder=1, label="consistency bars, 95 % (Bröcker & Smith)")
    ax.fill_between(smooth["mean_score"], smooth["band_low"].clip(lo, hi), smooth["band_high"].clip(lo, hi),
                    color="tab:blue", alpha=0.25, linewidth=0, label="bootstrap band, 95 %")
    ax.plot(smooth["mean_score"], smooth["frequency"].clip(lo, hi), color="tab:blue", linewidth=1.6,
            label="smooth (kernel) curve")
    for (name, curve), colour in zip(panel.classes.items(), colours):
        ax.plot(curve["mean_score"], curve["frequency"].clip(lo, hi), color=colour, linewidth=1.0, label=name)
    if panel.classes:
        ax.legend(handles=ax.get_lines()[-len(panel.classes):], fontsize=8, loc="upper left", frameon=False,
                  title="largest ECE", title_fontsize=8)
    inside = bins["frequency"].between(lo, hi)
    ax.plot(bins["mean_score"][inside], bins["frequency"][inside], color="tab:red", marker="o", markersize=3.5,
            linestyle="none", label="bin average (tables' bins)", zorder=4)
    if not inside.all():
        ax.plot(bins["mean_score"][~inside], bins["frequency"][~inside].clip(lo, hi), color="tab:red", marker="^",
                markersize=4, markerfacecolor="white", linestyle="none", label="bin average beyond the axis", zorder=4)
    if logit_axis:
        for axis in (ax, ax_strip):
            axis.set_xscale("logit")
        ax.set_yscale("logit")
    ticks = axis_ticks(lo, hi, logit_axis)
    for axis in (ax.xaxis, ax.yaxis, ax_strip.xaxis):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_minor_locator(NullLocator())
    ax.set_yticklabels([f"{t:g}" for t in ticks], fontsize=8)
    ax_strip.set_xticklabels([f"{t:g}" for t in ticks])
    ax.set(xlim=(lo, hi), ylim=(lo, hi))
    ax.tick_params(labelbottom=False)
    mean, std = panel.ece.mean(), panel.ece.std()
    name = "ECE" if target == "conf" else "classwise ECE"
    spread = f" ± {100 * std:.2f}" if panel.ece.size > 1 else ""
    ax.set_title(f"{panel.method}\n{name}×100 = {100 * mean:.2f}{spread}", fontsize=9)
    edges = from_axis(np.linspace(*limits, panel.strip.size + 1), logit_axis)
    ax_strip.stairs(np.maximum(panel.strip, 0.5), edges, fill=True, color="0.6", baseline=0.5)
    ax_strip.set_yscale("log")
    ax_strip.set(xlim=(lo, hi), ylim=(0.5, max(2.0, panel.strip.max() * 2)))
    ax_strip.yaxis.set_minor_locator(NullLocator())
    ax_strip.tick_params(axis="x", labelsize=8, labelrotation=30 if logit_axis else 0)


def reliability_figure(panels: list[Panel], target: str, path, source: str, seeds, n_bins: int, scheme: str,
                       logit_axis: bool, limits, *, row: bool = False) -> None:
    """The panels as a grid of small multiples (at most :data:`MAX_COLUMNS` per row), one legend beneath, and a
    title naming the binning, the seeds pooled and the axis (:func:`figure_title`). ``row``: every panel in one row
    of smaller panels (:data:`ROW_PANEL`), the legend at the right and no title, for a page that writes the title
    as the figure's caption (the report's first screen: a wide, short figure)."""
    if not panels:
        raise ValueError(f"reliability diagram of {source or 'a source'}: no method to draw; list methods that run "
                         "on this source under figures.reliability.methods")
    n_cols = len(panels) if row else min(MAX_COLUMNS, int(np.ceil(np.sqrt(len(panels)))))
    n_rows = -(-len(panels) // n_cols)
    size, strip = (ROW_PANEL, ROW_STRIP) if row else (PANEL_SIZE, STRIP)
    width, height = size * n_cols + (ROW_LEGEND if row else 0.4), (size + strip) * n_rows + (0.5 if row else 1.6)
    fig = plt.figure(figsize=(width, height), layout="constrained")
    grid = fig.add_gridspec(2 * n_rows, n_cols, height_ratios=[size - 0.3, strip] * n_rows)
    colours = distinct_colours(max(len(p.classes) for p in panels) + 3)[3:]
    score = "confidence (top probability)" if target == "conf" else "p̂_j"
    for i, panel in enumerate(panels):
        row_at, col = divmod(i, n_cols)
        ax = fig.add_subplot(grid[2 * row_at, col])
        ax_strip = fig.add_subplot(grid[2 * row_at + 1, col], sharex=ax)
        _draw_panel(ax, ax_strip, panel, logit_axis, limits, target, colours)
        if col == 0:
            ax.set_ylabel("accuracy" if target == "conf" else "frequency of class j")
            ax_strip.set_ylabel("count", fontsize=8)
        ax_strip.set_xlabel(score, fontsize=8)
    named = {name for p in panels for name in p.classes}
    shared = {label: h for ax in fig.axes for h, label in zip(*ax.get_legend_handles_labels()) if label not in named}
    shared = [(h, textwrap.fill(label, 24) if row else label) for label, h in shared.items()]
    fig.legend(*zip(*shared), loc="outside right center" if row else "outside lower center", ncol=1 if row else 3,
               fontsize=8, frameon=False)
    if not row:
        title = figure_title(panels, target, source, seeds, n_bins, scheme, logit_axis)
        fig.suptitle(textwrap.fill(title, int(fig.get_figwidth() * 14)), fontsize=9)
    save_figure(fig, path)


def figure_title(panels: list[Panel], target: str, source: str, seeds, n_bins: int, scheme: str,
                 logit_axis: bool) -> str:
    """What a reliability figure draws: the target, the seeds pooled, the axis and the binning of its dots."""
    what = "confidence" if target == "conf" else "classwise (all classes pooled; thin lines: classes of largest ECE)"
    shown = ""
    if any(p.worst_only for p in panels):
        what = "classwise"
        shown = (f". Shown: the {len(panels[0].classes)} classes of largest ECE of each method (more than "
                 f"{CLASSWISE_ALL} classes), pooled in bins of equal width on the axis; thin lines: each of them")
    pooled = f"seeds {', '.join(map(str, seeds))} pooled" if len(seeds) > 1 else f"seed {seeds[0]}"
    dots = ("Panel value: " + binning_text(target, n_bins, scheme) if any(p.worst_only for p in panels) else
            f"Dots: {binning_text(target, n_bins, scheme)}; panel value")
    return (f"{source}: {what} reliability, test split, {pooled}; {'logit' if logit_axis else 'linear'} axes. "
            f"{dots}: its mean ± std over seeds{shown}")
