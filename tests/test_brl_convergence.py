"""BRL under the tempering engine: run-until-converged defaults, the tempering facts in the trace,
continuing a run, compiled programs reused across fits, and the empty rule list as an answer."""

import numpy as np
import pytest
from compile_events import programs_compiled

from interpretable_zoo.datasets.planted_rule_lists import planted_rule_lists
from interpretable_zoo.diagnostics import default_var_names, summary
from interpretable_zoo.inference.brl import BayesianRuleListClassifier, fit_brl
from interpretable_zoo.models import brl


@pytest.fixture(scope="module")
def planted():
    return planted_rule_lists(n_samples=400, n_features=5, priors=brl.Priors(alpha=0.5), seed=11)


@pytest.fixture(scope="module")
def converged(planted):
    return fit_brl(planted.X, planted.y, antecedents=planted.extras["antecedents"], max_length=6, seed=2,
                   max_seconds=120.0, progress_bar=False)


def test_default_fit_runs_until_the_label_free_summaries_agree(converged):
    assert converged.converged
    table = converged.diagnostics  # labelled as iz.diagnostics.summary labels the rows
    assert list(table.index) == default_var_names(converged) == ["log_posterior", "length",
                                                                               "mean_cardinality"]
    assert list(table.columns) == ["r_hat", "ess_bulk"]
    assert (table["r_hat"] <= 1.01).all() and (table["ess_bulk"] >= 400).all()
    # ArviZ, from the trace alone, agrees with the stopping rule
    table = summary(converged)
    assert (table["r_hat"] <= 1.01).all() and (table["ess_bulk"] >= 400).all()


def test_trace_carries_swap_acceptance_and_tempering_facts(converged):
    idata = converged.idata
    assert idata.sample_stats["swap_accept"].shape == idata.posterior["log_posterior"].shape
    np.testing.assert_array_equal(idata.sample_stats["lp"].values, idata.posterior["log_posterior"].values)
    attrs = idata.posterior.attrs
    assert attrs["inverse_temperatures"][0] == 0.0 and attrs["inverse_temperatures"][-1] == 1.0
    assert attrs["converged"] == 1 and attrs["communication_barrier"] >= 0
    assert attrs["tempering_reference"] == (  # max_length=6
        "list lengths Poisson(3) truncated to 0..6, rules drawn without replacement by the learned rule weights "
        "averaged over the chains"
    )
    assert np.isfinite(converged.log_evidence) and 0 < converged.log_evidence_se < 1.0


def test_log_evidence_matches_a_second_seed(planted, converged):
    """The stepping-stone estimate of log p(y | x) is a property of the model, not of the run."""
    other = fit_brl(planted.X, planted.y, antecedents=planted.extras["antecedents"], max_length=6, seed=9,
                    max_seconds=120.0, progress_bar=False)
    gap = abs(other.log_evidence - converged.log_evidence)
    assert gap < 4 * np.hypot(other.log_evidence_se, converged.log_evidence_se), (gap, other.log_evidence_se)


def test_extend_continues_without_compiling(converged):
    with programs_compiled() as compiles:
        longer = converged.extend(num_samples=512, progress_bar=False)
    assert compiles == []
    assert longer.run.n_scans == converged.run.n_scans + 512
    assert longer.idata.posterior_sites["rules"].shape[1] == 512
    np.testing.assert_array_equal(longer.run.schedule, converged.run.schedule)


def test_refit_of_the_same_shapes_compiles_nothing(planted):
    """Other labels, priors and seed, same shapes: fitting and predicting reuse the compiled programs."""
    options = dict(antecedents=planted.extras["antecedents"], max_length=6, num_samples=300, num_warmup=100,
                   n_temperatures=4, progress_bar=False)
    fit_brl(planted.X, planted.y, seed=0, **options).predict(planted.X)
    with programs_compiled() as compiles:
        flipped = 1 - np.asarray(planted.y)
        result = fit_brl(planted.X, flipped, seed=5, priors=brl.Priors(lam=5.0, eta=2.0, alpha=0.5), **options)
        result.predict(planted.X)
    assert compiles == []


def test_an_empty_rule_list_predicts_the_default_rule():
    """Labels independent of the features and a prior favouring short lists: the point estimate is the
    empty list, a legitimate answer; predict, score and explain give the default rule's probabilities."""
    X = np.tile(np.eye(3, dtype=int), (10, 1))
    y = (np.arange(30) // 3) % 3  # 12, 9 and 9 of the classes, each spread evenly over the rows of X
    classifier = BayesianRuleListClassifier(num_samples=300, num_warmup=100, num_chains=2, progress_bar=False,
                                            priors=brl.Priors(lam=0.05)).fit(X, y)
    result = classifier.result_
    assert result.point_list() == ()
    assert result.rule_counts(()).tolist() == [[12, 9, 9]]
    np.testing.assert_allclose(classifier.predict_proba(X), np.tile([13 / 33, 10 / 33, 10 / 33], (30, 1)))
    assert (classifier.predict(X) == 0).all() and classifier.score(X, y) == 0.4
    assert classifier.explain().startswith("y=0 probability")
