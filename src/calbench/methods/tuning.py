"""k-fold cross-validated grid search around any calibrator.

Used as LECE paper §4.2.2 tunes (q, t) (10-fold CV on log-loss) and as the Dirichlet paper tunes
(λ, μ) (5-fold CV on log-loss, the fold models averaged at prediction time, its §4.2/Supp. E.5).
Configured, not coded, per method: ``make(name, grid={...}, cv={...})``.

Each fold asks the estimator for the validation loss of every point (:meth:`Calibrator.grid_losses`; LECE's
come from per-row sums, no outputs formed, with :meth:`Calibrator.grid_shared`'s neighbour pool of the whole
set restricted to the fold), and where it gives none, for the predictions of every point
(:meth:`Calibrator.predict_grid`: by default each point fitted separately; LECE shares one distance pass, the
affine maps warm starts). Each prediction is scored as it comes, so memory holds one of them per fold, and the
folds run in threads on the available cores (:mod:`calbench.parallel`), each logging at INFO when done. With
``ensemble``, each fold keeps the best-scoring models that ``predict_grid`` yields within
:data:`KEEP_MODELS_BYTES`, and the fold model at the chosen point is the search's where its fold kept it,
refitted on the same rows otherwise.

A default grid searches only the hyperparameters the user left unset (:func:`without_fixed`).
"""

from __future__ import annotations

import inspect
import itertools
import logging
import time
import warnings

import numpy as np

from calbench.fitted_state import Array, DictOf, Instance, ListOf, OneOf, Scalar, Setting
from calbench.folds import kfold_splits, stratified_kfold_splits
from calbench.methods.base import Calibrator, MissingClass, clone
from calbench.methods.constraints import Interval, InvalidSetting, Options, check_grid, check_settings
from calbench.metrics import proper
from calbench.parallel import thread_map
from calbench.scores import Scores

log = logging.getLogger(__name__)

# A grid search warns when its optimum lies at the end of an open-ended hyperparameter's values and the mean CV
# loss at the next value inwards is higher by more than this fraction. The seed-0 job of config/scale.yaml:
# the default Dir-L2 grid's weakest λ had CV log-loss 2.037, the next 3.936, and the job's test log-loss was
# 0.36 above temperature scaling's. ODIR grids end on the plateau of their strongest λ, where the map is
# diagonal, and approach it slowly: the next value 3e-8 and 1.8e-5 higher at 1,000 classes (ms_odir, dir_odir),
# 0.3–0.7 % two decades before the plateau in config/config.yaml's runs, where a grid ending at λ = 10³ left
# 0.6–25 % (the default config's grids now reach 10⁵).
EDGE_RISE = 1e-2
# A default grid (one the user did not write) is continued past the end of an open-ended hyperparameter where its
# CV optimum lies there and the mean CV loss at the next value inwards is higher by more than this fraction (the
# loss still falling outwards), one decade at a time, until the loss rises or EXTEND_DECADES decades have been
# added in that direction. The ODIR λ lists end on the plateau of the diagonal map, flat to 1e-4 relative at 100
# classes and 2e-5 at 1,000 (docs/methods_parametric.md), which this threshold leaves alone.
EXTEND_FALL = 1e-3
EXTEND_DECADES = 3
SCORING_NAMES = {"nll": "log-loss", "brier": "Brier score"}

# The fitted models a fold keeps for the ensemble, its lowest-loss ones first (Dirichlet: all 24 maps of
# 100 × 101 weights at 100 classes, 2 MB; the best 8 of 18 at 1,000 classes, 8 MB each).
KEEP_MODELS_BYTES = 2**26


class GridEdgeWarning(UserWarning):
    """The CV optimum lies at the end of the grid's values of an open-ended hyperparameter, with the loss still
    falling there: the best value may lie beyond the grid (the message names the setting and the fix)."""


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


def grid_names(grid) -> set[str]:
    """The hyperparameters a grid searches; a grid function's names must not depend on the number of classes."""
    return set(grid(2) if callable(grid) else grid)


class GridWithout:
    """A grid function of the number of classes with the settings in ``fixed`` held fixed: it receives those it
    takes as keywords (e.g. ``reg_scale``, the scale of its values) and their keys leave its grid."""

    def __init__(self, grid, fixed: dict):
        self.grid = grid
        self.fixed = fixed

    def __call__(self, num_classes: int) -> dict:
        accepted = inspect.signature(self.grid).parameters
        full = self.grid(num_classes, **{k: v for k, v in self.fixed.items() if k in accepted})
        return {k: v for k, v in full.items() if k not in self.fixed}

    def __repr__(self) -> str:
        return f"GridWithout({self.grid.__name__}, fixed={self.fixed!r})"


def without_fixed(grid, fixed: dict):
    """A method's default ``grid`` with the settings the user gave (``fixed``) held fixed; ``None`` when
    nothing is left to search."""
    if callable(grid):
        taken = grid_names(grid) | set(inspect.signature(grid).parameters)
        left = GridWithout(grid, fixed) if taken & set(fixed) else grid
    else:
        left = {k: v for k, v in grid.items() if k not in fixed}
    return left if grid_names(left) else None


class GridSearch(Calibrator):
    """Choose hyperparameters of ``estimator`` by k-fold CV, then refit (or average fold models).

    Parameters
    ----------
    estimator : the calibrator to tune (its other settings stay fixed).
    grid : dict of hyperparameter name → list of candidate values, or a function of the number of
        classes returning one (for grids that depend on it, like the Dirichlet paper's). The grid's values
        override ``estimator``'s; its other settings stay fixed.
    folds : number of CV folds (stratified by label when every class has ``folds`` members).
    scoring : ``"nll"`` (log-loss) or ``"brier"``; lower is better. Ties keep the first point.
    ensemble : False refits the best point on all data (LECE paper); True averages the
        predictions of the ``folds`` fold models at the best point (Dirichlet paper).
    seed : seed of the fold assignment.
    extend : continue the grid past the end of each of the estimator's ``open_ended_params`` while the CV
        optimum lies there with the loss still falling (by more than :data:`EXTEND_FALL`), one decade (×10 or
        ÷10) at a time along the chosen point's line, until the loss rises or :data:`EXTEND_DECADES` decades were
        added in that direction. :func:`~calbench.methods.registry.make` sets it for a default grid, never for
        one the user writes. Estimators whose ``predict_grid`` yields fitted models continue their warm-started
        path from the fold's models at the line's last two points (``start``).

    Fitted attributes (scikit-learn's names): ``best_params_``, ``best_index_``, ``best_score_`` (minus the
    best CV loss), ``cv_results_`` (``params``, ``param_<name>``, ``split<i>_test_score``,
    ``mean_test_score``, ``std_test_score``, ``rank_test_score``; scores are minus losses, higher is better; the
    points an extension added follow the grid's, in the order they were searched), ``cv_losses_`` (mean CV loss
    per point), ``added_points_`` (the points an extension added), ``fixed_params_`` (the estimator's settings
    the grid leaves alone) and ``estimators_`` (one refitted model, or the ``folds`` fold models with ``ensemble``).
    """

    #: G grid points: the CV table has one entry per point (arrays, or lists of the points' settings).
    _fitted_state = {"cv_losses_": Array(float, ("G",)), "best_index_": Scalar(int, within="[0, G)"),
                     "best_score_": Scalar(float),
                     "best_params_": DictOf(str, Setting()), "fixed_params_": DictOf(str, Setting()),
                     "cv_results_": DictOf(str, OneOf(Array(float, ("G",)), Array(int, ("G",)),
                                                      ListOf(Setting(), "G"))),
                     "added_points_": ListOf(DictOf(str, Setting())),
                     "estimators_": ListOf(Instance(Calibrator, classes="C", like="estimator"), "models")}
    #: The template of the models (unfitted; its class is the models' class).
    _declared_settings = {"estimator": Instance(Calibrator, fitted=False)}

    #: The settings a config's ``cv`` may give (``estimator`` and ``grid`` come from the method and its ``grid``).
    _parameter_constraints = {"folds": [Interval("int", 2)], "scoring": [Options("nll", "brier")],
                              "ensemble": [Options(True, False)], "seed": [Interval("int", 0)],
                              "extend": [Options(True, False)]}
    _settings_prefix = "cv."

    def __init__(self, estimator, grid, *, folds: int = 10, scoring: str = "nll", ensemble: bool = False, seed: int = 0,
                 extend: bool = False):
        self.estimator = estimator
        self.grid = grid
        self.folds = folds
        self.scoring = scoring
        self.ensemble = ensemble
        self.seed = seed
        self.extend = extend

    @classmethod
    def check_cv(cls, cv) -> None:
        """Raise :class:`InvalidSetting` unless ``cv`` (a method's config key) is a mapping of declared settings with
        allowed values, as ``fit`` checks them."""
        if not isinstance(cv, dict):
            raise InvalidSetting("cv", f"{cv!r} is not allowed; expected a mapping of the grid search's settings")
        unknown = sorted(set(cv) - set(cls._parameter_constraints))
        if unknown:
            raise InvalidSetting(f"cv.{unknown[0]}", f"not a setting of the grid search; its settings: "
                                                     f"{', '.join(cls._parameter_constraints)}")
        check_settings(cls._parameter_constraints, cv, prefix=cls._settings_prefix)

    @property
    def needs(self) -> frozenset[str]:
        return self.estimator.needs

    @property
    def preserves_argmax(self) -> bool:
        return self.estimator.preserves_argmax

    @property
    def on_missing_class(self) -> MissingClass:
        return self.estimator.on_missing_class

    @property
    def method_name(self) -> str:
        return getattr(self.estimator, "method_name", type(self.estimator).__name__)

    def _declared_symbols(self) -> dict:
        """The number of fitted models its declaration holds: the ``folds`` fold models with ``ensemble``, else one
        refitted model (:mod:`calbench.fitted_state`)."""
        return {"models": self.folds if self.ensemble is True else 1}

    def _splits(self, y: np.ndarray):
        counts = np.bincount(y, minlength=self.num_classes_)
        if counts.min() >= self.folds:
            return stratified_kfold_splits(y, self.folds, self.seed)
        return list(kfold_splits(y.size, self.folds, self.seed))

    def _fold_losses(self, points, scores: Scores, y, split, fit_kwargs: dict, progress, shared=None,
                     prior=None) -> tuple[np.ndarray, dict]:
        """Validation loss of every grid point, trained on one fold's training part, and the fitted models
        that ``predict_grid`` yielded (point index → model; without ``ensemble`` or with ``grid_losses`` none,
        else the lowest-loss ones within :data:`KEEP_MODELS_BYTES`). ``shared``: the estimator's
        ``grid_shared`` of the whole set (or None). ``prior``: for the points an extension adds, the fold's
        (losses, models, start models) so far; the new points' indices follow the prior ones, and the start
        models warm-start ``predict_grid`` (``start``)."""
        tr, va = split
        train, y_train, val = scores.subset(tr), y[tr], scores.subset(va)
        before, models, start = (np.empty(0), {}, []) if prior is None else (prior[0], dict(prior[1]), prior[2])
        offset = before.size
        extra = {} if shared is None else {"shared": shared, "train_rows": tr}
        losses = self.estimator.grid_losses(points, train, y_train, val, y[va], self.scoring, **extra)
        if losses is not None:
            hook = "grid_losses"
            losses = np.asarray(losses, float)
            if losses.shape != (len(points),):
                raise RuntimeError(f"{type(self.estimator).__name__}.grid_losses returned {losses.shape} losses "
                                   f"(expected {len(points)})")
        else:
            hook = "predict_grid"
            predictions = self.estimator.predict_grid(points, train, y_train, val, start, **fit_kwargs)
            losses = np.full(len(points), np.nan)
            for i, probs, model in predictions:
                losses[i] = fold_loss(probs, y[va], self.scoring)
                if model is not None and self.ensemble:
                    models[offset + i] = model
                    every = np.concatenate([before, losses])
                    while models and sum(_array_bytes(m) for m in models.values()) > KEEP_MODELS_BYTES:
                        del models[max(models, key=lambda j: (every[j], j))]  # the worst-scoring one goes
        if np.isnan(losses).any():
            raise RuntimeError(f"{type(self.estimator).__name__}.{hook} left grid points "
                               f"{np.flatnonzero(np.isnan(losses)).tolist()} without a prediction or with a NaN loss")
        progress()
        return np.concatenate([before, losses]), models

    def _progress(self, points: int):
        """A callback logging, at INFO, each finished fold with the elapsed time (folds run in threads)."""
        start, done = time.perf_counter(), itertools.count(1)

        def fold_done() -> None:
            log.info("grid search of %s: fold %d/%d done (%d points, %.1f s)", self.method_name, next(done),
                     self.folds, points, time.perf_counter() - start)

        return fold_done

    def _warn_once_per_kind(self, caught: list, points: int) -> None:
        """Each kind of warning the CV fits raised (category and source line), once, with how often: a fit
        that warns on every fold and grid point logged its warning folds × points times (30 lines a job)."""
        kinds: dict[tuple, list] = {}
        for record in caught:
            kinds.setdefault((record.category, record.filename, record.lineno), []).append(record)
        for (category, _, _), records in kinds.items():
            count = f"{len(records)} times" if len(records) > 1 else "once"
            warnings.warn(f"{self.method_name} grid search ({self.folds} folds × {points} points): this warning "
                          f"came {count} in the CV fits, first as: {records[0].message}", category, stacklevel=4)

    def _record(self, points: list[dict], losses: np.ndarray, fixed: dict) -> None:
        """Fitted attributes of the search from the ``[folds, points]`` validation losses."""
        self.cv_losses_ = losses.mean(axis=0)
        self.best_index_ = int(np.argmin(self.cv_losses_))
        self.best_params_ = points[self.best_index_]
        self.best_score_ = -float(self.cv_losses_[self.best_index_])
        self.fixed_params_ = fixed
        ranks = np.empty(len(points), dtype=np.int64)
        ranks[np.argsort(self.cv_losses_, kind="stable")] = np.arange(1, len(points) + 1)
        self.cv_results_ = {
            "params": points,
            **{f"param_{name}": [p[name] for p in points] for name in points[0]},
            **{f"split{i}_test_score": -fold for i, fold in enumerate(losses)},
            "mean_test_score": -self.cv_losses_, "std_test_score": losses.std(axis=0), "rank_test_score": ranks,
        }

    def _line(self, points: list[dict], name: str) -> list[int]:
        """Indices of the points that share the chosen point's settings other than ``name``, by ``name``."""
        best = points[self.best_index_]
        return sorted((i for i, p in enumerate(points) if all(p[k] == best[k] for k in best if k != name)),
                      key=lambda i: points[i][name])

    def _open_end(self, points: list[dict], name: str, rise: float):
        """("smallest" | "largest", index of the next point inwards) where the chosen point is at that end of
        its line in ``name`` and the next point inwards has a mean CV loss higher by more than ``rise`` of the
        chosen one's; else None."""
        line = self._line(points, name)
        if len(line) < 2 or self.best_index_ not in (line[0], line[-1]):
            return None
        end, inwards = ("smallest", line[1]) if self.best_index_ == line[0] else ("largest", line[-2])
        chosen = self.cv_losses_[self.best_index_]
        return (end, inwards) if self.cv_losses_[inwards] - chosen > rise * abs(chosen) else None

    def _open_ended(self, point: dict) -> list[str]:
        return sorted(set(getattr(self.estimator, "open_ended_params", ())) & set(point))

    def _points_beyond(self, points: list[dict], ranges: dict) -> list[tuple[dict, list[int]]]:
        """The points an extension adds next (``extend``): for each open-ended hyperparameter whose CV optimum
        is at an end of its line with the loss still falling there (by more than :data:`EXTEND_FALL`), the
        chosen point one decade further out, unless :data:`EXTEND_DECADES` decades lie between it and the
        default grid's end (``ranges``: name → the grid's smallest and largest value); each with the indices of
        the line's next point inwards and its end (the warm start)."""
        best = points[self.best_index_]
        new = []
        for name in self._open_ended(best):
            found = self._open_end(points, name, EXTEND_FALL)
            value = float(best[name])
            if found is None or value <= 0:
                continue
            end, inwards = found
            low, high = ranges[name]
            beyond = np.log10(low / value) if end == "smallest" else np.log10(value / high)
            if beyond < EXTEND_DECADES - 1e-9:
                new.append(({**best, name: value * (0.1 if end == "smallest" else 10.0)}, [inwards, self.best_index_]))
        return new

    def _warn_if_best_at_an_open_end(self, points: list[dict], ranges: dict) -> None:
        """:class:`GridEdgeWarning` for each of the estimator's ``open_ended_params`` where the chosen point has
        the grid's smallest or largest value among the points that share its other settings, and the next
        value inwards has a mean CV loss higher by more than :data:`EDGE_RISE` of the chosen one's (with
        ``extend``, after the extension has reached its bound)."""
        best = points[self.best_index_]
        for name in self._open_ended(best):
            found = self._open_end(points, name, EDGE_RISE)
            if found is None:
                continue
            end, inwards = found
            chosen, next_loss = self.cv_losses_[self.best_index_], self.cv_losses_[inwards]
            next_value = points[inwards][name]
            loss = SCORING_NAMES[self.scoring]
            beyond = (f" (the default grid, {ranges[name][0]:.4g} to {ranges[name][1]:.4g}, continued "
                      f"{EXTEND_DECADES} decades: the bound of its extension)" if self.extend else "")
            warnings.warn(
                f"{self.method_name}: the {self.folds}-fold CV {loss} is lowest at the {end} {name} "
                f"of the grid{beyond}, {best[name]:.4g} ({chosen:.5g}; {next_loss:.5g} at {next_value:.4g}), "
                f"so the best {name} may lie beyond it. Extend the grid past {best[name]:.4g} "
                f"(grid: {{{name}: [...]}} in the method's settings), or prefer a method whose optimum "
                f"the grid brackets.", GridEdgeWarning, stacklevel=4)

    def _fit(self, scores: Scores, y: np.ndarray, train=None) -> None:
        if self.folds > y.size:
            raise ValueError(f"cv.folds: expected 2 <= folds <= n_samples = {y.size} (the calibration size), "
                             f"got {self.folds}")
        grid = self.grid(scores.num_classes) if callable(self.grid) else self.grid
        check_grid(type(self.estimator), grid)
        points = expand_grid(grid)
        ranges = {name: (min(p[name] for p in points), max(p[name] for p in points))
                  for name in self._open_ended(points[0])}
        fit_kwargs = {"train": train} if train is not None else {}
        splits = self._splits(y)
        progress = self._progress(len(points))
        shared = self.estimator.grid_shared(scores, y)
        fixed = {k: v for k, v in self.estimator.get_params(deep=False).items() if k not in points[0]}
        with warnings.catch_warnings(record=True) as caught:  # the fold threads' warnings too (process-wide)
            warnings.simplefilter("always")
            folds = thread_map(lambda split: self._fold_losses(points, scores, y, split, fit_kwargs, progress,
                                                               shared), splits)
            self._record(points, np.array([losses for losses, _ in folds]), fixed)
            added = []
            while self.extend and (new := self._points_beyond(points, ranges)):
                added.append(new)
                starts = [j for _, line_end in new for j in line_end]
                progress = self._progress(len(new))
                folds = thread_map(lambda job: self._fold_losses(
                    [p for p, _ in new], scores, y, job[0], fit_kwargs, progress, shared,
                    prior=(*job[1], [job[1][1][j] for j in starts if j in job[1][1]])), list(zip(splits, folds)))
                points = points + [p for p, _ in new]
                self._record(points, np.array([losses for losses, _ in folds]), fixed)
        self.added_points_ = points[len(points) - sum(len(p) for p in added):] if added else []
        self._warn_once_per_kind(caught, len(points))
        shared = None  # released before the refit
        self._warn_if_best_at_an_open_end(points, ranges)

        def fit_best(rows=None):
            """The best point fitted on rows ``rows``, or on the given scores themselves (no copy, and a
            chain's derivation kept: ``Scores.derived_from``)."""
            data, labels = (scores, y) if rows is None else (scores.subset(rows), y[rows])
            return clone(self.estimator).set_params(**self.best_params_).fit(data, labels, **fit_kwargs)

        if not self.ensemble:
            self.estimators_ = [fit_best()]
            return
        kept = [models.get(self.best_index_) for _, models in folds]
        refitted = iter(thread_map(fit_best, [tr for (tr, _), model in zip(splits, kept) if model is None]))
        self.estimators_ = [model if model is not None else next(refitted) for model in kept]

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        """The mean of the models' probabilities, summed one model at a time (five 25,000 × 1,000 outputs at
        once held 1 GB)."""
        total = np.array(self.estimators_[0].predict_proba(scores), dtype=np.float64)  # a copy: never a model's own
        for est in self.estimators_[1:]:
            total += est.predict_proba(scores)
        return total / len(self.estimators_)

    def torch_stage(self):
        from calbench.methods.torch_stages import FoldAverage

        return FoldAverage([est.to_torch() for est in self.estimators_])

    def transform(self, scores) -> Scores:
        if len(self.estimators_) == 1:
            return self.estimators_[0].transform(self._check_scores(scores))
        return super().transform(scores)

    def fitted_summary(self) -> dict:
        """The chosen point, the settings held fixed, the mean CV loss of every point (grid order) and the
        fold losses of the chosen one."""
        return {
            "best_params": self.best_params_,
            "fixed_params": self.fixed_params_,
            "cv_loss": float(self.cv_losses_[self.best_index_]),
            "cv_scoring": self.scoring,
            "cv_fold_losses": [-float(self.cv_results_[f"split{i}_test_score"][self.best_index_])
                               for i in range(self.folds)],
            "cv_losses": self.cv_losses_.tolist(),
            **({"fitted": self.estimators_[0].fitted_summary()} if len(self.estimators_) == 1 else {}),
        }


def _array_bytes(model) -> int:
    """Bytes of the arrays a fitted model holds as attributes."""
    return sum(value.nbytes for value in vars(model).values() if isinstance(value, np.ndarray))
