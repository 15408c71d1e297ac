"""Tests of diagnostics.exact: enumeration, state indexing and the autocorrelation-aware GOF test."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from interpretable_zoo.diagnostics.exact import (
    IMPOSSIBLE_PROB,
    enumerate_posterior,
    exact_gof_test,
    state_index,
)
from toy_models import (
    COMPONENT_MEANS,
    NUM_STATES,
    PRIOR_SCALE,
    TRUE_WEIGHTS,
    WRONG_WEIGHTS,
    collapsed_log_joint,
    exact_posterior_z,
    sample_posterior,
)

# Data with mean near 0: the likelihood is flat enough that the prior matters (true and wrong-prior
# posteriors differ by 0.09-0.18 per state) and every state has posterior mass >= 0.02.
OBSERVED_X = np.array([0.3, -0.4, 0.1, 0.2])
NUM_CHAINS, NUM_WARMUP, NUM_SAMPLES = 4, 300, 5000


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


@partial(jax.jit, static_argnames="num_chains")
def _toy_chains(rng_key, weights, num_chains):
    keys = jax.random.split(rng_key, num_chains)
    run_chain = partial(sample_posterior, num_warmup=NUM_WARMUP, num_samples=NUM_SAMPLES)
    return jax.vmap(run_chain, in_axes=(0, None, None))(keys, jnp.asarray(OBSERVED_X), jnp.asarray(weights))


def _sticky_chain(rng, probs, stay, num_chains, num_draws):
    """An exact Markov chain with stationary distribution ``probs``: stay with probability ``stay``, else
    redraw from ``probs``. Its integrated autocorrelation time is (1 + stay) / (1 - stay)."""
    chain = np.empty((num_chains, num_draws), dtype=int)
    chain[:, 0] = rng.choice(len(probs), size=num_chains, p=probs)
    fresh = rng.choice(len(probs), size=(num_chains, num_draws), p=probs)
    stays = rng.random((num_chains, num_draws)) < stay
    for t in range(1, num_draws):
        chain[:, t] = np.where(stays[:, t], chain[:, t - 1], fresh[:, t])
    return chain


# ---------------------------------------------------------------- enumerate_posterior


@pytest.mark.parametrize("weights", [TRUE_WEIGHTS, WRONG_WEIGHTS])
def test_enumerate_posterior_matches_closed_form(x64, weights):
    # NumPyro's MultivariateNormal density of the collapsed model vs the sufficient-statistic formula:
    # independent computations that agree up to a z-free constant, so the normalised posteriors agree
    # to float64 rounding.
    x = jnp.asarray(OBSERVED_X)
    probs = enumerate_posterior(lambda z: collapsed_log_joint(z, x, weights), np.arange(NUM_STATES))
    assert probs.dtype == np.float64
    np.testing.assert_allclose(probs, exact_posterior_z(OBSERVED_X, weights), rtol=0, atol=1e-10)


def test_enumerate_posterior_state_forms_and_loop_fallback_agree(x64):
    x = jnp.asarray(OBSERVED_X)
    expected = exact_posterior_z(OBSERVED_X)
    as_list = enumerate_posterior(lambda z: collapsed_log_joint(z, x), [0, 1, 2, 3])
    as_dict = enumerate_posterior(lambda state: collapsed_log_joint(state["z"], x), {"z": np.arange(4)})
    # a numpy/scipy log joint cannot be traced, so "auto" must fall back to one call per state
    marginal_scale = np.sqrt(PRIOR_SCALE**2 + 1 / len(OBSERVED_X))

    def untraceable_log_joint(z):
        return np.log(TRUE_WEIGHTS[int(z)]) + stats.norm.logpdf(
            OBSERVED_X.mean(), COMPONENT_MEANS[int(z)], marginal_scale
        )

    untraceable = enumerate_posterior(untraceable_log_joint, np.arange(4))
    for probs in (as_list, as_dict, untraceable):
        np.testing.assert_allclose(probs, expected, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="log_joint_fn: cannot be traced"):
        enumerate_posterior(lambda z: float(z), np.arange(4), method="vmap")


def test_enumerate_posterior_handles_zero_probability_states():
    probs = enumerate_posterior(lambda z: jnp.where(z == 1, -jnp.inf, 0.0), np.arange(3))
    np.testing.assert_array_equal(probs, [0.5, 0.0, 0.5])


@pytest.mark.parametrize(
    "log_joint_fn, states, message",
    [
        (lambda z: 0.0 * z, [], "states: the list of states is empty"),
        (lambda z: 0.0 * z, np.array([0, 1, 1]), "states: state 2 repeats state 1"),
        (lambda z: jnp.full(2, 0.0 * z), np.arange(3), "log_joint_fn: must return a scalar"),
        (lambda z: jnp.where(z == 1, jnp.nan, 0.0), np.arange(3), r"log_joint_fn: NaN or \+inf at states \[1\]"),
        (lambda z: -jnp.inf + 0.0 * z, np.arange(3), "log_joint_fn: -inf at every state"),
        (lambda z: 0.0, np.float64(1.0), "states: a stacked pytree needs a leading state axis"),
    ],
)
def test_enumerate_posterior_rejects_bad_input(log_joint_fn, states, message):
    with pytest.raises(ValueError, match=message):
        enumerate_posterior(log_joint_fn, states)


# ---------------------------------------------------------------- state_index


def test_state_index_maps_pytree_draws_and_ignores_extra_sites():
    states = [{"z": 0, "b": np.array([0, 1])}, {"z": 1, "b": np.array([1, 1])}, {"z": 1, "b": np.array([0, 0])}]
    draws = {
        "z": np.array([[1, 0], [1, 1]]),
        "b": np.array([[[0, 0], [0, 1]], [[1, 1], [0, 0]]]),
        "mu": np.zeros((2, 2)),  # a continuous site the states do not enumerate
    }
    np.testing.assert_array_equal(state_index(draws, states), [[2, 0], [1, 2]])


def test_state_index_names_an_unmatched_draw():
    with pytest.raises(ValueError, match=r"draws: 1 draws match no enumerated state; the first, at batch index \(1, 0\)"):
        state_index(np.array([[0, 1], [7, 2]]), np.arange(4))
    with pytest.raises(ValueError, match="draws: missing the state keys"):
        state_index({"mu": np.zeros(3)}, {"z": np.arange(4)})
    with pytest.raises(ValueError, match="does not end with the state shape"):
        state_index(np.zeros((5, 3)), np.zeros((4, 2)))


# ---------------------------------------------------------------- exact_gof_test on the toy's reference sampler


@pytest.fixture(scope="module")
def toy_draw_indices():
    """State indices of the reference sampler's draws on the true and on the wrong-prior model."""
    return {
        name: state_index(_toy_chains(jax.random.key(seed), weights, NUM_CHAINS), {"z": np.arange(NUM_STATES)})
        for name, weights, seed in [("true", TRUE_WEIGHTS, 0), ("wrong", WRONG_WEIGHTS, 1)]
    }


def test_gof_passes_reference_sampler_on_true_model(toy_draw_indices):
    result = exact_gof_test(toy_draw_indices["true"], exact_posterior_z(OBSERVED_X))
    # Under a correct sampler the overall p-value is (conservatively) uniform, so p < 1e-3 would be a
    # 1-in-1000 accident of the fixed seed; a sampler bias of 0.02 in any state probability (over 5
    # Monte Carlo standard errors, which are below 0.004 here) would fail.
    assert result.passed(alpha=1e-3), result
    assert result.num_draws == NUM_CHAINS * NUM_SAMPLES
    assert np.all(result.ess > 1000), result
    assert not result.excluded and not result.impossible_states


def test_gof_flags_wrong_prior_sampler(toy_draw_indices):
    result = exact_gof_test(toy_draw_indices["wrong"], exact_posterior_z(OBSERVED_X))
    # The wrong prior moves the state probabilities by 0.09-0.18, over 20 Monte Carlo standard errors
    # (below 0.004): p < 1e-6 holds for any seed.
    assert result.p_value < 1e-6, result
    assert np.max(np.abs(result.z)) > 20, result


def test_gof_custom_statistics_flag_wrong_prior(toy_draw_indices):
    statistics = {"z": np.arange(NUM_STATES), "z >= 2": np.array([0, 0, 1, 1])}
    exact = exact_posterior_z(OBSERVED_X)
    assert exact_gof_test(toy_draw_indices["true"], exact, statistics=statistics).passed(alpha=1e-3)
    wrong = exact_gof_test(toy_draw_indices["wrong"], exact, statistics=statistics)
    assert wrong.names == ("z", "z >= 2")
    assert wrong.p_value < 1e-6, wrong


# ---------------------------------------------------------------- autocorrelation correction and guards

STICKY_PROBS = np.array([0.1, 0.2, 0.3, 0.4])


def test_gof_accounts_for_autocorrelation_where_naive_chi_square_fails():
    # stay = 0.95: autocorrelation time 39, so 20000 draws carry about 500 effective draws. A chi-square
    # on raw counts treats them as 20000 independent draws: its statistic is inflated about 39-fold
    # (expected about 117 on 3 degrees of freedom, p near 1e-25), far below 1e-6 for any seed.
    draws = _sticky_chain(np.random.default_rng(0), STICKY_PROBS, stay=0.95, num_chains=4, num_draws=5000)
    counts = np.bincount(draws.ravel(), minlength=4)
    assert stats.chisquare(counts, STICKY_PROBS * draws.size).pvalue < 1e-6
    result = exact_gof_test(draws, STICKY_PROBS)
    assert result.passed(alpha=1e-3), result
    # the estimated ESS is near the theoretical 20000 / 39 = 513, not the raw count
    assert np.all((result.ess > 250) & (result.ess < 1000)), result
    # and the test keeps its power: the same chain against shifted probabilities is flagged
    assert exact_gof_test(draws, np.array([0.2, 0.2, 0.3, 0.3])).p_value < 1e-6


def test_gof_flags_impossible_states_loudly():
    draws = _sticky_chain(np.random.default_rng(1), STICKY_PROBS, stay=0.0, num_chains=2, num_draws=1000)
    exact = np.array([0.1, 0.2, 0.7, 0.0])
    with pytest.warns(UserWarning, match=r"visit states \[3\] whose exact probability is below"):
        result = exact_gof_test(draws, exact)
    assert result.impossible_states == (3,)
    assert result.p_value == 0.0 and not result.passed(alpha=1e-12)
    assert IMPOSSIBLE_PROB <= 1e-12


def test_gof_flags_never_visited_state():
    # iid draws that never visit state 0 (exact probability 0.1 over 2000 draws: 200 expected visits)
    rng = np.random.default_rng(2)
    draws = rng.choice([1, 2, 3], size=(2, 1000), p=[2 / 9, 3 / 9, 4 / 9])
    result = exact_gof_test(draws, STICKY_PROBS)
    assert result.p_value < 1e-6, result


def test_gof_excludes_rare_states_with_warning():
    probs = np.array([0.4999, 0.4999, 0.0002])
    rng = np.random.default_rng(3)
    draws = rng.choice(3, size=(2, 1000), p=probs)
    with pytest.warns(UserWarning, match=r"\['state 2'\] have effective counts below 5"):
        result = exact_gof_test(draws, probs)
    assert result.excluded == ("state 2",)
    assert result.passed(alpha=1e-3), result


def test_gof_refuses_too_few_effective_draws():
    draws = _sticky_chain(np.random.default_rng(4), STICKY_PROBS, stay=0.99, num_chains=2, num_draws=500)
    with pytest.raises(ValueError, match="draw_indices: ESS below min_ess=100"):
        exact_gof_test(draws, STICKY_PROBS)
    with pytest.raises(ValueError, match="draw_indices: every statistic is constant"):
        exact_gof_test(np.zeros((2, 500), dtype=int), STICKY_PROBS)


@pytest.mark.parametrize(
    "draw_indices, exact_probs, statistics, message",
    [
        (np.zeros(10, dtype=int), STICKY_PROBS, None, r"draw_indices: expected shape \(num_chains, num_draws\)"),
        (np.zeros((2, 10)), STICKY_PROBS, None, "draw_indices: expected integer state numbers"),
        (np.zeros((2, 3), dtype=int), STICKY_PROBS, None, "draw_indices: need at least 4 draws per chain"),
        (np.full((2, 10), 4), STICKY_PROBS, None, r"draw_indices: state numbers must lie in \[0, 4\)"),
        (np.zeros((2, 10), dtype=int), np.array([0.5, 0.6]), None, "exact_probs: must be finite, non-negative and sum to 1"),
        (np.zeros((2, 10), dtype=int), STICKY_PROBS, {"f": np.ones(3)}, r"statistics\['f'\]: expected shape \(4,\)"),
        (np.zeros((2, 10), dtype=int), np.full(101, 1 / 101), None, "statistics: required for more than 100 states"),
    ],
)
def test_gof_rejects_bad_input(draw_indices, exact_probs, statistics, message):
    with pytest.raises(ValueError, match=message):
        exact_gof_test(draw_indices, exact_probs, statistics=statistics)
