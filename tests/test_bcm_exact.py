"""BCM collapsed Gibbs: exact against enumeration (the whole sweep, and the whole-observation swap move
alone), log target equal to the NumPyro density, big counts."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import enable_x64
from numpyro.infer.util import log_density

from interpretable_zoo.diagnostics.exact import enumerate_posterior, exact_gof_test, state_index
from interpretable_zoo.inference.bcm_gibbs import (
    BCMGibbs,
    _counts,
    _row_swap_block,
    initial_state,
    problem_from_model_args,
    sweep,
    sweep_chains,
)
from interpretable_zoo.inference.mcmc import run_mcmc
from interpretable_zoo.models import bcm

X_TINY = np.array([[0, 1], [0, 0], [1, 1]])  # N = 3, P = 2, binary
N_CLUSTERS = 2
OTHER_PRIORS = bcm.Priors(alpha=1.0, lam=0.5, c=5.0, q=0.3)


def all_states(n_obs, n_features, n_clusters):
    """Every (omega, prototype, z) of the tiny problem, stacked: 2^(S P) * N^S * S^(N P) states."""
    omegas = np.array(list(itertools.product([0, 1], repeat=n_clusters * n_features))).reshape(-1, n_clusters, n_features)
    prototypes = np.array(list(itertools.product(range(n_obs), repeat=n_clusters)))
    zs = np.array(list(itertools.product(range(n_clusters), repeat=n_obs * n_features))).reshape(-1, n_obs, n_features)
    grid = np.array(list(itertools.product(range(len(omegas)), range(len(prototypes)), range(len(zs)))))
    return {"omega": omegas[grid[:, 0]], "prototype": prototypes[grid[:, 1]], "z": zs[grid[:, 2]]}


def label_free_statistics(states):
    """Co-assignment of every token pair, number of active omega, and whether each observation is a prototype."""
    z = states["z"].reshape(len(states["z"]), -1)
    stats = {
        f"same_cluster_{a}_{b}": (z[:, a] == z[:, b]).astype(float)
        for a, b in itertools.combinations(range(z.shape[1]), 2)
    }
    stats["active_omega"] = states["omega"].sum((1, 2)).astype(float)
    for i in range(X_TINY.shape[0]):
        stats[f"prototype_is_{i}"] = (states["prototype"] == i).any(1).astype(float)
    return stats


@functools.cache
def exact_probabilities(priors):
    states = all_states(*X_TINY.shape, N_CLUSTERS)
    with enable_x64():
        @jax.jit
        def log_joint(state):
            return log_density(bcm.collapsed_model, (X_TINY, N_CLUSTERS), {"priors": priors}, state)[0]

        probs = enumerate_posterior(log_joint, {k: jnp.asarray(v) for k, v in states.items()})
    return states, probs


def gof_of_sampler(exact_priors, sampler_priors, seed=0):
    states, probs = exact_probabilities(exact_priors)
    mcmc = run_mcmc(
        BCMGibbs(),
        num_warmup=200,
        num_samples=2000,
        num_chains=8,
        seed=seed,
        model_args=(X_TINY, N_CLUSTERS),
        model_kwargs={"priors": sampler_priors},
        progress_bar=False,
    )
    draws = mcmc.get_samples(group_by_chain=True)
    indices = state_index({k: np.asarray(v) for k, v in draws.items()}, states)
    return exact_gof_test(indices, probs, statistics=label_free_statistics(states))


def test_enumeration_has_the_expected_number_of_states():
    states = all_states(*X_TINY.shape, N_CLUSTERS)
    assert len(states["z"]) == 9216


@pytest.mark.parametrize("priors", [bcm.Priors(), OTHER_PRIORS], ids=["paper_priors", "other_priors"])
def test_sampler_matches_the_enumerated_posterior(priors):
    result = gof_of_sampler(priors, priors)
    assert result.passed(alpha=1e-3), result


@pytest.mark.parametrize(
    "exact_priors, wrong_priors",
    [
        # the reference code's defect: alpha divided by S twice
        (OTHER_PRIORS, bcm.Priors(alpha=OTHER_PRIORS.alpha / N_CLUSTERS, lam=0.5, c=5.0, q=0.3)),
        (bcm.Priors(), bcm.Priors(q=0.5)),
    ],
    ids=["alpha_over_S_twice", "wrong_q"],
)
def test_a_wrong_prior_fails_the_same_check(exact_priors, wrong_priors):
    result = gof_of_sampler(exact_priors, wrong_priors)
    assert not result.passed(alpha=1e-3), result


def row_swap_of_exact_draws(exact_priors, move_priors, num_draws=40000, seed=0):
    """Draw states i.i.d. from the enumerated posterior, apply one whole-observation swap move (built
    with ``move_priors``) to each, and test the moved states against the same posterior: an exact move
    leaves it invariant."""
    states, probs = exact_probabilities(exact_priors)
    key_draw, key_move = jax.random.split(jax.random.PRNGKey(seed))
    start = np.asarray(jax.random.choice(key_draw, len(probs), (num_draws,), p=jnp.asarray(probs)))
    params = {name: jnp.asarray(value[start], jnp.int32) for name, value in states.items()}
    problem = problem_from_model_args((X_TINY, N_CLUSTERS), {"priors": move_priors})

    def move(keys, params):  # every draw is a chain of its own
        row_counts, cell_counts = jax.vmap(lambda z: _counts(problem, z))(params["z"])
        return _row_swap_block(problem, keys, params, row_counts, cell_counts)[0]

    moved = jax.jit(move)(jax.random.split(key_move, num_draws), params)
    moved = {name: np.asarray(value) for name, value in moved.items()}
    assert np.mean(np.any(moved["z"] != np.asarray(params["z"]), axis=(1, 2))) > 0.05  # the move does move
    indices = state_index(moved, states).reshape(8, -1)
    return exact_gof_test(indices, probs, statistics=label_free_statistics(states))


@pytest.mark.parametrize(
    "exact_priors, move_priors",
    [(OTHER_PRIORS, OTHER_PRIORS), (OTHER_PRIORS, bcm.Priors(alpha=1.0, lam=0.5, c=50.0, q=0.3))],
    ids=["exact", "wrong_c_must_fail"],
)
def test_whole_observation_swap_keeps_the_posterior_invariant(exact_priors, move_priors):
    result = row_swap_of_exact_draws(exact_priors, move_priors)
    assert result.passed(alpha=1e-3) == (exact_priors == move_priors), result


def random_states(problem, key, num):
    n_obs, n_features = problem.shape
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "omega": jax.random.bernoulli(k1, 0.5, (num, problem.n_clusters, n_features)).astype(jnp.int32),
        "prototype": jax.random.randint(k2, (num, problem.n_clusters), 0, n_obs),
        "z": jax.random.randint(k3, (num, n_obs, n_features), 0, problem.n_clusters),
    }


@pytest.mark.parametrize("priors", [bcm.Priors(), OTHER_PRIORS], ids=["paper_priors", "other_priors"])
def test_kernel_log_target_differs_from_log_density_by_a_constant(priors):
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.integers(0, 2, 9), rng.integers(0, 4, 9), rng.integers(0, 3, 9)])  # V_j = 2, 4, 3
    n_values = np.array([2, 4, 3])
    args, kwargs = (x, 3), {"priors": priors, "n_values": n_values}
    problem = problem_from_model_args(args, kwargs)
    with enable_x64():
        states = random_states(problem, jax.random.PRNGKey(0), 50)
        # states built from scratch, and states reached by sweeps (counts updated incrementally)
        fresh = jax.jit(jax.vmap(lambda k, p: initial_state(problem, k, p)))(jax.random.split(jax.random.PRNGKey(1), 50), states)
        swept = jax.jit(jax.vmap(lambda s: jax.lax.fori_loop(0, 3, lambda i, t: sweep(problem, t), s)))(fresh)
        # the vectorized sweep (stacked count tables) gives every chain exactly its single-chain draws
        chained = jax.jit(lambda s: jax.lax.fori_loop(0, 3, lambda i, t: sweep_chains(problem, t), s))(fresh)
        for name in ("omega", "prototype", "z"):
            np.testing.assert_array_equal(chained.params[name], swept.params[name])
        density_of = jax.jit(jax.vmap(lambda p: log_density(bcm.collapsed_model, args, kwargs, p)[0]))
        for state in (fresh, swept):
            density = density_of(state.params)
            difference = np.asarray(density + state.potential_energy)
            assert np.ptp(difference) < 1e-8 * np.abs(difference).max() + 1e-9, difference
            _, cell_counts = jax.vmap(lambda z: _counts(problem, z))(state.params["z"])
            np.testing.assert_array_equal(state.cell_counts, cell_counts)
    assert not np.array_equal(swept.params["z"], fresh.params["z"])


def test_thousands_of_tokens_in_one_cell_stay_finite():
    x = np.zeros((2500, 2), int)
    x[::7, 1] = 1
    problem = problem_from_model_args((x, 2), {"n_values": np.array([2, 2])})
    state = initial_state(problem, jax.random.PRNGKey(0), {
        "omega": np.ones((2, 2), int), "prototype": np.zeros(2, int), "z": np.zeros((2500, 2), int)})
    step = jax.jit(lambda s: sweep(problem, s))
    for _ in range(3):
        state = step(state)
        assert np.isfinite(state.potential_energy)
        assert np.all(np.isin(state.params["omega"], [0, 1]))
    assert int(state.cell_counts.max()) > 1000
