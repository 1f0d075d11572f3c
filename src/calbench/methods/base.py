"""The calibrator interface (docs/architecture.md §4), in scikit-learn's conventions.

Subclasses take their hyperparameters as explicit keyword-only arguments of ``__init__`` (after ``*``) and store them
unchanged (so that ``get_params``/``set_params``/``clone`` work), learn in ``_fit`` (fitted attributes
end in ``_``) and predict in ``_predict_proba``. The public ``fit``/``predict_proba`` validate the
boundary once, so implementations see a :class:`~calbench.scores.Scores` and int64 labels in ``[0, C)``.

Calibrators are scikit-learn classifiers whose features are the C score columns (``GridSearchCV``,
``cross_val_score``, ``Pipeline``, ``sklearn.base.clone``, ``check_is_fitted``) without inheriting its base
classes: importing scikit-learn would add about 0.75 CPU-s to every job (0.74–0.78 CPU-s in five imports after
numpy and scipy; 1–2 s of wall time on a busy machine), so it is imported only when it asks for the estimator's tags.
"""

from __future__ import annotations

import copy
import enum
import inspect
import warnings
from collections.abc import Iterator

import numpy as np

from calbench.fitted_state import Count
from calbench.methods.constraints import check_settings
from calbench.metrics.proper import log_loss_rows
from calbench.parallel import blas_region
from calbench.scores import (
    DISTRIBUTION_TOL,
    PROB_EPS,
    NotDistributionsError,
    Scores,
    as_scores,
    check_labels,
    input_scores,
    non_distributions,
)


class MissingClass(enum.Enum):
    """What :meth:`Calibrator.fit` does when some class has no calibration label (a method's
    ``on_missing_class``)."""

    REFUSE = "refuse"  # the method fits something per class and fails (or silently degenerates) without one
    WARN = "warn"  # the method copes: MissingClassWarning
    IGNORE = "ignore"  # the method does not use the labels


class MissingClassWarning(UserWarning):
    """A method that copes without examples of some class (``on_missing_class`` is ``WARN``) was
    fitted on calibration labels that lack one; its output for that class comes from the scores alone."""


def missing_classes_text(y: np.ndarray, num_classes: int) -> str | None:
    """``"1 of 4 classes have none among the 40 calibration labels (classes 2)"``, or None when none is missing."""
    missing = np.flatnonzero(np.bincount(y, minlength=num_classes) == 0)
    if not missing.size:
        return None
    shown = ", ".join(map(str, missing[:10])) + (", ..." if missing.size > 10 else "")
    return f"{missing.size} of {num_classes} classes have none among the {y.size} calibration labels (classes {shown})"


def check_not_empty(scores: Scores, who: str) -> None:
    """Refuse an empty calibration set (no method can fit on zero rows)."""
    if scores.n == 0:
        raise ValueError(f"{who}: the calibration set is empty (0 rows of scores and labels); fit needs labelled "
                         "calibration rows")


def check_every_class(y: np.ndarray, num_classes: int, who: str, policy: MissingClass = MissingClass.REFUSE) -> None:
    """Raise (``REFUSE``) or warn (``WARN``) when some class of ``[0, num_classes)`` has no label in ``y``."""
    text = None if policy is MissingClass.IGNORE else missing_classes_text(y, num_classes)
    if text is None:
        return
    if policy is MissingClass.REFUSE:
        raise ValueError(
            f"{who} needs calibration examples of every class, but {text}; use a larger or stratified calibration "
            "split (source `split: {cal_size: N, stratify: true}`) or a method that does not fit per class"
        )
    missing = text.rpartition("(")[2]  # "classes 2)": the same text for every fold of a grid search
    warnings.warn(f"{who} was fitted without calibration examples of some classes ({missing}; their probabilities "
                  "come from the scores alone", MissingClassWarning, stacklevel=3)


def method_label(cal) -> str:
    """Registered name of a calibrator, ``a+b`` for a chain (the name ``make`` takes), for messages and files."""
    steps = getattr(cal, "steps", None)
    if steps is not None:
        return "+".join(method_label(step) for step in steps)
    return getattr(cal, "method_name", type(cal).__name__)


#: The values of a calibrator's ``needs`` and what each makes the calibrate job read; the one list of them (the docs
#: point here; tests/contract/test_layers.py checks every registered method's ``needs`` against it).
NEEDS = {
    "logits": "the classifier's scores (:class:`~calbench.scores.Scores` ``logits``, or log-probabilities)",
    "embeddings": "the classifier's penultimate-layer features (``Scores.embeddings``; KCal)",
    "train": "the classifier's training split, given to ``fit`` as ``train=(train_scores, train_labels)`` (KCal's "
             "projection)",
    "perturbed_cal": "the model's outputs on the calibration images perturbed at increasing strengths (rule "
                     "dump_perturbed_cal; Tomani et al. 2021), fitted on in place of the clean calibration split",
}


class Calibrator:
    """Base class of every calibration method.

    Class attributes
    ----------------
    needs : what the method reads, a subset of :data:`NEEDS`.
    default_grid : hyperparameter grid searched by cross-validation when the config gives none
        (``None``: the method has no hyperparameters to tune); a ``staticmethod`` of the number of
        classes where the grid depends on it.
    default_cv : settings of that search (see :class:`calbench.methods.tuning.GridSearch`).
    preserves_argmax : True for methods whose output never changes the predicted class.
    on_missing_class : what ``fit`` does with a calibration set lacking some class (:class:`MissingClass`):
        ``REFUSE`` for methods that fit something per class and fail (or silently degenerate) without an
        example; ``WARN`` (methods that cope) with :class:`MissingClassWarning`; ``IGNORE``: labels unused.
    floor_note : the floor a method puts under its outputs, if any, as the tables' footnote says it (e.g.
        IROvA's and H-LECE's ``eps``); "" for none.
    open_ended_params : hyperparameters whose range has no natural end (penalty weights): a grid search warns
        (:class:`~calbench.methods.tuning.GridEdgeWarning`) when its optimum lies at the end of the grid's
        values of one of them with the CV loss still falling there.
    _parameter_constraints : the allowed values of every setting (:mod:`calbench.methods.constraints`),
        checked by :func:`~calbench.methods.make` and at :meth:`fit` alike; ``_fit`` checks no setting of its own.
    _fitted_state : the kind, dtype and shape of every fitted attribute the class's methods assign
        (:mod:`calbench.fitted_state`), merged with its bases'; a loaded calibrator is checked against it.
    """

    needs: frozenset[str] = frozenset({"logits"})
    default_grid: dict | None = None
    default_cv: dict = {}
    preserves_argmax: bool = False
    on_missing_class: MissingClass = MissingClass.WARN
    floor_note: str = ""
    #: True where the method's family is closed under composition and its fit on its own outputs is the identity
    #: (ts: T₁·T₂; vector and matrix scaling: affine maps), so that a chain repeating it (``ts+ts``) is the method
    #: itself (:func:`calbench.methods.registry.resolved`).
    composes_to_itself: bool = False
    open_ended_params: tuple[str, ...] = ()
    _parameter_constraints: dict = {}
    _fitted_state: dict = {"num_classes_": Count("C"), "embedding_dim_": Count("H", optional=True)}
    #: What a setting's name is prefixed with in messages (``cv.`` for a grid search's, as the config writes them).
    _settings_prefix: str = ""

    # -- scikit-learn's parameter API, re-implemented so that jobs need not import it (module docstring) -----
    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The keyword arguments of ``__init__`` (the hyperparameters), sorted."""
        skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        init = cls.__init__
        if init is object.__init__:
            return []
        return sorted(p.name for p in inspect.signature(init).parameters.values()
                      if p.name != "self" and p.kind not in skip)

    def get_params(self, deep: bool = True) -> dict:
        """Hyperparameters by name; with ``deep``, also ``<name>__<param>`` of nested calibrators."""
        params = {name: getattr(self, name) for name in self._get_param_names()}
        if deep:
            for name, value in list(params.items()):
                if isinstance(value, Calibrator):
                    params.update({f"{name}__{k}": v for k, v in value.get_params().items()})
        return params

    def set_params(self, **params) -> "Calibrator":
        """Set hyperparameters (``<name>__<param>`` reaches a nested calibrator); returns ``self``."""
        valid = self._get_param_names()
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ValueError(f"{type(self).__name__}: unknown setting {name!r}; allowed settings: {valid}")
            if sub:
                getattr(self, name).set_params(**{sub: value})
            else:
                setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        """scikit-learn's form (the settings); a fitted grid search adds the point it chose, since its
        ``estimator`` shows the unfitted template's values."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items())
        chosen = getattr(self, "best_params_", None)
        return f"{type(self).__name__}({args})" + (f" [fitted: best_params_={chosen!r}]" if chosen else "")

    # -- the rest of scikit-learn's estimator protocol -----------------------------------------------------
    def __sklearn_tags__(self):
        """A multiclass classifier on a 2-D score matrix, needing labels and a fit; ``transform`` passes
        :class:`Scores` to the next stage of a chain (or of a ``Pipeline``)."""
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags, TransformerTags

        return Tags(estimator_type="classifier", target_tags=TargetTags(required=True),
                    classifier_tags=ClassifierTags(), transformer_tags=TransformerTags(preserves_dtype=[]),
                    input_tags=InputTags(two_d_array=True))

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "num_classes_")

    @property
    def classes_(self) -> np.ndarray:
        """The class labels, ``0 … C−1`` (the columns of the scores)."""
        return np.arange(self.num_classes_)

    @property
    def n_features_in_(self) -> int:
        """Number of score columns seen in ``fit`` (= number of classes)."""
        return self.num_classes_

    def predict(self, scores) -> np.ndarray:
        """The most probable class of each row after calibration."""
        return self.predict_proba(scores).argmax(axis=1)

    def score(self, scores, y, sample_weight=None) -> float:
        """Minus the mean log-loss of the calibrated probabilities (higher is better), the default score of
        scikit-learn's model selection."""
        scores = self._check_scores(scores)
        y = check_labels(y, scores.num_classes, scores.n)
        return -float(np.average(log_loss_rows(self.predict_proba(scores), y), weights=sample_weight))

    def fit(self, scores, y, train=None) -> "Calibrator":
        """Fit on calibration scores ``[N, C]`` (a :class:`Scores` or logits) and labels ``[N]``.

        ``train`` is ``(train_scores, train_labels)`` of the classifier's training split; only
        methods whose ``needs`` include ``"train"`` use it (and require it). Settings are checked against
        their declared ranges here, not in ``set_params`` (scikit-learn's convention). BLAS runs on the threads
        :func:`calbench.parallel.blas_region` allows: one unless :func:`calbench.parallel.use_cores` says more.
        """
        with blas_region():  # no frame of its own: warnings' stacklevel points at the caller of fit
            check_settings(self._parameter_constraints, self.get_params(deep=False), prefix=self._settings_prefix)
            scores = self._check_scores(scores)
            y = check_labels(y, scores.num_classes, scores.n)
            check_not_empty(scores, method_label(self))
            check_every_class(y, scores.num_classes, method_label(self), self.on_missing_class)
            self.num_classes_ = scores.num_classes
            self._record_embedding_width(scores)
            if "train" in self.needs:
                if train is None:
                    raise ValueError(f"{type(self).__name__} learns from the training split: pass "
                                     "train=(scores, labels) (in the workflow: a source with a `train` group, e.g. a "
                                     "`train` source)")
                train_scores = self._check_scores(train[0])
                self._fit(scores, y, train=(train_scores, check_labels(train[1], scores.num_classes, train_scores.n,
                                                                       name="train labels")))
            else:
                self._fit(scores, y)
            return self

    def _record_embedding_width(self, scores: Scores) -> None:
        """``embedding_dim_``: the width of the embeddings a calibrator that reads them was fitted on (what a loaded
        calibrator is checked against, :mod:`calbench.persist`)."""
        if "embeddings" in self.needs and scores.embeddings is not None:
            self.embedding_dim_ = int(scores.embeddings.shape[1])

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated probabilities ``[N, C]`` (float64, rows sum to 1)."""
        scores = self._check_scores(scores)
        if not hasattr(self, "num_classes_"):
            from sklearn.exceptions import NotFittedError  # a ValueError and AttributeError, as scikit-learn expects

            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit(scores, y) first")
        if scores.num_classes != self.num_classes_:
            raise ValueError(
                f"{method_label(self)} was fitted on {self.num_classes_} classes, got scores with {scores.num_classes}"
            )
        with blas_region():  # BLAS on the threads the policy allows (calbench.parallel)
            probs = self._predict_proba(scores)
        source = getattr(self, "loaded_from_", None)  # set by calbench.load: a file's values are checked on the way out
        if source is not None and (bad := non_distributions(probs)):
            raise NotDistributionsError(
                f"{source}: the loaded {method_label(self)} computed {bad} of {len(probs)} rows that are not "
                f"probability distributions (finite, non-negative and summing to 1, within {DISTRIBUTION_TOL}); its "
                "file holds fitted values that no fit makes: refit the calibrator and save it again")
        return probs

    def transform(self, scores) -> Scores:
        """The calibrated output as :class:`Scores` for the next stage of a chain.

        The default takes the logarithm of :meth:`predict_proba` floored at :data:`PROB_EPS`; methods
        that produce logits (temperature scaling, matrix scaling) override it to pass them on unfloored.
        """
        scores = self._check_scores(scores)
        return Scores.from_probs(self.predict_proba(scores), scores.embeddings, floor=PROB_EPS)

    def fitted_summary(self) -> dict:
        """Small fitted parameters worth recording with the results (JSON-serialisable)."""
        return {}

    # -- grid search (calbench.methods.tuning): how a method shares work across the points of a grid ---------
    def predict_grid(self, points: list[dict], train: Scores, y_train: np.ndarray, val: Scores, start=(),
                     **fit_kwargs) -> Iterator[tuple[int, np.ndarray, Calibrator | None]]:
        """Yield ``(point index, probabilities on val, fitted model or None)`` for every grid point, in any order,
        the model fitted on (``train``, ``y_train``) with the settings ``points[index]``. This default fits a
        clone per point (``fit_kwargs``: ``train=`` for methods that need the training split) and keeps no model;
        methods override it to share work across the grid (LECE: one distance pass per fold; the affine maps:
        warm starts along a path, continued from ``start``, models fitted on the same rows in path order)."""
        for i, point in enumerate(points):
            yield i, clone(self).set_params(**point).fit(train, y_train, **fit_kwargs).predict_proba(val), None

    def grid_shared(self, scores: Scores, y: np.ndarray):
        """What every CV fold's :meth:`grid_losses` shares, computed once on the whole calibration set; None (this
        default) for nothing."""
        return None

    def grid_losses(self, points: list[dict], train: Scores, y_train: np.ndarray, val: Scores, y_val: np.ndarray,
                    scoring: str, shared=None, train_rows=None) -> np.ndarray | None:
        """The validation loss of every grid point (``[len(points)]``) without forming the outputs, with
        ``shared`` from :meth:`grid_shared` restricted to the fold's ``train_rows``; None (this default): the
        search scores :meth:`predict_grid`'s outputs instead."""
        return None

    # -- torch export: each class describes its own computation ------------------------------------------
    #: The methods that compute a calibrator's output, each with the export method that must mirror it: a
    #: class that overrides the former below the class that defines the latter has no valid export.
    _torch_mirrors: dict = {"predict_proba": "torch_stage", "_predict_proba": "torch_stage",
                            "transform": "torch_stage"}

    def torch_stage(self):
        """This fitted calibrator's computation as a torch module (:mod:`calbench.methods.torch_stages`):
        ``forward`` gives what :meth:`transform` passes on, ``proba`` what :meth:`predict_proba` returns.
        Methods that keep calibration data, a step function or a table have none (this default)."""
        raise ValueError(f"{method_label(self)} cannot be exported to torch: it is not a parametric map (it keeps "
                         "calibration data, a step function or a table); apply it with predict_proba or "
                         "`calbench apply` instead")

    def to_torch(self):
        """:meth:`torch_stage`, refused where this class computes differently from the class that defines
        its export (a subclass that overrides ``_predict_proba``, ``transform`` or ``features`` but not the
        export method that mirrors it)."""
        if not hasattr(self, "num_classes_"):
            raise ValueError(f"expected a fitted calibrator, got {self!r}; fit it (or calbench.load it) first")
        for computes, exports in self._torch_mirrors.items():
            compute_owner, export_owner = _owner(type(self), computes), _owner(type(self), exports)
            if export_owner is Calibrator:
                break  # the default torch_stage refuses
            if not issubclass(export_owner, compute_owner):
                raise ValueError(f"{method_label(self)} cannot be exported to torch: {compute_owner.__name__} "
                                 f"overrides {computes} but its {exports} is {export_owner.__name__}'s; define "
                                 f"{compute_owner.__name__}.{exports} to export it")
        return self.torch_stage()

    def _check_scores(self, scores) -> Scores:
        """``scores`` as :class:`Scores`; a plain array given to a loaded calibrator (``input_kind_`` set by
        :func:`calbench.load`) is read as the kind it was fitted on, as ``calbench apply`` reads it."""
        kind = getattr(self, "input_kind_", None)
        scores = as_scores(scores) if kind is None or isinstance(scores, Scores) else input_scores(scores, kind)
        if "embeddings" in self.needs and scores.embeddings is None:
            raise ValueError(
                f"{type(self).__name__} needs embeddings, but the scores carry none; "
                "use a source that dumps embeddings (e.g. a `train` source) or the logits variant"
            )
        return scores

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        raise NotImplementedError

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        raise NotImplementedError


def _owner(cls: type, name: str) -> type:
    """The class of ``cls``'s MRO that defines attribute ``name``."""
    return next(klass for klass in cls.__mro__ if name in vars(klass))


def clone(estimator):
    """An unfitted copy with the same hyperparameters (``sklearn.base.clone`` for calibrators)."""
    if isinstance(estimator, (list, tuple)):
        return type(estimator)(clone(e) for e in estimator)
    if not isinstance(estimator, Calibrator):
        return copy.deepcopy(estimator)
    return type(estimator)(**{k: clone(v) for k, v in estimator.get_params(deep=False).items()})
