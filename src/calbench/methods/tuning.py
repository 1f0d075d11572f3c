"""k-fold cross-validated grid search around any calibrator.

Used as LECE paper §4.2.2 tunes (q, t) (10-fold CV on log-loss) and as the Dirichlet paper tunes
(λ, μ) (5-fold CV on log-loss, the fold models averaged at prediction time, its §4.2/Supp. E.5).
Configured, not coded, per method: ``make(name, grid={...}, cv={...})``.

An estimator may define ``predict_grid(grid_points, train_scores, y_train, val_scores)`` yielding
(point index, probabilities) for every grid point in any order, to share work across the grid (one
distance computation per fold for LECE, warm starts for Dirichlet); otherwise each point is fitted
separately. Each prediction is scored as it comes, so memory holds one of them per fold, and the folds
run in threads on the available cores (:mod:`calbench.parallel`).
"""

from __future__ import annotations

import itertools

import numpy as np

from calbench.folds import kfold_splits
from calbench.methods.base import Calibrator, clone
from calbench.metrics import proper
from calbench.parallel import thread_map
from calbench.scores import Scores

def fold_loss(probs: np.ndarray, y: np.ndarray, scoring: str) -> float:
    """Mean log-loss (``"nll"``) or Brier score summed over classes (``"brier"``) of one fold."""
    if scoring == "nll":  # clipped at NLL_EPS: LECE, IR and binning can output exact zeros
        return proper.log_loss(probs, y)
    if scoring == "brier":
        return proper.brier(probs, y)
    raise ValueError(f"cv.scoring: expected 'nll' or 'brier', got {scoring!r}")


def expand_grid(grid: dict) -> list[dict]:
    """``{"a": [1, 2], "b": [3]}`` → ``[{"a": 1, "b": 3}, {"a": 2, "b": 3}]`` (first key slowest)."""
    keys = list(grid)
    for key in keys:
        if not isinstance(grid[key], (list, tuple)) or not grid[key]:
            raise ValueError(f"grid.{key}: expected a non-empty list of values, got {grid[key]!r}")
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


class GridSearch(Calibrator):
    """Choose hyperparameters of ``estimator`` by k-fold CV, then refit (or average fold models).

    Parameters
    ----------
    estimator : the calibrator to tune (its other settings stay fixed).
    grid : dict of hyperparameter name → list of candidate values, or a function of the number of
        classes returning one (for grids that depend on it, like the Dirichlet paper's).
    folds : number of CV folds (stratified by label when every class has ``folds`` members).
    scoring : ``"nll"`` (log-loss) or ``"brier"``; lower is better. Ties keep the first point.
    ensemble : False refits the best point on all data (LECE paper); True averages the
        predictions of the ``folds`` fold models at the best point (Dirichlet paper).
    seed : seed of the fold assignment.
    """

    def __init__(self, estimator, grid, folds: int = 10, scoring: str = "nll", ensemble: bool = False, seed: int = 0):
        self.estimator = estimator
        self.grid = grid
        self.folds = folds
        self.scoring = scoring
        self.ensemble = ensemble
        self.seed = seed

    @property
    def needs(self) -> frozenset[str]:
        return self.estimator.needs

    @property
    def preserves_argmax(self) -> bool:
        return self.estimator.preserves_argmax

    @property
    def needs_every_class(self) -> bool | None:
        return self.estimator.needs_every_class

    @property
    def method_name(self) -> str:
        return getattr(self.estimator, "method_name", type(self.estimator).__name__)

    def _splits(self, y: np.ndarray):
        counts = np.bincount(y, minlength=self.num_classes_)
        if counts.min() >= self.folds:
            from sklearn.model_selection import StratifiedKFold  # lazy: only tuned methods pay its import

            return list(StratifiedKFold(self.folds, shuffle=True, random_state=self.seed).split(np.zeros(y.size), y))
        return list(kfold_splits(y.size, self.folds, self.seed))

    def _fold_losses(self, points, scores: Scores, y, split, fit_kwargs: dict) -> np.ndarray:
        """Validation loss of every grid point, trained on one fold's training part."""
        tr, va = split
        train, y_train, val = scores.subset(tr), y[tr], scores.subset(va)
        if hasattr(self.estimator, "predict_grid"):
            predictions = self.estimator.predict_grid(points, train, y_train, val)
        else:
            predictions = ((i, clone(self.estimator).set_params(**p).fit(train, y_train, **fit_kwargs)
                            .predict_proba(val)) for i, p in enumerate(points))
        losses = np.full(len(points), np.nan)
        for i, probs in predictions:
            losses[i] = fold_loss(probs, y[va], self.scoring)
        if np.isnan(losses).any():
            raise RuntimeError(f"{type(self.estimator).__name__}.predict_grid left grid points "
                               f"{np.flatnonzero(np.isnan(losses)).tolist()} without a prediction or with a NaN loss")
        return losses

    def _fit(self, scores: Scores, y: np.ndarray, train=None) -> None:
        if self.folds < 2 or self.folds > y.size:
            raise ValueError(f"cv.folds: expected 2 <= folds <= {y.size} (the calibration size), got {self.folds}")
        points = expand_grid(self.grid(scores.num_classes) if callable(self.grid) else self.grid)
        fit_kwargs = {"train": train} if train is not None else {}
        splits = self._splits(y)
        losses = thread_map(lambda split: self._fold_losses(points, scores, y, split, fit_kwargs), splits)
        self.cv_losses_ = np.mean(losses, axis=0)
        self.best_index_ = int(np.argmin(self.cv_losses_))
        self.best_params_ = points[self.best_index_]

        def fit_best(rows):
            return clone(self.estimator).set_params(**self.best_params_).fit(scores.subset(rows), y[rows], **fit_kwargs)

        self.estimators_ = thread_map(fit_best, [tr for tr, _ in splits] if self.ensemble else [np.arange(y.size)])

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return np.mean([est.predict_proba(scores) for est in self.estimators_], axis=0)

    def transform(self, scores) -> Scores:
        if len(self.estimators_) == 1:
            return self.estimators_[0].transform(scores)
        return super().transform(scores)

    def fitted_summary(self) -> dict:
        return {
            "best_params": self.best_params_,
            "cv_loss": float(self.cv_losses_[self.best_index_]),
            "cv_scoring": self.scoring,
            **({"fitted": self.estimators_[0].fitted_summary()} if len(self.estimators_) == 1 else {}),
        }
