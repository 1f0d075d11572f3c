"""Settings that mean what they say and calibrators as scikit-learn estimators."""

import json
import logging
import pickle
import re

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import estimator_checks_generator
from sklearn.utils.validation import check_is_fitted

from calbench.data.synthetic import planted_temperature
from calbench.methods import Chain, GridSearch, available, make, method_class
from calbench.methods.lece import PAPER_GRID
from calbench.methods.linear_maps import coarse_odir_grid
from calbench.metrics.proper import log_loss

#: Methods that learn from embeddings and the training split: fitted in test_kcal.py, cloned here.
NEEDS_TRAIN = {name for name in available() if "train" in method_class(name).needs}


def _data(n=300, k=4, seed=0):
    d = planted_temperature(n, np.random.default_rng(seed), num_classes=k, temperature=2.0)
    return d["logits"], d["labels"]


def _untuned(name):
    """The method without its default CV grid (fast on small data)."""
    return make(name, grid=None) if method_class(name).default_grid else make(name)


# -- settings held fixed ------------------------------------------------------------------------------------
def test_a_given_setting_is_held_fixed_and_the_rest_of_the_default_grid_searched():
    z, y = _data()
    cal = make("lece", q=0.05).fit(z, y)
    assert isinstance(cal, GridSearch) and cal.grid == {"t": PAPER_GRID["t"]} and cal.folds == 10
    assert set(cal.best_params_) == {"t"} and cal.estimators_[0].q == 0.05 and cal.estimators_[0].k_ == 15
    summary = cal.fitted_summary()
    assert summary["fixed_params"]["q"] == 0.05 and summary["best_params"] == cal.best_params_
    assert len(summary["cv_losses"]) == 10 and len(summary["cv_fold_losses"]) == 10
    assert summary["cv_loss"] == pytest.approx(np.mean(summary["cv_fold_losses"]))
    json.dumps(summary)  # recorded as JSON in the calibrated HDF5


def test_every_searched_setting_given_means_no_search():
    cal = make("lece", q=0.05, t=0.01)
    assert type(cal).__name__ == "LECE" and (cal.q, cal.t) == (0.05, 0.01)
    assert type(make("dir_odir", reg_lambda=0.1, reg_mu=1.0)).__name__ == "DirichletODIR"
    assert type(make("dir_l2", reg_lambda=0.1)).__name__ == "DirichletL2"
    with pytest.raises(ValueError, match="`cv` settings .* no grid is searched"):
        make("lece", q=0.05, t=0.01, cv={"folds": 3})


def test_partial_grid_of_a_grid_that_depends_on_the_number_of_classes():
    """dir_odir with λ given searches only the default grid's μ list (coarse_odir_grid) for its k."""
    z, y = _data(n=200, k=3)
    cal = make("dir_odir", reg_lambda=0.1, max_iter=50)
    mus = coarse_odir_grid(3)["reg_mu"]
    assert cal.grid(3) == {"reg_mu": mus}
    cal.fit(z, y)
    assert set(cal.best_params_) == {"reg_mu"} and len(cal.cv_losses_) == len(mus)
    assert all(est.reg_lambda == 0.1 and est.max_iter == 50 for est in cal.estimators_)
    # a given reg_scale is the scale of the searched values too
    code = make("dir_odir", reg_scale="code").grid(3)
    assert code == {k: v for k, v in coarse_odir_grid(3, "code").items() if k != "reg_scale"}


def test_explicit_grid_is_searched_as_given_and_may_not_also_be_set():
    assert make("lece", grid={"q": [0.1, 0.2]}, t=0.01).grid == {"q": [0.1, 0.2]}
    assert type(make("lece", grid=None)).__name__ == "LECE"
    with pytest.raises(ValueError, match=r"\['q'\] both set and searched by the grid"):
        make("lece", q=0.05, grid={"q": [0.1, 0.2]})


def test_chain_stages_hold_their_settings():
    chain = make("ts+lece", lece={"q": 0.05})
    assert chain.steps[1].grid == {"t": PAPER_GRID["t"]} and chain.steps[1].estimator.q == 0.05


def test_grid_search_records_scikit_learn_cv_results_and_logs_progress(caplog):
    z, y = _data()
    with caplog.at_level(logging.INFO, logger="calbench"):
        cal = make("lece", grid={"q": [0.05, 0.2, 1.0]}, cv={"folds": 4}).fit(z, y)
    assert sum("fold" in r.message and "lece" in r.message for r in caplog.records) == 4
    res = cal.cv_results_
    folds = np.array([res[f"split{i}_test_score"] for i in range(4)])
    np.testing.assert_allclose(res["mean_test_score"], folds.mean(axis=0))
    np.testing.assert_allclose(cal.cv_losses_, -res["mean_test_score"])
    assert res["param_q"] == [0.05, 0.2, 1.0] and res["rank_test_score"][cal.best_index_] == 1
    assert cal.best_score_ == res["mean_test_score"].max()


def test_our_grid_search_equals_scikit_learns_on_the_same_folds():
    """GridSearchCV's default scoring is the calibrator's score, minus the mean log-loss: same numbers."""
    z, y = _data()
    ours = make("lece", grid={"q": [0.05, 0.2, 1.0]}, cv={"folds": 5, "seed": 0}).fit(z, y)
    theirs = GridSearchCV(make("lece", grid=None), {"q": [0.05, 0.2, 1.0]},
                          cv=StratifiedKFold(5, shuffle=True, random_state=0)).fit(z, y)
    np.testing.assert_allclose(theirs.cv_results_["mean_test_score"], ours.cv_results_["mean_test_score"], rtol=1e-12)
    assert theirs.best_params_ == ours.best_params_
    np.testing.assert_allclose(theirs.predict_proba(z), ours.predict_proba(z), rtol=1e-12)


# -- scikit-learn citizenship -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", available())
def test_get_params_and_clone_round_trip(name):
    """Parameters are stored unchanged in __init__, so scikit-learn's clone (which checks that) rebuilds them."""
    est = make(name)
    copy = clone(est)
    assert copy is not est and type(copy) is type(est) and repr(copy) == repr(est)
    nested = [k for k, v in est.get_params(deep=False).items() if hasattr(v, "get_params")]
    assert all(copy.get_params(deep=False)[k] is not est.get_params(deep=False)[k] for k in nested)
    assert repr(clone(est).set_params(**est.get_params(deep=True))) == repr(est)


@pytest.mark.parametrize("name", sorted(set(available()) - NEEDS_TRAIN))
def test_fit_returns_self_keeps_params_pickles_and_is_row_wise(name):
    """scikit-learn's common checks that cannot see score matrices, run on one: fit returns self, leaves the
    parameters as given, refits identically, pickles, and each row's output depends only on that row."""
    z, y = _data(n=200, k=3)
    est = _untuned(name)
    before = repr(est)
    assert est.fit(z, y) is est and repr(est) == before
    check_is_fitted(est)
    probs = est.predict_proba(z)
    np.testing.assert_allclose(clone(est).fit(z, y).predict_proba(z), probs, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict_proba(z), probs)
    order = np.random.default_rng(0).permutation(len(z))
    np.testing.assert_allclose(est.predict_proba(z[order]), probs[order], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.predict_proba(z[:7]), probs[:7], rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    assert est.n_features_in_ == 3
    np.testing.assert_array_equal(est.predict(z), probs.argmax(axis=1))
    assert est.score(z, y) == pytest.approx(-log_loss(probs, y))


def test_clone_of_grid_search_and_chain_is_unfitted_with_equal_settings():
    z, y = _data()
    for est in (make("ts+lece", lece={"q": 0.05, "cv": {"folds": 3}}), make("dir_odir", reg_lambda=0.1)):
        if isinstance(est, Chain):
            est.fit(z, y)
        copy = clone(est)
        settings_only = re.sub(r" \[fitted: best_params_=[^\]]*\]", "", repr(est))  # a fit adds its chosen point
        assert repr(copy) == settings_only and not hasattr(copy, "num_classes_")
        with pytest.raises(NotFittedError):
            check_is_fitted(copy)


def test_cross_val_score_and_pipeline():
    z, y = _data()
    folds = KFold(3, shuffle=True, random_state=0)
    scores = cross_val_score(make("ts"), z, y, cv=folds)
    expected = [-log_loss(make("ts").fit(z[tr], y[tr]).predict_proba(z[te]), y[te]) for tr, te in folds.split(z)]
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
    # a Pipeline of calibrators is the chain: transform hands Scores to the next stage
    pipe = Pipeline([("ts", make("ts")), ("lece", make("lece", grid=None))]).fit(z, y)
    np.testing.assert_allclose(pipe.predict_proba(z), make("ts+lece", lece={"grid": None}).fit(z, y).predict_proba(z))
    assert GridSearchCV(make("ts"), {}, cv=3).fit(z, y).best_score_ < 0


def test_check_is_fitted_and_unfitted_errors():
    est = make("ts")
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        est.predict(np.zeros((2, 3)))
    assert not hasattr(est, "classes_") and not hasattr(est, "n_features_in_")


# -- scikit-learn's common estimator checks ------------------------------------------------------------------
#: Checks that do not apply to a calibrator, whose input is a score matrix with one column per class: labels
#: must be the column indices 0..C-1, ``transform`` hands :class:`Scores` to a chain's next stage, and scores are
#: dense numpy arrays. They are not generated; what they check on such inputs is in
#: test_fit_returns_self_keeps_params_pickles_and_is_row_wise.
LABELS = "feeds labels that are not column indices 0..C-1 (more labels than columns, strings, floats, 2-D)"
TRANSFORM = "compares transform outputs as arrays; transform returns Scores for a chain's next stage"
NOT_APPLICABLE = {
    **dict.fromkeys(["check_estimators_overwrite_params", "check_estimators_fit_returns_self",
                     "check_readonly_memmap_input", "check_classifier_data_not_an_array", "check_classifiers_classes",
                     "check_classifiers_train", "check_supervised_y_2d"], LABELS),
    **dict.fromkeys(["check_estimators_pickle", "check_fit_idempotent", "check_methods_sample_order_invariance",
                     "check_methods_subset_invariance", "check_transformer_general",
                     "check_transformer_data_not_an_array"], TRANSFORM),
    **dict.fromkeys(["check_estimator_sparse_array", "check_estimator_sparse_matrix", "check_estimator_sparse_tag"],
                    "score matrices are dense; sparse input is refused with calbench's own message"),
    "check_array_api_input": "calibrators compute with numpy; array-API namespaces (torch, cupy) are not inputs",
}
#: Checks that run and are expected to fail (strict: one that starts passing fails the suite): bad input is
#: refused, with calbench's own message where the check asks for scikit-learn's wording.
OWN_MESSAGE = dict.fromkeys(
    ["check_fit2d_1feature", "check_n_features_in_after_fitting", "check_fit2d_predict1d", "check_complex_data",
     "check_dtype_object", "check_classifiers_regression_target", "check_requires_y_none",
     "check_estimators_empty_data_messages"],
    "refused with calbench's own message, not the wording the check matches (one column, 1-D, complex, object, "
    "float labels, None, zero features; zero rows: test_every_method_refuses_an_empty_calibration_set)")
#: Argmax-preserving maps cannot predict the one class seen in fit (a missing class is tested in test_valid_outputs.py).
ONE_LABEL = {"check_classifiers_one_label": "keeps the classifier's argmax, which a single label cannot change"}
#: One method of each kind (scaling, linear map, one-vs-rest, neighbours), a grid search and a chain; the
#: rest share their base classes (the suite's runtime stays small).
PER_CLASS = dict.fromkeys(["check_positive_only_tag_during_fit", "check_estimators_dtypes", "check_fit2d_1sample",
                           "check_pipeline_consistency", "check_estimators_nan_inf"],
                          "its data lacks a class, which per-class fits refuse (on_missing_class REFUSE; tested in "
                          "test_valid_outputs.py)")
CHECKED = {"ts": ONE_LABEL, "dir_odir": {}, "irova": PER_CLASS, "lece": {}}


def _checked_estimators():
    yield from (_untuned(name) for name in CHECKED)
    yield make("lece", grid={"q": [0.2, 1.0]}, cv={"folds": 3})  # GridSearch
    yield make("ts+irm")  # Chain (of methods that cope with the checks' data lacking a class)


def _expected_failures(est):
    return {**OWN_MESSAGE, **(ONE_LABEL if isinstance(est, Chain) else CHECKED[est.method_name])}


def _checks():
    """Every check of scikit-learn's suite that applies, for each estimator; the expected failures are
    xfail(strict=True) with their reason."""
    for est in _checked_estimators():
        label = getattr(est, "method_name", type(est).__name__)
        for param in estimator_checks_generator(est, expected_failed_checks=_expected_failures(est), mark="xfail",
                                                xfail_strict=True):
            estimator, check = param.values if hasattr(param, "values") else param
            name = getattr(check, "func", check).__name__
            if name not in NOT_APPLICABLE:
                marks = param.marks if hasattr(param, "marks") else ()
                yield pytest.param(estimator, check, marks=marks, id=f"{type(est).__name__}:{label}-{name}")


@pytest.mark.parametrize("estimator,check", _checks())
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("name", available())
def test_every_method_refuses_an_empty_calibration_set(name):
    """Zero rows (scikit-learn's check_estimators_empty_data_messages, first half): a clear error naming the
    method, for every registered method (embeddings given, for those that need them)."""
    from calbench import Scores

    with pytest.raises(ValueError, match=f"{name}: the calibration set is empty"):
        make(name).fit(Scores(np.empty((0, 3)), np.empty((0, 4))), np.empty(0, dtype=np.int64))
