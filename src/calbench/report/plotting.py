"""Matplotlib set-up shared by the figures: the Agg backend (no display needed) and atomic saving."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from calbench.atomic import atomic_path, write_text_atomic  # noqa: E402

DPI = 150


def save_figure(fig, path, crop: bool | None = None) -> None:
    """Write ``fig`` to ``path`` (format from its extension) atomically, then close it.

    ``crop``: trim the page to what is drawn (``bbox_inches="tight"``). By default only a figure without a
    layout engine is cropped; one laid out by its engine (``layout="constrained"``) already fits its page and
    is saved as is, which spares the extra layout and drawing pass that cropping costs. A figure that places
    its axes itself passes ``crop=False``."""
    fmt = str(path).rsplit(".", 1)[-1]
    if crop is None:
        crop = fig.get_layout_engine() is None
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=DPI, bbox_inches="tight" if crop else None)
    finally:
        plt.close(fig)


def write_csv(frame: pd.DataFrame, path) -> None:
    """A table beside a figure, atomically, with enough digits to recompute what is drawn."""
    write_text_atomic(path, frame.to_csv(index=False, float_format="%.10g"))


def distinct_colours(n: int) -> list:
    """``n`` colours, none repeated: tab10 up to 10, tab20 (its strong tones first, then the light ones) up to 20,
    else ``n`` evenly spaced samples of the turbo map."""
    if n <= 10:
        return list(plt.get_cmap("tab10").colors[:n])
    if n <= 20:
        tab20 = plt.get_cmap("tab20").colors
        return list(tab20[0::2] + tab20[1::2])[:n]
    return [plt.get_cmap("turbo")(x) for x in np.linspace(0.05, 0.95, n)]
