"""Smooth ECE (Błasiok & Nakkiran 2023, "Smooth ECE: principled reliability diagrams via kernel smoothing") and
top-label calibration errors (Gupta & Ramdas, ICLR 2022).

* smECE of binary pairs (f, y): kernel-smooth the residuals y − f with a reflected Gaussian kernel of width σ,
  smECE_σ = ∫ |r̂_σ(t)| ŵ_σ(t) dt, at the σ* with smECE_σ* = σ* (the paper's fixed point, §4). Computed by
  the authors' package ``relplot`` (``relplot.smECE``), imported only when the metric is asked for.
* Confidence target: pairs (max p̂, 1[argmax p̂ = y]).
* Top-label target (Gupta & Ramdas Eq. 3, top-label calibration P(y = ŷ | c, ŷ) = c): the error within the rows
  predicted l, pairs (c, 1[y = l]), averaged over the predicted classes l with weights n_l / n.
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def smooth_ece(scores: np.ndarray, hits: np.ndarray) -> float:
    """smECE of 1-D predictions ``scores`` in [0, 1] against binary ``hits`` (relplot's automatic σ*)."""
    try:
        import relplot  # lazy: it imports scikit-learn and matplotlib (~2 s)
    except ImportError as error:
        raise ImportError("metric smece.* needs the package relplot (pip install relplot)") from error
    return float(relplot.smECE(np.asarray(scores, dtype=np.float64), np.asarray(hits, dtype=np.float64)))


def top_label_average(probs: np.ndarray, labels: np.ndarray, error: Callable[[np.ndarray, np.ndarray], float]) -> float:
    """Σ_l (n_l / n)·error(c, 1[y = l] | ŷ = l): a binary calibration error per predicted class, weighted.
    A loop over the predicted classes, for errors with no batched form (relplot's smECE); the binned top-label
    ECE is computed for all classes at once by :mod:`calbench.metrics.top_label`."""
    top = probs.argmax(axis=1)
    conf = probs[np.arange(top.size), top]
    hits = (top == labels).astype(np.float64)
    total = 0.0
    for label in np.unique(top):
        rows = top == label
        total += rows.sum() * error(conf[rows], hits[rows])
    return total / top.size


def reliability_diagram(probs: np.ndarray, labels: np.ndarray, path, title: str = ""):
    """relplot's smooth reliability diagram of the confidence, written to ``path`` (png/pdf)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import relplot

    top = probs.argmax(axis=1)
    fig, _ = relplot.rel_diagram(probs.max(axis=1), (top == labels).astype(np.float64))
    if title:
        fig.suptitle(title)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path
