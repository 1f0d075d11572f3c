"""The warning of an iterative fit that stopped at its iteration bound before its convergence test was met.

Lowest layer: the 1-D maps (PL/PL3) and the affine-softmax methods (Dirichlet, matrix and vector scaling) raise it.
"""


class NotConvergedWarning(RuntimeWarning):
    """A fit stopped at ``max_iter`` before its convergence test was met (the message names the setting)."""
