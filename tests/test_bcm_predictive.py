"""BCM's predictive quantities: the log predictive density of observations (``BCMResult.score_samples``, the
estimator's ``score``) against enumeration, and the posterior predictive group of replicated data."""

import itertools
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from scipy.special import gammaln, logsumexp
from sklearn.model_selection import KFold, cross_val_score

from interpretable_zoo.inference.bcm import BCMClusterer, fit_bcm, left_to_right_log_likelihood
from interpretable_zoo.models import bcm
from tests.test_bcm_fit import QUICK, X_SMALL

PLANTED_PROTOTYPES = np.array([[0, 0, 0, 1, 1, 2], [1, 1, 2, 2, 0, 0], [2, 2, 1, 0, 2, 1]])
PER_GROUP = 20
PLANTED_FIT = {"num_warmup": 20, "num_samples": 60, "num_chains": 2, "n_temperatures": 2, "store_z": True}


def planted_data(seed: int = 0, noise: float = 0.1):
    """Three groups of 20 observations, each its prototype's 6 values with 10 % of the cells redrawn uniformly."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(3), PER_GROUP)
    X = PLANTED_PROTOTYPES[groups]
    return np.where(rng.random(X.shape) < noise, rng.integers(0, 3, X.shape), X), groups


X_PLANTED, GROUPS = planted_data()


@pytest.fixture(scope="module")
def small_fit():
    return fit_bcm(X_SMALL, 3, seed=5, store_z=True, **QUICK)


@pytest.fixture(scope="module")
def planted_fit():
    return fit_bcm(X_PLANTED, 3, seed=0, progress_bar=False, **PLANTED_FIT)


def exact_log_likelihood(token_log_likelihood, alpha_s) -> float:
    """log p(x) = log sum_z B(a + n(z)) / B(a) prod_j phi_{z_j, j}(x_j) over all S^P assignments z, from the
    (P, S) table log phi_s,j(x_j) and pi's concentration a (S,)."""
    n_features, n_clusters = token_log_likelihood.shape
    log_beta_a = gammaln(alpha_s).sum() - gammaln(alpha_s.sum())
    terms = []
    for z in itertools.product(range(n_clusters), repeat=n_features):
        counts = np.bincount(z, minlength=n_clusters)
        log_weight = gammaln(alpha_s + counts).sum() - gammaln(alpha_s.sum() + n_features) - log_beta_a
        terms.append(log_weight + token_log_likelihood[np.arange(n_features), z].sum())
    return float(logsumexp(terms))


def fixed_pi_log_likelihood(token_log_likelihood, alpha_s) -> float:
    """The negative control: pi fixed at its prior mean a / sum(a) instead of integrated out."""
    return float(np.log(np.exp(token_log_likelihood) @ (alpha_s / alpha_s.sum())).sum())


@pytest.mark.parametrize("alpha_s", [(0.3, 0.1, 0.6), (0.01 / 3,) * 3])
@pytest.mark.parametrize("num_particles", [1, 3])
def test_left_to_right_score_is_unbiased_against_enumeration(alpha_s, num_particles):
    """20000 independent estimates of p(x) for one observation (P = 4, S = 3) average to the exact value within
    4 standard errors; pi fixed at its prior mean is more than 10 away. With few particles any bias shows: the
    product of per-token averages without the resampling step is 14 % too high at R = 2 here (about 40 SE)."""
    alpha_s = np.asarray(alpha_s)
    token_log_likelihood = np.log(np.random.default_rng(1).dirichlet(np.full(3, 0.5), size=4))  # (P, S)
    exact = exact_log_likelihood(token_log_likelihood, alpha_s)
    n_estimates = 20000
    tables = jnp.broadcast_to(jnp.asarray(token_log_likelihood, jnp.float32), (n_estimates, 4, 3))
    keys = jax.random.split(jax.random.PRNGKey(0), n_estimates)
    ratios = np.exp(np.asarray(left_to_right_log_likelihood(keys, tables, alpha_s, num_particles), np.float64) - exact)
    standard_error = ratios.std() / np.sqrt(n_estimates)
    assert standard_error < 0.01
    assert abs(ratios.mean() - 1.0) < 4 * standard_error
    control = np.exp(fixed_pi_log_likelihood(token_log_likelihood, alpha_s) - exact)
    assert abs(ratios.mean() - control) > 10 * standard_error


def final_state_token_log_likelihood(result, codes, with_counts: bool = True):
    """(M, P, S) log phi_s,j(x_mj), phi the posterior mean given the best chain's last state, its cell counts
    taken from that state's z (without them, the prior's g alone: a wrong phi)."""
    state = jax.tree.map(lambda a: np.asarray(a)[result.best_chain], result._final)
    data = result.data
    n_features = data.codes.shape[1]
    table = np.asarray(bcm.concentration_table(data.codes[state.prototype], state.omega, data.n_values, result.priors))
    if with_counts:
        np.add.at(table, (state.z, np.arange(n_features), data.codes), 1.0)
    phi = table / table.sum(-1, keepdims=True)
    return np.log(phi.transpose(1, 2, 0)[np.arange(n_features), codes])


def test_score_samples_of_a_fit_is_the_enumerated_log_predictive_density(small_fit):
    """Per row of a 12 x 5 fit (S = 3, 243 assignments): with 4096 particles the estimate lies within 0.02 of the
    exact log p(x) given the best chain's last state; phi without the state's counts misses by more."""
    alpha_s = np.asarray(bcm.z_concentration(small_fit.priors, 3))
    tables = final_state_token_log_likelihood(small_fit, X_SMALL)
    exact = np.array([exact_log_likelihood(table, alpha_s) for table in tables])
    scores = small_fit.score_samples(X_SMALL, num_particles=4096)
    assert scores.shape == (12,) and scores.dtype == np.float64
    np.testing.assert_allclose(scores, exact, atol=0.02)
    wrong_phi = final_state_token_log_likelihood(small_fit, X_SMALL, with_counts=False)
    control = np.array([exact_log_likelihood(table, alpha_s) for table in wrong_phi])
    assert np.abs(scores - control).max() > 0.2
    # a row's score depends neither on the other rows nor on their order; the seed draws it
    default = small_fit.score_samples(X_SMALL)
    np.testing.assert_allclose(small_fit.score_samples(X_SMALL[::-1]), default[::-1], rtol=1e-6)
    np.testing.assert_allclose(small_fit.score_samples(X_SMALL[[3, 3]]), default[[3, 3]], rtol=1e-6)
    assert not np.allclose(small_fit.score_samples(X_SMALL, seed=1), default)
    np.testing.assert_allclose(default, exact, atol=0.1)


@pytest.mark.parametrize(
    "X, options, name",
    [
        (np.array([[0, 1, 2]]), {}, "X"),
        (np.array([[0, 5, 0, 0, 0]]), {}, "X"),
        (X_SMALL, {"seed": -1}, "seed"),
        (X_SMALL, {"num_particles": 0}, "num_particles"),
        (X_SMALL, {"num_particles": 2.5}, "num_particles"),
    ],
)
def test_score_samples_bad_arguments_name_the_argument(small_fit, X, options, name):
    with pytest.raises(ValueError, match=name):
        small_fit.score_samples(X, **options)


def test_score_of_planted_training_data_beats_shuffled_data(planted_fit):
    """Three well-separated planted groups: the training rows score far higher than rows whose columns were
    shuffled independently (the same values per feature, the groups' joint structure gone)."""
    rng = np.random.default_rng(1)
    shuffled = np.stack([rng.permutation(column) for column in X_PLANTED.T], axis=1)
    training, other = planted_fit.score_samples(X_PLANTED), planted_fit.score_samples(shuffled)
    assert np.all(np.isfinite(training)) and np.all(training < 0)
    assert training.mean() > other.mean() + 3.0


def test_clusterer_score_is_the_mean_score_and_serves_cross_validation():
    clusterer = BCMClusterer(3, num_warmup=10, num_samples=20, num_chains=2, n_temperatures=1, seed=0, progress_bar=False)
    scores = cross_val_score(clusterer, X_PLANTED, cv=KFold(3, shuffle=True, random_state=0))
    assert scores.shape == (3,) and np.all(np.isfinite(scores)) and np.all(scores < 0)
    clusterer.fit(X_PLANTED)
    np.testing.assert_allclose(clusterer.score(X_PLANTED), clusterer.score_samples(X_PLANTED).mean())
    np.testing.assert_array_equal(clusterer.score_samples(X_PLANTED), clusterer.result_.score_samples(X_PLANTED))
    with pytest.raises(ValueError, match="X has 5 features"):
        clusterer.score(X_PLANTED[:, :5])


def test_posterior_predictive_shapes_coords_and_seed(small_fit):
    idata = small_fit.add_posterior_predictive(seed=1)
    replicated = idata.posterior_predictive["x"]
    assert replicated.dims == ("chain", "draw", "observation", "feature") and replicated.shape == (2, 30, 12, 5)
    for dim in ("chain", "draw"):
        np.testing.assert_array_equal(replicated[dim], idata.posterior[dim])
    for dim in ("observation", "feature"):
        np.testing.assert_array_equal(replicated[dim], idata.observed_data[dim])
    values = replicated.values
    assert values.min() >= 0 and np.all(values.max((0, 1, 2)) < small_fit.data.n_values)
    assert np.any(values[..., 4] == 3)  # feature 4's fourth value, which the other features lack
    np.testing.assert_array_equal(small_fit.add_posterior_predictive(seed=1).posterior_predictive["x"], values)
    assert not np.array_equal(small_fit.add_posterior_predictive(seed=2).posterior_predictive["x"], values)
    with pytest.raises(ValueError, match="seed"):
        small_fit.add_posterior_predictive(seed=-1)


def test_posterior_predictive_needs_stored_z():
    without_z = fit_bcm(X_SMALL, 3, seed=5, **QUICK)
    with pytest.raises(ValueError, match="store_z"):
        without_z.add_posterior_predictive()


def group_frequencies(codes) -> np.ndarray:
    """(..., 3, P, 3): per planted group and feature, the share of its observations with each value."""
    onehot = np.asarray(codes)[..., None] == np.arange(3)
    return np.stack([onehot[..., GROUPS == g, :, :].mean(-3) for g in range(3)], axis=-3)


def predictive_discrepancy(result) -> float:
    """Mean absolute difference between the observed and the replicated (averaged over draws) per-group
    value frequencies."""
    replicated = result.add_posterior_predictive(seed=0).posterior_predictive["x"].values
    return float(np.abs(group_frequencies(replicated).mean((0, 1)) - group_frequencies(X_PLANTED)).mean())


def with_records(result, **changed):
    """``result`` with some of its draws' records replaced (a wrong ingredient of the predictive)."""
    return result._with_run(replace(result.run, records={**result.run.records, **changed}))


def test_posterior_predictive_reproduces_the_planted_groups(planted_fit):
    """Replicated data keep each planted group's value frequencies (within 0.05 on average; the prototype's
    extra weight c = 50 pulls them a little towards the prototype's values). Controls: pi from the row
    counts of another group's observations, or phi from the token assignments of other observations, miss by
    more than 0.1 (the prototype's weight still pulls such a phi towards the right values)."""
    assert predictive_discrepancy(planted_fit) < 0.05
    records = planted_fit.run.records
    assert predictive_discrepancy(with_records(planted_fit, row_counts=np.roll(records["row_counts"], PER_GROUP, 2))) > 0.1
    assert predictive_discrepancy(with_records(planted_fit, z=np.roll(records["z"], PER_GROUP, 2))) > 0.1


def test_posterior_predictive_uses_each_draws_hyperparameters():
    """With alpha, lam and c sampled, each draw's values enter: the fit's own draws reproduce the groups; the
    same draws with alpha = 1e4 (pi near uniform), or with lam = 1e4 and c = 0 (phi near uniform; either value
    alone leaves phi near the prototype's or the data's values), do not."""
    priors = bcm.Priors(alpha=dist.Gamma(1.0, 10.0), lam=dist.Gamma(4.0, 4.0), c=dist.Gamma(50.0, 1.0))
    result = fit_bcm(X_PLANTED, 3, priors=priors, seed=0, progress_bar=False, **PLANTED_FIT)
    assert predictive_discrepancy(result) < 0.05
    for changed in ({"alpha": 1e4}, {"lam": 1e4, "c": 0.0}):
        summaries = {**result.run.summaries, **{name: np.full_like(result.run.summaries[name], value)
                                                for name, value in changed.items()}}  # fmt: skip
        assert predictive_discrepancy(result._with_run(replace(result.run, summaries=summaries))) > 0.2
    assert np.all(np.isfinite(result.score_samples(X_PLANTED)))
