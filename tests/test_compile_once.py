"""A second fit of the same shapes compiles nothing (Bayesian Sets compiles nothing at all; BRL is covered
in its own test files): data, priors and seeds enter the compiled programs as arguments, never as
constants (XLA backend compiles counted with jax.monitoring)."""

import jax
import numpy as np
import pytest
from compile_events import programs_compiled

from interpretable_zoo.inference import tempering
from interpretable_zoo.inference.bcm import fit_bcm
from interpretable_zoo.inference.brl import fit_brl
from interpretable_zoo.inference.mgm import fit_mgm
from interpretable_zoo.inference.prototype_selection import select_prototypes
from interpretable_zoo.models import bcm, mgm


def test_bcm_refit_with_other_data_priors_and_seed_compiles_nothing():
    rng = np.random.default_rng(0)
    options = dict(num_warmup=16, num_samples=16, num_chains=2, n_temperatures=2, n_values=3)
    first = fit_bcm(rng.integers(0, 3, (15, 6)), 3, seed=0, **options)
    first.transform(), first.explain()
    with programs_compiled() as compiles:
        second = fit_bcm(rng.integers(0, 3, (15, 6)), 3, seed=1, priors=bcm.Priors(alpha=0.5, q=0.3), **options)
        second.transform(), second.explain()
    assert compiles == []
    assert not np.array_equal(first.idata.posterior_sites["omega"].values, second.idata.posterior_sites["omega"].values)


def test_mgm_refit_with_other_data_priors_seed_and_sizes_compiles_nothing():
    """Another number of observations and of clusters in the same size buckets (24 and 30 rows padded to 32;
    3 and 2 clusters to 4) shares the compiled search."""
    rng = np.random.default_rng(3)
    first = fit_mgm(rng.integers(0, 2, (24, 6)), 3, restarts=2, seed=0)
    first.explain()
    with programs_compiled() as compiles:
        second = fit_mgm(rng.integers(0, 2, (30, 6)), 2, restarts=2, seed=1,
                         priors=mgm.Priors(alpha_l=5.0, alpha_f=(2.0, 0.5), rho=0.3, sigma2=3.0, alpha_z=2.0, s=0.6))
        second.explain()
    assert compiles == []
    assert first.elbo != second.elbo
    assert second.responsibilities.shape == (30, 2)


def test_mgm_follows_a_hook_replaced_in_a_running_session(monkeypatch):
    """The compiled search is traced again when models.mgm.log_structure_prior is replaced: a constant
    added to the collapsed structure prior changes no decision of the search and raises the ELBO by it."""
    X = np.random.default_rng(4).integers(0, 2, (24, 6))
    before = fit_mgm(X, 3, restarts=2, seed=0)
    original = mgm.log_structure_prior
    monkeypatch.setattr(mgm, "log_structure_prior", lambda *args: original(*args) + 100.0)
    after = fit_mgm(X, 3, restarts=2, seed=0)
    assert after.groups == before.groups
    assert float(after.elbo) - float(before.elbo) == pytest.approx(100.0, abs=1e-2)


def test_prototype_selection_refit_compiles_nothing():
    rng = np.random.default_rng(1)
    select_prototypes(rng.normal(size=(60, 4)), rng.integers(0, 3, 60), eps=1.0)
    with programs_compiled() as compiles:
        select_prototypes(rng.normal(size=(60, 4)), rng.integers(0, 3, 60), eps=1.5)
    assert compiles == []


SINGLE_OPERATIONS = {"convert_element_type", "iota", "add", "multiply", "less", "lgamma", "broadcast_in_dim", "gather",
                     "dynamic_slice", "squeeze", "select_n", "_broadcast_arrays"}  # fmt: skip
"""Programs that JAX compiles for one operation run outside ``jit`` (the ones a fit used to compile)."""


def test_a_first_fit_compiles_no_program_of_a_single_operation(caplog):
    """Every operation of a fit runs inside a compiled program of the package (or on the host in NumPy):
    one run op by op compiles a program per operation, tens per fit in a new process. Shapes no other
    test uses, so that every program of these fits is compiled here."""
    rng = np.random.default_rng(2)
    X = rng.integers(0, 2, (37, 5))
    jax.config.update("jax_log_compiles", True)
    try:
        with caplog.at_level("WARNING", logger="jax"):
            brl_fit = fit_brl(X, X[:, 0] ^ X[:, 3], num_samples=8, num_warmup=8, num_chains=3, n_temperatures=2, seed=0,
                              max_length=7)
            brl_fit.predict_proba(X)
            # what a retuning that changes the number of rungs runs
            tempering.resized_ladder(brl_fit.run.ladder, brl_fit.run.schedule, np.linspace(0.0, 1.0, 3))
            fit_bcm(rng.integers(0, 3, (13, 7)), 3, num_samples=4, num_warmup=4, num_chains=3, n_temperatures=2,
                    n_values=3).explain()
    finally:
        jax.config.update("jax_log_compiles", False)
    names = [message.split("jit(", 1)[1].split(")", 1)[0] for message in caplog.messages if message.startswith("Compiling jit(")]
    assert names, "no compile was logged: the check could not fail"
    assert not SINGLE_OPERATIONS & set(names), names


def _cross_validation_estimators():
    from interpretable_zoo.inference.bcm import BCMClusterer
    from interpretable_zoo.inference.brl import BayesianRuleListClassifier
    from interpretable_zoo.inference.mgm import MGMClusterer
    from interpretable_zoo.inference.prototype_selection import PrototypeClassifier

    rng = np.random.default_rng(5)
    binary = rng.integers(0, 2, (103, 6))
    labels = binary[:, 0] ^ (rng.random(103) < 0.2)
    return {
        "brl": (BayesianRuleListClassifier(num_samples=50, num_warmup=10, num_chains=2, n_temperatures=1,
                                           progress_bar=False), binary, labels),
        "brl-post": (BayesianRuleListClassifier(num_samples=50, num_warmup=10, num_chains=2, n_temperatures=1,
                                                estimate="post", progress_bar=False), binary, labels),
        "mgm": (MGMClusterer(n_clusters=3, restarts=2), binary, labels),
        "bcm": (BCMClusterer(3, num_samples=30, num_warmup=10, num_chains=2, n_temperatures=1, progress_bar=False),
                binary, labels),
        "prototypes": (PrototypeClassifier(cv=3), rng.normal(size=(103, 4)), rng.integers(0, 3, 103)),
    }


@pytest.mark.parametrize("name", ["brl", "brl-post", "mgm", "bcm", "prototypes"])
def test_cross_validation_folds_after_the_first_compile_nothing(name):
    """5 folds of 103 rows train on 82 or 83 and predict 20 or 21: the fit and prediction programs pad
    both to shared size buckets. The control: predicting 10 times as many rows needs another program."""
    from sklearn.base import clone
    from sklearn.model_selection import KFold

    estimator, X, y = _cross_validation_estimators()[name]
    folds = list(KFold(5, shuffle=True, random_state=0).split(X))
    assert {len(train) for train, _ in folds} == {82, 83}
    first_train, first_test = folds[0]
    clone(estimator).fit(X[first_train], y[first_train]).predict(X[first_test])
    with programs_compiled() as compiles:
        for train, test in folds[1:]:
            fitted = clone(estimator).fit(X[train], y[train])
            fitted.predict(X[test])
    assert compiles == []
    if name != "prototypes":  # its prediction is a NumPy computation, which compiles nothing at any size
        with programs_compiled() as compiles:
            fitted.predict(np.tile(X, (10, 1)))
        assert compiles
