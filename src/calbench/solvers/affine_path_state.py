"""What the affine-softmax fits of one grid path share: fits on the same features, strong penalties first
(:class:`calbench.methods.linear_maps.AffineSoftmax`'s ``predict_grid``), pass one :class:`PathState` along, so
that the work a later fit would repeat is done once (docs/solver.md). A preconditioner or a scaling changes the
steps, not the optimum, so the results do not depend on the order in which the state was filled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from calbench.solvers.affine_preconditioners import LargeMapMoments


@dataclass
class PathState:
    """The shared work of a grid path; every field is filled by the first fit that needs it.

    * ``x_single``: truncated Newton's float32 copy of the features;
    * ``blocks``: the log-loss part of the per-class Hessian blocks that precondition truncated Newton on full maps
      (:func:`~calbench.solvers.affine_preconditioners.block_preconditioner`), at the probabilities of the first
      fit that needed them; ``inverse_blocks``: their inverse with the curvature of the penalty weights
      ``inverse_key`` = (off, diag), reused while λ stays (a grid row);
    * ``moments``: the log-loss parts of the large-map preconditioner
      (:func:`~calbench.solvers.affine_preconditioners.large_map_preconditioner`);
    * ``jacobi``: the log-loss part of the Hessian's diagonal that scales L-BFGS on full maps
      (:func:`~calbench.solvers.affine_lbfgs.lbfgs`);
    * ``newton_cg_needed``: a fit of full maps has needed truncated Newton, so the later, weaker-penalty ones
      start with it (:func:`~calbench.solvers.affine_softmax_fit.fit_affine_softmax`).
    """

    x_single: np.ndarray | None = None
    blocks: np.ndarray | None = None
    inverse_key: tuple[float, float] | None = None
    inverse_blocks: np.ndarray | None = None
    moments: LargeMapMoments | None = None
    jacobi: np.ndarray | None = None
    newton_cg_needed: bool = False

    def float32_features(self, x: np.ndarray) -> np.ndarray:
        """``x`` in float32, converted once."""
        if self.x_single is None:
            self.x_single = x.astype(np.float32)
        return self.x_single
