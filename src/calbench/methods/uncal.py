"""The uncalibrated baseline: the classifier's own softmax (every table's ``uncal`` column)."""

import numpy as np

from calbench.methods.base import Calibrator, MissingClass
from calbench.methods.registry import register
from calbench.scores import Scores


class IdentityMap(Calibrator):
    """Identity map p̂ = σ(z), fitted on nothing: the base of ``uncal`` and of stages that only change the
    fit data (``perturb``)."""

    preserves_argmax = True
    on_missing_class = MissingClass.IGNORE

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        pass

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return scores.probs

    def transform(self, scores) -> Scores:
        return self._check_scores(scores)


@register("uncal")
class Uncalibrated(IdentityMap):
    """Identity map: p̂ = σ(z)."""

    def torch_stage(self):
        from calbench.methods.torch_stages import Identity

        return Identity()
