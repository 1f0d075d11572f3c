"""Composition of calibrators: ``ts+lece`` means fit TS, then LECE on TS's output.

As in LECE paper §4.2.2 (docs/methods_nonparametric.md): stage A is fitted on the whole calibration
set, the calibration set is transformed with A, stage B is fitted on A(cal), and predictions are
B(A(x)). Each stage receives the previous stage's output through ``transform``.
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Instance, ListOf
from calbench.methods.base import Calibrator
from calbench.parallel import blas_region
from calbench.scores import Derivation, Scores


class Chain(Calibrator):
    """Apply ``steps`` in order, each fitted on the output of the previous ones."""

    #: At least one step, each a fitted calibrator of the chain's number of classes.
    _declared_settings = {"steps": ListOf(Instance(Calibrator, classes="C"), "S+1")}

    def __init__(self, steps):
        self.steps = steps

    @property
    def needs(self) -> frozenset[str]:
        return frozenset().union(*(step.needs for step in self.steps))

    @property
    def preserves_argmax(self) -> bool:
        return all(step.preserves_argmax for step in self.steps)

    def fit(self, scores, y, train=None) -> "Chain":
        """Fit every stage in order; ``train`` is passed on (transformed) to stages that use it. BLAS as in
        :meth:`Calibrator.fit`, the transforms between the stages included."""
        scores = self._check_scores(scores)
        self.num_classes_ = scores.num_classes
        self._record_embedding_width(scores)
        with blas_region():
            self._fit(scores, y, train=train)
        return self

    def _fit(self, scores: Scores, y: np.ndarray, train=None) -> None:
        source = scores.logits
        for step in self.steps[:-1]:
            scores = step.fit(scores, y, train=train).transform(scores)
            if train is not None:
                train = (step.transform(train[0]), train[1])
        if len(self.steps) > 1 and not any("embeddings" in step.needs for step in self.steps[:-1]):
            scores = scores.with_derivation(Derivation(tuple(self.steps[:-1]), source))
        self.steps[-1].fit(scores, y, train=train)

    def _through(self, scores: Scores) -> Scores:
        for step in self.steps[:-1]:
            scores = step.transform(scores)
        return scores

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return self.steps[-1].predict_proba(self._through(scores))

    def transform(self, scores) -> Scores:
        with blas_region():
            return self.steps[-1].transform(self._through(self._check_scores(scores)))

    def torch_stage(self):
        from calbench.methods.torch_stages import Sequence

        return Sequence([step.to_torch() for step in self.steps])

    def fitted_summary(self) -> dict:
        return {f"{i}:{getattr(step, 'method_name', type(step).__name__)}": step.fitted_summary()
                for i, step in enumerate(self.steps)}
