"""The warnings of an iterative fit that stopped before reaching a finite optimum: at its iteration bound, or where
none exists (separable calibration data).

Lowest layer: the 1-D maps (PL/PL3) and the affine-softmax methods (Dirichlet, matrix and vector scaling) raise it.
"""


class NotConvergedWarning(RuntimeWarning):
    """A fit stopped at ``max_iter`` before its convergence test was met (the message names the setting)."""


class NoFiniteOptimumWarning(NotConvergedWarning):
    """The training log-loss fell to about 0: the calibration data are separable by the map, whose unpenalised
    parameters then grow without bound, so the fit stopped at an arbitrary, overconfident point (the message
    names the method, its settings and the fix)."""
