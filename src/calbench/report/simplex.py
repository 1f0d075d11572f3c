"""Calibration maps on the 3-class probability simplex (LECE paper Figures 1–2; docs/figures_and_studies.md).

Each panel shows one map p̂ ↦ ĉ(p̂) learned by a method (or the true map c of a synthetic source):

* black arrows from p̂ to ĉ(p̂) at test points near the nodes of a regular triangular lattice;
* a background whose RGB colour is linear in the calibration-error vector at each test point
  (nearest test point per pixel): colour = 0.5 + (ĉ(p̂) − p̂) / (2s), clipped to [0, 1], so red, green and
  blue grow where the map moves probability towards class 0, 1 and 2 (the paper's classes 1, 2, 3), and
  grey means no change. The
  scale s (the 99th percentile of max_j |ĉ_j − p̂_j| over all panels) is shared, so colours compare
  across panels.

Barycentric layout: class 0 at the bottom left, class 1 at the bottom right, class 2 at the top (labels are
0-based as everywhere in calbench).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from calbench.report.plotting import plt, save_figure

CORNERS = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])


def to_plane(p: np.ndarray) -> np.ndarray:
    """Barycentric → Cartesian coordinates of points ``[N, 3]`` of the simplex."""
    return np.asarray(p, dtype=np.float64) @ CORNERS


def error_colours(p_hat: np.ndarray, c_hat: np.ndarray, scale: float) -> np.ndarray:
    """RGB ``[N, 3]`` linear in the calibration-error vector ĉ(p̂) − p̂ (grey where it is zero)."""
    return np.clip(0.5 + (c_hat - p_hat) / (2 * scale), 0.0, 1.0)


def lattice_points(xy: np.ndarray, divisions: int) -> np.ndarray:
    """Indices of the points of ``xy`` nearest to the nodes of a triangular lattice (within half a step)."""
    i, j = np.meshgrid(np.arange(divisions + 1), np.arange(divisions + 1), indexing="ij")
    keep = i + j <= divisions
    bary = np.stack([i[keep], j[keep], divisions - i[keep] - j[keep]], axis=1) / divisions
    distance, index = cKDTree(xy).query(to_plane(bary))
    return np.unique(index[distance <= 0.5 / divisions])


def _background(xy: np.ndarray, colours: np.ndarray, pixels: int) -> np.ndarray:
    """RGBA image of the triangle: each pixel takes the colour of the nearest test point."""
    height = int(pixels * CORNERS[2, 1])
    gx, gy = np.meshgrid((np.arange(pixels) + 0.5) / pixels, (np.arange(height) + 0.5) / height * CORNERS[2, 1])
    centres = np.stack([gx.ravel(), gy.ravel()], axis=1)
    _, nearest = cKDTree(xy).query(centres)
    inside = (gy.ravel() <= np.sqrt(3) * gx.ravel()) & (gy.ravel() <= np.sqrt(3) * (1 - gx.ravel()))
    image = np.ones((centres.shape[0], 4))
    image[:, :3] = colours[nearest]
    image[~inside, 3] = 0.0
    return image.reshape(height, pixels, 4)


def draw_simplex(ax, p_hat, c_hat, arrows: np.ndarray, scale: float, title: str, pixels: int = 300) -> None:
    """One calibration-map panel: RGB background, arrows p̂ → ĉ(p̂), triangle and class labels."""
    xy, target = to_plane(p_hat), to_plane(c_hat)
    ax.imshow(_background(xy, error_colours(p_hat, c_hat, scale), pixels), origin="lower",
              extent=(0, 1, 0, CORNERS[2, 1]), interpolation="nearest")
    delta = target[arrows] - xy[arrows]
    ax.quiver(xy[arrows, 0], xy[arrows, 1], delta[:, 0], delta[:, 1], angles="xy", scale_units="xy", scale=1,
              width=0.004, headwidth=3.5, headlength=4, color="black")
    ax.plot(*np.vstack([CORNERS, CORNERS[:1]]).T, color="black", linewidth=0.8)
    for k, (x, y) in enumerate(CORNERS):
        ax.annotate(f"class {k} ({('red', 'green', 'blue')[k]})", (x, y), xytext=(0, 10 if k == 2 else -12),
                    textcoords="offset points", ha="center", va="center", fontsize=8)
    ax.set(xlim=(-0.05, 1.05), ylim=(-0.08, CORNERS[2, 1] + 0.08), title=title)
    ax.set_aspect("equal")
    ax.axis("off")


def simplex_figure(p_hat: np.ndarray, maps: dict[str, np.ndarray], path, source: str = "", divisions: int = 15) -> None:
    """One panel per map ``{name: ĉ(p̂) [N, 3]}``, all at the same test points ``p_hat``."""
    if p_hat.ndim != 2 or p_hat.shape[1] != 3:
        raise ValueError(f"simplex figure of {source or 'a source'}: needs 3 classes, got probabilities of shape "
                         f"{p_hat.shape}; list only 3-class sources under figures.simplex.sources")
    shifts = np.concatenate([np.abs(c - p_hat).max(axis=1) for c in maps.values()])
    scale = max(float(np.quantile(shifts, 0.99)), 1e-12)
    arrows = lattice_points(to_plane(p_hat), divisions)
    # a grid of about as many rows as columns, so that the figure stays near square however many maps it has
    n_cols = int(np.ceil(np.sqrt(len(maps))))
    n_rows = int(np.ceil(len(maps) / n_cols))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.6 * n_cols, 3.7 * n_rows), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(maps):]:
        ax.axis("off")
    for ax, (name, c_hat) in zip(axes.flat, maps.items()):
        draw_simplex(ax, p_hat, c_hat, arrows, scale, name)
    fig.suptitle(f"{source}: calibration maps p̂ → ĉ(p̂); colour = 0.5 + (ĉ − p̂)/(2·{scale:.3f})")
    save_figure(fig, path)
