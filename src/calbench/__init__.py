"""calbench: reproducible benchmarks of post-hoc multiclass calibration.

The library half of calbench: every calibration method (:mod:`calbench.methods`) and metric
(:mod:`calbench.metrics`) is usable without Snakemake. The workflow in ``workflow/`` only wires
files to these functions.
"""

from calbench.scores import PROB_EPS, PROB_FLOOR, ProbabilitiesAsLogitsWarning, Scores
from calbench.version import __version__

__all__ = ["Scores", "PROB_EPS", "PROB_FLOOR", "ProbabilitiesAsLogitsWarning", "__version__", "save", "load"]


def save(cal, path, *, input_kind: str = "logits"):
    """Write a fitted calibrator to ``path`` (see :func:`calbench.persist.save`)."""
    from calbench.persist import save as _save

    return _save(cal, path, input_kind=input_kind)


def load(path):
    """Read a calibrator written by :func:`save` (see :func:`calbench.persist.load`)."""
    from calbench.persist import load as _load

    return _load(path)
