"""calbench: reproducible benchmarks of post-hoc multiclass calibration.

The library half of calbench: every calibration method (:mod:`calbench.methods`) and metric
(:mod:`calbench.metrics`) is usable without Snakemake. The workflow in ``workflow/`` only wires
files to these functions.
"""

from calbench.scores import PROB_EPS, PROB_FLOOR, ProbabilitiesAsLogitsWarning, Scores

__version__ = "0.1.0"
__all__ = ["Scores", "PROB_EPS", "PROB_FLOOR", "ProbabilitiesAsLogitsWarning", "__version__"]
