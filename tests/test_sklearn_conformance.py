"""The scikit-learn estimators as scikit-learn expects them: its estimator checks (of the clusterers in
test_sklearn_clusterer_checks.py), Pipeline, GridSearchCV,
cross_val_score, clone and pickle; rules as data and printed explanations; the regressions on input that
used to be taken silently or crash (the rest of the bad-input cases are in test_bad_input.py)."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from interpretable_zoo.inference.bcm import BCMClusterer
from interpretable_zoo.inference.brl import BayesianRuleListClassifier, Rule
from interpretable_zoo.inference.mgm import MGMClusterer
from interpretable_zoo.inference.prototype_selection import PrototypeClassifier
from interpretable_zoo.models import brl

MCMC_QUICK = {"num_samples": 20, "num_warmup": 0, "num_chains": 1, "n_temperatures": 1, "progress_bar": False}
"""Fixed tiny untempered runs: the checks are about the estimator's interface, not about its posterior."""

ESTIMATORS = [
    BayesianRuleListClassifier(**MCMC_QUICK),
    PrototypeClassifier(),
]
COMPILING_PER_SHAPE = [
    BCMClusterer(**{**MCMC_QUICK, "num_samples": 5}),
    MGMClusterer(restarts=1, max_iter=2, binarize=0.0),
]
"""Estimators whose compiled program is specific to the number of observations (BCM's sampler, MGM's search):
scikit-learn's checks fit them on about twenty shapes, each a trace and compilation of that program; their
checks have a file of their own (test_sklearn_clusterer_checks.py), which the suite's workers run beside
the others."""


def expected_failures(estimator) -> dict[str, str]:
    """Checks whose premise is false for the model, with the reason."""
    if isinstance(estimator, MGMClusterer):
        return {
            "check_clustering": "MGM's n_clusters components are a variational posterior's: a component that no "
            "observation prefers stays empty, so labels_ need not be the consecutive 0..k-1 that the check demands",
        }
    if isinstance(estimator, BCMClusterer):
        reason = ("BCM models categorical features (integer codes or categories; its tags say so), and the check "
                  "clusters real-valued blobs, which fit_bcm refuses as 'non-integer values'")  # fmt: skip
        return {"check_clustering": reason, "check_clustering(readonly_memmap=True)": reason}
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failures)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


# ----------------------------------------------------------------------------- composition

RNG = np.random.default_rng(0)
X_REAL = np.vstack([RNG.normal(-2, 1, (20, 3)), RNG.normal(2, 1, (20, 3))])
Y_REAL = np.repeat(["a", "b"], 20)


def test_pipeline_scales_then_classifies_by_prototypes():
    pipeline = make_pipeline(StandardScaler(), PrototypeClassifier(eps=1.0)).fit(X_REAL, Y_REAL)
    scaled = StandardScaler().fit_transform(X_REAL)
    alone = PrototypeClassifier(eps=1.0).fit(scaled, Y_REAL)
    np.testing.assert_array_equal(pipeline.predict(X_REAL), alone.predict(scaled))
    assert pipeline.score(X_REAL, Y_REAL) > 0.9


def test_grid_search_cross_validates_the_radius():
    search = GridSearchCV(PrototypeClassifier(), {"eps": [0.05, 1.5]}, cv=4).fit(X_REAL, Y_REAL)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(scores > 0.9) and search.best_score_ == scores.max()
    assert search.best_estimator_.eps_ == search.best_params_["eps"]
    np.testing.assert_array_equal(search.predict(X_REAL), search.best_estimator_.predict(X_REAL))


def test_cross_val_score_of_a_rule_list_on_a_planted_rule():
    X = (RNG.random((60, 4)) < 0.5).astype(int)
    y = np.where(X[:, 0] == 1, "yes", "no")  # the rule "if x0 then yes": every fold learns it
    scores = cross_val_score(BayesianRuleListClassifier(**{**MCMC_QUICK, "num_samples": 50}), X, y, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.9, scores


# ----------------------------------------------------------------------------- clone and pickle


@pytest.fixture(scope="module")
def brl_fit():
    """A rule list on 4 binary NumPy columns with a planted rule, and its data."""
    X = (RNG.random((40, 4)) < 0.5).astype(int)
    y = np.where(X[:, 1] == 1, "yes", "no")
    return BayesianRuleListClassifier(**{**MCMC_QUICK, "num_samples": 50}).fit(X, y), X, y


def test_estimators_and_results_pickle_before_and_after_fit(brl_fit):
    """(BCM's clusterer and result: in test_bcm_fit, which shares their compiled sampler.)"""
    classifier, X, _ = brl_fit
    prototypes = PrototypeClassifier(eps=1.0).fit(X_REAL, Y_REAL)
    for estimator, data in ((classifier, X), (prototypes, X_REAL)):
        unfitted = pickle.loads(pickle.dumps(clone(estimator)))
        assert unfitted.get_params() == clone(estimator).get_params()
        restored = pickle.loads(pickle.dumps(estimator))
        np.testing.assert_array_equal(restored.predict(data), estimator.predict(data))
        assert str(restored) == str(estimator)
    items = classifier.encoder_.transform(X)
    np.testing.assert_allclose(pickle.loads(pickle.dumps(classifier.result_)).predict_proba(items),
                               classifier.result_.predict_proba(items))  # fmt: skip
    assert pickle.loads(pickle.dumps(prototypes.selection_)).explain() == prototypes.selection_.explain()


# ----------------------------------------------------------------------------- rules as data, printing


def test_rules_are_the_printed_list_as_data(brl_fit):
    classifier, X, y = brl_fit
    rules = classifier.rules_
    assert all(isinstance(rule, Rule) for rule in rules)
    assert rules[-1].conditions == () and rules[-1].antecedent is None  # the default rule closes the list
    assert rules[0].conditions in (("x1=1",), ("x1=0",))  # the planted rule comes first
    counts = np.sum([rule.counts for rule in rules], axis=0)
    np.testing.assert_array_equal(counts, [np.sum(y == c) for c in classifier.classes_])  # every row captured once
    for rule in rules:
        rule_counts = np.asarray(rule.counts)
        np.testing.assert_allclose(rule.probabilities, (rule_counts + 1.0) / (rule_counts.sum() + 2.0))  # alpha = 1
        assert rule.prediction == classifier.classes_[np.argmax(rule.probabilities)]
    assert json.loads(json.dumps([dataclasses.asdict(rule) for rule in rules]))[0]["counts"] == list(rules[0].counts)
    assert len(str(classifier).splitlines()) == len(rules) and str(classifier) == classifier.explain()
    assert str(clone(classifier)) == repr(clone(classifier)) and "BayesianRuleListClassifier(" in str(clone(classifier))


# ----------------------------------------------------------------------------- regressions


def test_empty_rule_list_predicts_the_default_rule():
    """A list of no rules (here forced by a list-length prior of mean 1e-3) is a posterior draw like any
    other: every prediction is the default rule's posterior mean (alpha + N) / (sum alpha + n)."""
    X = (RNG.random((40, 4)) < 0.5).astype(int)
    y = np.repeat(["a", "b", "c"], [20, 15, 5])
    classifier = BayesianRuleListClassifier(priors=brl.Priors(lam=1e-3), **{**MCMC_QUICK, "num_samples": 50})
    classifier.fit(X, y)
    assert classifier.result_.point_list() == ()
    default = (np.array([20, 15, 5]) + 1.0) / 43.0
    np.testing.assert_allclose(classifier.predict_proba(X), np.tile(default, (40, 1)))
    assert classifier.score(X, y) == 0.5  # every row predicted "a"
    assert [rule.conditions for rule in classifier.rules_] == [()]
    assert classifier.explain().startswith("y=a probability 49%")  # 21 / 43


def test_rule_list_refuses_more_columns_at_predict_than_in_fit(brl_fit):
    classifier, X, _ = brl_fit
    with pytest.raises(ValueError, match=r"^X has 6 features, but BayesianRuleListClassifier is expecting 4"):
        classifier.predict(np.hstack([X, X[:, :2]]))


@pytest.mark.parametrize("estimator", [clone(e) for e in ESTIMATORS + COMPILING_PER_SHAPE], ids=lambda e: type(e).__name__)
def test_every_method_before_fit_raises_not_fitted(estimator):
    for method in ("predict", "predict_proba", "transform", "explain"):
        if hasattr(estimator, method):
            with pytest.raises(NotFittedError):
                getattr(estimator, method)(*([] if method == "explain" else [X_REAL]))
    if isinstance(estimator, BayesianRuleListClassifier):
        with pytest.raises(NotFittedError):
            estimator.rules_


def failing_fit(estimator):
    """(estimator, X, y) whose fit passes scikit-learn's input checks (which record n_features_in_) and then
    fails: a single class for the classifiers, more clusters than observations for the clusterers."""
    if isinstance(estimator, (BCMClusterer, MGMClusterer)):
        X = RNG.integers(0, 2, (6, 3)) if isinstance(estimator, BCMClusterer) else X_REAL[:6]
        return clone(estimator).set_params(n_clusters=10), X, None
    X = (X_REAL > 0).astype(int) if isinstance(estimator, BayesianRuleListClassifier) else X_REAL
    return clone(estimator), X, np.zeros(len(X_REAL), int)


@pytest.mark.parametrize("estimator", [clone(e) for e in ESTIMATORS + COMPILING_PER_SHAPE], ids=lambda e: type(e).__name__)
def test_a_failed_fit_leaves_an_unfitted_estimator_unfitted(estimator):
    estimator, X, y = failing_fit(estimator)
    with pytest.raises(ValueError):
        estimator.fit(X, y)
    assert [name for name in vars(estimator) if name.endswith("_")] == []
    for method in ("predict", "transform", "explain"):
        if hasattr(estimator, method):
            with pytest.raises(NotFittedError):
                getattr(estimator, method)(*([] if method == "explain" else [X]))


def test_a_failed_refit_keeps_the_previous_fit(brl_fit):
    """A refit on another width that fails keeps the old encoder and result together (no mixed state)."""
    fitted, X, y = brl_fit
    classifier = copy.deepcopy(fitted)
    before = classifier.predict(X)
    with pytest.raises(ValueError, match="single class"):
        classifier.fit(np.hstack([X, X]), np.full(len(y), "no"))
    assert classifier.n_features_in_ == 4 and len(classifier.encoder_.item_columns) == len(fitted.encoder_.item_columns)
    np.testing.assert_array_equal(classifier.predict(X), before)
    assert classifier.rules_ == fitted.rules_
