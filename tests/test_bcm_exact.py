"""BCM collapsed Gibbs: exact against enumeration (whole sweeps, and the whole-observation re-split move alone,
tempered, with negative controls, also under an uneven Dirichlet for pi), log prior and log likelihood equal to the NumPyro densities,
replicas batched exactly, big counts; on observations padded with inert rows, the same target (enumeration,
the log terms of the unpadded state), with negative controls."""

import functools
import itertools
from unittest import mock
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from jax import enable_x64
from numpyro.infer.util import log_density

from interpretable_zoo.diagnostics.exact import enumerate_posterior, exact_gof_test, state_index
from interpretable_zoo.inference import bcm_gibbs
from interpretable_zoo.inference.bcm_gibbs import (
    BCMGibbs,
    _row_resplit_block,
    init,
    make_target,
    state_from_params,
    step,
    token_counts,
)
from interpretable_zoo.inference.mcmc import run_mcmc
from interpretable_zoo.models import bcm

X_TINY = np.array([[0, 1], [0, 0], [1, 1]])  # N = 3, P = 2, binary
N_CLUSTERS = 2
OTHER_PRIORS = bcm.Priors(alpha=1.0, lam=0.5, c=5.0, q=0.3)
BETAS = jnp.array([1.0, 0.8, 0.6, 0.4, 0.3, 0.2, 0.1, 0.0])  # a batch of 8 replicas, the size every test shares


def all_states(n_obs, n_features, n_clusters):
    """Every (omega, prototype, z) of a tiny problem, stacked: 2^(S P) * N^S * S^(N P) states."""
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
    for i in range(states["z"].shape[1]):
        stats[f"prototype_is_{i}"] = (states["prototype"] == i).any(1).astype(float)
    return stats


def site_log_terms(x, n_clusters, priors, params):
    """(log prior, log likelihood) of one state, read off the sites of ``collapsed_model``: the sites
    omega, prototype and z, and the site x."""
    log_joint, trace = log_density(bcm.collapsed_model, (x, n_clusters), {"priors": priors}, params)
    log_likelihood = trace["x"]["fn"].log_prob(trace["x"]["value"])
    return log_joint - log_likelihood, log_likelihood


@functools.cache
def enumerated_log_terms(priors, x, shape, n_clusters):
    """Every state of the tiny problem (``x`` as int64 bytes of ``shape``) and its log prior and log
    likelihood (float64), cached: every temperature is a weighting of the same two arrays."""
    x = np.frombuffer(x, np.int64).reshape(shape)
    states = all_states(*shape, n_clusters)
    with enable_x64():
        terms = jax.jit(jax.vmap(partial(site_log_terms, x, n_clusters, priors)))({k: jnp.asarray(v) for k, v in states.items()})
    return states, np.asarray(terms[0]), np.asarray(terms[1])


def exact_probabilities(priors, x=X_TINY, n_clusters=N_CLUSTERS, beta=1.0):
    """States and exact probabilities of the tempered target p(prior) p(x | ...)^beta (beta = 1: the
    posterior) by enumeration."""
    x = np.asarray(x, np.int64)
    states, log_prior, log_likelihood = enumerated_log_terms(priors, x.tobytes(), x.shape, n_clusters)
    log_target = log_prior + beta * log_likelihood
    return states, enumerate_posterior(lambda index: log_target[index], list(range(len(log_target))), method="loop")


jit_step = jax.jit(step, static_argnums=0)


@partial(jax.jit, static_argnums=0)
def jit_init(static, data, keys):
    """A prior draw per key."""
    return jax.vmap(lambda key: init(static, data, key))(keys)


@partial(jax.jit, static_argnums=0)
def jit_states_from_params(static, data, params):
    """Replica states (counts and log terms computed) of stacked params."""
    return jax.vmap(lambda p: state_from_params(static, data, p["omega"], p["prototype"], p["z"]))(params)


def run_chains(static, data, key, betas, num_warmup, num_samples):
    """One chain per entry of ``betas`` (8, the batch size every test here shares, so that one program
    serves them all) from prior draws; the params of the kept sweeps, (chain, draw, ...)."""
    key_init, key_run = jax.random.split(key)
    states = jit_init(static, data, jax.random.split(key_init, len(betas)))
    draws = []
    for i, key in enumerate(jax.random.split(key_run, num_warmup + num_samples)):
        states, _ = jit_step(static, data, states, jax.random.split(key, len(betas)), betas)
        if i >= num_warmup:
            draws.append((states.omega, states.prototype, states.z))
    omega, prototype, z = (np.stack(values, 1) for values in zip(*jax.device_get(draws)))
    return {"omega": omega, "prototype": prototype, "z": z}


def gof_of_draws(draws, states, probs):
    indices = state_index(draws, states)
    return exact_gof_test(indices, probs, statistics=label_free_statistics(states))


def gof_of_chains(exact_priors, sampler_priors, seed=0):
    """8 chains of :func:`step` on X_TINY (beta = 1) against the enumerated posterior of ``exact_priors``."""
    states, probs = exact_probabilities(exact_priors)
    static, data = make_target(X_TINY, N_CLUSTERS, sampler_priors)
    draws = run_chains(static, data, jax.random.PRNGKey(seed), jnp.ones(8), 200, 2000)
    return gof_of_draws(draws, states, probs)


def test_enumeration_has_the_expected_number_of_states():
    states = all_states(*X_TINY.shape, N_CLUSTERS)
    assert len(states["z"]) == 9216


@pytest.mark.parametrize("priors", [bcm.Priors(), OTHER_PRIORS], ids=["paper_priors", "other_priors"])
def test_sampler_matches_the_enumerated_posterior(priors):
    result = gof_of_chains(priors, priors)
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
    result = gof_of_chains(exact_priors, wrong_priors)
    assert not result.passed(alpha=1e-3), result


PADDED_ROWS = 5
"""X_TINY's 3 observations padded with 2 inert rows."""


@pytest.mark.parametrize("control", [None, "padding_counted", "padding_as_prototypes"])
def test_padded_sampler_matches_the_enumerated_posterior(control):
    """The sampler on X_TINY padded with inert rows draws the unpadded posterior over the observations, and
    the padding rows' z never moves. Negative controls: padding rows counted as observations (in the
    counts, moved) must fail the same check; padding rows allowed as prototypes give draws that match no
    state of the observations."""
    states, probs = exact_probabilities(OTHER_PRIORS)
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, padded_rows=PADDED_ROWS)
    if control == "padding_counted":
        data = data._replace(observed=jnp.ones(PADDED_ROWS, bool))
    elif control == "padding_as_prototypes":
        data = data._replace(prototype_log_prob=jnp.full_like(data.prototype_log_prob, -np.log(PADDED_ROWS)))
    draws = run_chains(static, data, jax.random.PRNGKey(0), jnp.ones(8), 200, 2000)
    n_obs = len(X_TINY)
    if control is None:
        assert np.all(draws["z"][:, :, n_obs:] == draws["z"][:, :1, n_obs:])
    observations = {**draws, "z": draws["z"][:, :, :n_obs]}
    if control == "padding_as_prototypes":
        with pytest.raises(ValueError, match="match no enumerated state"):
            gof_of_draws(observations, states, probs)
        return
    result = gof_of_draws(observations, states, probs)
    assert result.passed(alpha=1e-3) == (control is None), result


def test_numpyro_kernel_matches_the_enumerated_posterior():
    """:class:`BCMGibbs` run through NumPyro's MCMC (the path of ``fit_bcm``)."""
    states, probs = exact_probabilities(OTHER_PRIORS)
    mcmc = run_mcmc(
        BCMGibbs(), num_warmup=200, num_samples=2000, num_chains=8, seed=1, model_args=(X_TINY, N_CLUSTERS),
        model_kwargs={"priors": OTHER_PRIORS}, progress_bar=False,
    )
    draws = mcmc.get_samples(group_by_chain=True)
    result = gof_of_draws({k: np.asarray(v) for k, v in draws.items()}, states, probs)
    assert result.passed(alpha=1e-3), result


def exact_draws(states, probs, num_draws, key):
    """``num_draws`` states drawn i.i.d. from the enumerated probabilities, as int32 params."""
    start = np.asarray(jax.random.choice(key, len(probs), (num_draws,), p=jnp.asarray(probs)))
    return {name: jnp.asarray(value[start], jnp.int32) for name, value in states.items()}


X_WIDE = np.array([[0, 1, 1, 0], [1, 1, 0, 1]])  # N = 2, P = 4: an observation's split can hold 0 to 4 tokens
X_MIXED_VALUES = np.array([[0, 2], [1, 2]])  # V_j = 2 and 3, for S = 3 clusters


def with_padding_rows(params, padded_rows: int, n_clusters: int, key):
    """``params`` with z extended to ``padded_rows`` rows by random clusters, which a padded target ignores."""
    z = np.asarray(params["z"])
    extra = np.asarray(jax.random.randint(key, (len(z), padded_rows - z.shape[1], z.shape[2]), 0, n_clusters))
    return {**params, "z": np.concatenate([z, extra.astype(z.dtype)], 1)}


def row_resplit_of_exact_draws(exact_priors, move_data=None, x=X_TINY, n_clusters=N_CLUSTERS, beta=1.0,
                               proposal_ratio=True, seed=0, padded_rows=None):
    """Draw states i.i.d. from the enumerated (tempered) target, apply one re-split move per observation to
    each (with ``move_data``, default the target's; without the proposal's ratio when ``proposal_ratio`` is
    False; on the observations padded to ``padded_rows`` rows of random clusters, which must not move), and
    test the moved states against the same target: an exact move leaves it invariant."""
    states, probs = exact_probabilities(exact_priors, x, n_clusters, beta)
    key_draw, key_move = jax.random.split(jax.random.PRNGKey(seed))
    params = exact_draws(states, probs, 40000, key_draw)
    static, data = make_target(x, n_clusters, exact_priors, padded_rows=padded_rows)
    betas = jnp.full(40000, beta)
    n_obs = len(x)
    params = with_padding_rows(params, static.n_obs, n_clusters, key_draw)

    def resplit(keys, params):
        row_counts, cell_counts = jax.vmap(lambda z: token_counts(static, data, z))(params["z"])
        return _row_resplit_block(static, data if move_data is None else move_data, keys, betas, params["omega"],
                                  params["prototype"], params["z"], row_counts, cell_counts)[0]

    with mock.patch.object(bcm_gibbs, "_log_split_proposal", bcm_gibbs._log_split_proposal if proposal_ratio
                           else lambda log_ratio, in_pair, n_b, n_pair: jnp.zeros(n_b.shape)):
        moved = np.asarray(jax.jit(resplit)(jax.random.split(key_move, 40000), params))
    np.testing.assert_array_equal(moved[:, n_obs:], params["z"][:, n_obs:])  # padding rows never move
    moved, params = moved[:, :n_obs], {**params, "z": params["z"][:, :n_obs]}
    assert np.mean(np.any(moved != np.asarray(params["z"]), axis=(1, 2))) > 0.05  # the move does move
    indices = state_index({**{k: np.asarray(v) for k, v in params.items()}, "z": moved}, states).reshape(8, -1)
    return exact_gof_test(indices, probs, statistics=label_free_statistics(states))


@pytest.mark.parametrize(
    "x, n_clusters, priors, beta",
    [
        (X_TINY, N_CLUSTERS, OTHER_PRIORS, 1.0),
        (X_WIDE, N_CLUSTERS, bcm.Priors(alpha=0.1, lam=0.5, c=5.0, q=0.3), 1.0),
        (X_WIDE, N_CLUSTERS, OTHER_PRIORS, 0.3),
        (X_MIXED_VALUES, 3, bcm.Priors(), 1.0),
    ],
    ids=["tiny", "wide_small_alpha", "wide_tempered", "mixed_values_S3_paper_priors"],
)
def test_observation_resplit_keeps_the_target_invariant(x, n_clusters, priors, beta):
    result = row_resplit_of_exact_draws(priors, x=x, n_clusters=n_clusters, beta=beta)
    assert result.passed(alpha=1e-3), result


@pytest.mark.parametrize(
    "x, n_clusters, priors, beta",
    [(X_TINY, N_CLUSTERS, OTHER_PRIORS, 1.0), (X_MIXED_VALUES, 3, bcm.Priors(), 0.3)],
    ids=["tiny", "mixed_values_S3_tempered"],
)
def test_observation_resplit_on_padded_observations_keeps_the_target_invariant(x, n_clusters, priors, beta):
    """The move on the observations padded with 2 rows of random clusters: the padding never moves and
    the observations' target stays invariant."""
    result = row_resplit_of_exact_draws(priors, x=x, n_clusters=n_clusters, beta=beta, padded_rows=len(x) + 2)
    assert result.passed(alpha=1e-3), result


@pytest.mark.parametrize("control", ["no_proposal_ratio", "alpha_over_S_twice"])
def test_observation_resplit_negative_controls_fail(control):
    """Without the proposal's ratio f(m) / f(m'), or built from the reference code's prior (alpha divided by
    S twice), the move must not pass."""
    priors = bcm.Priors(alpha=0.5, lam=0.5, c=5.0, q=0.3)
    if control == "no_proposal_ratio":
        result = row_resplit_of_exact_draws(priors, x=X_WIDE, proposal_ratio=False)
    else:
        wrong = bcm.Priors(alpha=priors.alpha / N_CLUSTERS, lam=0.5, c=5.0, q=0.3)
        result = row_resplit_of_exact_draws(priors, make_target(X_WIDE, N_CLUSTERS, wrong)[1], x=X_WIDE)
    assert not result.passed(alpha=1e-3), result


def uneven_z_concentration(priors, n_clusters):
    """A Dirichlet for pi favouring the second cluster: alpha * [1, 2] / 3."""
    return priors.alpha * np.array([1.0, 2.0]) / 3.0


@pytest.mark.parametrize("old_ratio", [False, True], ids=["exact", "old_ratio_must_fail"])
def test_resplit_move_under_an_uneven_dirichlet_for_pi(monkeypatch, old_ratio):
    """With uneven concentrations, the row's term of p(z) (pi integrated out) depends on which of the two
    clusters holds the tokens: the move must include it. The old ratio (row term unchanged) is the move built
    with even concentrations of the same total, which must fail."""
    monkeypatch.setattr(bcm, "z_concentration", uneven_z_concentration)
    priors = bcm.Priors(alpha=0.6, lam=0.5, c=5.0, q=0.3)
    enumerated_log_terms.cache_clear()
    try:
        move_data = None
        if old_ratio:
            data = make_target(X_TINY, N_CLUSTERS, priors)[1]
            move_data = data._replace(pi_concentration=jnp.full(N_CLUSTERS, priors.alpha / N_CLUSTERS))
        result = row_resplit_of_exact_draws(priors, move_data)
    finally:
        enumerated_log_terms.cache_clear()
    assert result.passed(alpha=1e-3) != old_ratio, result


def random_states(static, key, num):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "omega": jax.random.bernoulli(k1, 0.5, (num, static.n_clusters, static.n_features)).astype(jnp.int32),
        "prototype": jax.random.randint(k2, (num, static.n_clusters), 0, static.n_obs),
        "z": jax.random.randint(k3, (num, static.n_obs, static.n_features), 0, static.n_clusters),
    }


def omega_varying_with_the_feature(priors, n_clusters, n_features):
    """An edited prior: omega_sj ~ Bernoulli(q ** (1 + j))."""
    return dist.Bernoulli(probs=priors.q ** (1.0 + jnp.arange(n_features))).expand([n_clusters, n_features])


def prototype_favouring_early_observations(priors, n_obs, n_clusters):
    """An edited prior: p(p_s = i) proportional to exp(-i / 2)."""
    return dist.Categorical(logits=-0.5 * jnp.arange(n_obs)).expand([n_clusters])


@pytest.mark.parametrize("edited", [False, True], ids=["model_priors", "edited_priors"])
@pytest.mark.parametrize("priors", [bcm.Priors(), OTHER_PRIORS], ids=["paper_priors", "other_priors"])
def test_log_prior_and_log_likelihood_equal_the_model_densities(monkeypatch, priors, edited):
    """log_prior equals the log density of the sites omega, prototype and z of ``collapsed_model`` and
    log_likelihood that of x (so their sum is ``log_density``), at random states; also after an edit of
    the prior hooks of the model file, which the kernel follows."""
    if edited:
        monkeypatch.setattr(bcm, "omega_distribution", omega_varying_with_the_feature)
        monkeypatch.setattr(bcm, "prototype_distribution", prototype_favouring_early_observations)
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.integers(0, 2, 9), rng.integers(0, 4, 9), rng.integers(0, 3, 9)])  # V_j = 2, 4, 3
    n_values = np.array([2, 4, 3])
    args, kwargs = (x, 3), {"priors": priors, "n_values": n_values}
    with enable_x64():
        static, data = make_target(x, 3, priors, n_values)
        states = jit_states_from_params(static, data, random_states(static, jax.random.PRNGKey(0), 50))

        def site_densities(omega, prototype, z):
            log_joint, trace = log_density(bcm.collapsed_model, args, kwargs, {"omega": omega, "prototype": prototype, "z": z})
            return log_joint, trace["x"]["fn"].log_prob(trace["x"]["value"])

        log_joint, log_likelihood = jax.jit(jax.vmap(site_densities))(states.omega, states.prototype, states.z)
    np.testing.assert_allclose(states.log_likelihood, log_likelihood, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(states.log_prior, log_joint - log_likelihood, rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("padded_rows", [None, PADDED_ROWS], ids=["unpadded", "padded"])
def test_step_reports_what_its_moves_did(padded_rows):
    """The info of a step, per replica: the share of the 3 observations whose tokens the re-split move
    moved (of the observations alone on a padded target), and whether the split-merge move was accepted
    (0 or 1, NaN on the sweeps that do not run it); over 40 sweeps of 8 replicas, each sometimes and not
    always."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, padded_rows=padded_rows)
    states = jit_init(static, data, jax.random.split(jax.random.PRNGKey(3), 8))
    resplits, split_merges = [], []
    for i in range(40):
        states, info = jit_step(static, data, states, jax.random.split(jax.random.PRNGKey(i), 8), BETAS)
        resplits.append(info.resplit_moved)
        split_merges.append(info.split_merge_accepted)
    resplits, split_merges = np.stack(resplits), np.stack(split_merges)
    assert resplits.shape == split_merges.shape == (40, 8)
    assert set(np.round(np.unique(resplits) * 3, 5)) == {0.0, 1.0, 2.0, 3.0}
    ran = ~np.isnan(split_merges)
    assert set(np.unique(split_merges[ran])) == {0.0, 1.0}
    due = np.arange(40) % bcm_gibbs.DEFAULT_SPLIT_MERGE_EVERY == 0  # every replica starts at sweep 0
    np.testing.assert_array_equal(ran, np.broadcast_to(due[:, None], ran.shape))


@pytest.mark.parametrize("edited", [False, True], ids=["model_priors", "edited_prototype_prior"])
def test_a_padded_state_has_the_terms_of_the_unpadded_one(monkeypatch, edited):
    """On observations padded with 3 rows of random clusters, a state's counts, log prior, log likelihood
    and pointwise log likelihood over the observations are those of the unpadded state, and the padding
    rows count nothing, weigh 0 and have prior probability 0 as prototypes; also under an edited prototype
    prior (logits by observation, which the padded target keeps)."""
    if edited:
        monkeypatch.setattr(bcm, "prototype_distribution", prototype_favouring_early_observations)
    rng = np.random.default_rng(4)
    x = np.column_stack([rng.integers(0, 2, 9), rng.integers(0, 4, 9), rng.integers(0, 3, 9)])
    n_values = np.array([2, 4, 3])
    with enable_x64():
        static, data = make_target(x, 3, OTHER_PRIORS, n_values)
        padded_static, padded_data = make_target(x, 3, OTHER_PRIORS, n_values, padded_rows=12)
        params = random_states(static, jax.random.PRNGKey(1), 50)
        states = jit_states_from_params(static, data, params)
        padded = jit_states_from_params(padded_static, padded_data,
                                        with_padding_rows(params, 12, 3, jax.random.PRNGKey(2)))
        pointwise = bcm_gibbs.pointwise_log_likelihood(static, data, states)
        padded_pointwise = bcm_gibbs.pointwise_log_likelihood(padded_static, padded_data, padded)
    np.testing.assert_array_equal(padded.row_counts[:, :9], states.row_counts)
    np.testing.assert_array_equal(padded.row_counts[:, 9:], 0)
    np.testing.assert_array_equal(padded.cell_counts, states.cell_counts)
    np.testing.assert_allclose(padded.log_prior, states.log_prior, rtol=1e-12)
    np.testing.assert_allclose(padded.log_likelihood, states.log_likelihood, rtol=1e-12)
    np.testing.assert_allclose(padded_pointwise[:, :9], pointwise, rtol=1e-6)
    np.testing.assert_array_equal(padded_pointwise[:, 9:], 0.0)
    np.testing.assert_allclose(padded_data.prototype_log_prob[:, :9], data.prototype_log_prob, rtol=1e-6)
    assert np.all(padded_data.prototype_log_prob[:, 9:] == -np.inf)


def test_tempered_sweeps_keep_counts_and_log_terms_current():
    """After sweeps at several temperatures (counts updated incrementally by every block), the counts and
    log terms are those of the state's z, omega and prototypes computed from scratch."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS)
    states = jit_init(static, data, jax.random.split(jax.random.PRNGKey(6), 8))
    for i in range(5):
        states, _ = jit_step(static, data, states, jax.random.split(jax.random.PRNGKey(i), 8), BETAS)
        params = {"omega": states.omega, "prototype": states.prototype, "z": states.z}
        fresh = jit_states_from_params(static, data, params)
        np.testing.assert_array_equal(states.row_counts, fresh.row_counts)
        np.testing.assert_array_equal(states.cell_counts, fresh.cell_counts)
        np.testing.assert_allclose(states.log_prior, fresh.log_prior, rtol=1e-6)
        np.testing.assert_allclose(states.log_likelihood, fresh.log_likelihood, rtol=1e-6)


@pytest.mark.parametrize("in_turn", [False, True], ids=["split_merge_batched", "split_merge_in_turn"])
@pytest.mark.parametrize("ours_sweeps, others_sweeps", [(0, 0), (0, 1), (1, 0)],
                         ids=["all with split-merge", "ours alone with it", "others alone with it"])
def test_each_replica_gets_the_same_draws_whatever_the_other_replicas(ours_sweeps, others_sweeps, in_turn):
    """The stacked count tables of a batch of replicas isolate them: a replica moved to another position
    in the batch, beside other states at other temperatures, gets exactly the same draws; also when its
    sweep runs the split-merge move and theirs does not, or the other way round, with the move run as one
    batch or replica by replica."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, split_merge_in_turn=in_turn)
    states = jit_init(static, data, jax.random.split(jax.random.PRNGKey(4), 8))
    others = jit_init(static, data, jax.random.split(jax.random.PRNGKey(7), 8))
    states, others = (group._replace(sweeps=jnp.full(8, sweeps, jnp.int32))
                      for group, sweeps in ((states, ours_sweeps), (others, others_sweeps)))
    keys = jax.random.split(jax.random.PRNGKey(5), 8)
    first, _ = jit_step(static, data, states, keys, BETAS)
    kept = np.arange(8) % 2 == 0  # replicas 0, 2, 4, 6 kept, the others replaced and all rolled by 3

    def mixed(ours, theirs):
        return jnp.roll(jnp.where(kept.reshape((8,) + (1,) * (ours.ndim - 1)), ours, theirs), 3, axis=0)

    second, _ = jit_step(
        static, data, jax.tree.map(mixed, states, others), mixed(keys, jax.random.split(jax.random.PRNGKey(8), 8)),
        mixed(BETAS, BETAS[::-1]),
    )
    for name in ("z", "omega", "prototype", "row_counts", "cell_counts", "log_prior", "log_likelihood", "sweeps"):
        np.testing.assert_array_equal(np.roll(getattr(second, name), -3, axis=0)[kept], getattr(first, name)[kept])


@pytest.mark.parametrize("power_table", [False, True], ids=["powers_computed", "power_table"])
def test_a_replica_at_beta_one_draws_the_same_in_an_untempered_batch(power_table):
    """A batch all at beta = 1 skips the power w ** beta of tempered eq. (1); a replica at beta = 1 gets the
    same draws there as beside replicas at other temperatures (split-merge sweeps included), whether the
    tempered sweep computes the powers or reads them from its table."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, power_table=power_table)
    states = jit_init(static, data, jax.random.split(jax.random.PRNGKey(9), 8))
    mixed_betas = jnp.tile(jnp.array([1.0, 0.5]), 4)
    for i in range(8):
        keys = jax.random.split(jax.random.PRNGKey(10 + i), 8)
        untempered, _ = jit_step(static, data, states, keys, jnp.ones(8))
        mixed, _ = jit_step(static, data, states, keys, mixed_betas)
        for name in ("z", "omega", "prototype", "row_counts", "cell_counts", "log_prior", "log_likelihood"):
            np.testing.assert_array_equal(getattr(mixed, name)[::2], getattr(untempered, name)[::2])
        states = untempered


def test_the_power_table_draws_what_the_computed_powers_draw():
    """The tempered z sweep's table of (g + n) ** beta and (sum_v g + n) ** -beta, on features of 2 and 3
    values (sums over each feature's own values), draws what w ** beta computed per token draws, at every
    beta of the batch, over 20 sweeps (the two round differently in the last bits, so a draw could differ
    where a uniform falls within rounding of a boundary; none does here)."""
    draws = []
    for power_table in (True, False):
        static, data = make_target(X_MIXED_VALUES, 3, OTHER_PRIORS, power_table=power_table)
        states = jit_init(static, data, jax.random.split(jax.random.PRNGKey(13), 8))
        zs = []
        for key in jax.random.split(jax.random.PRNGKey(14), 20):
            states, _ = jit_step(static, data, states, jax.random.split(key, 8), BETAS)
            zs.append(states.z)
        draws.append(np.stack(zs))
    assert np.any(draws[0][1:] != draws[0][:-1])  # z does move
    np.testing.assert_array_equal(draws[0], draws[1])


def test_the_tempered_power_is_the_weight_itself_at_beta_one():
    """The untempered z sweep uses w, the tempered one w ** beta: at beta = 1 the two must agree to the bit
    (exp(log w) differs from w in the last bit for many w), or a replica at beta = 1 draws otherwise beside
    tempered replicas; below 1 it is the power."""
    w = jnp.asarray(np.random.default_rng(0).lognormal(0.0, 3.0, 10_000), jnp.float32)
    np.testing.assert_array_equal(bcm_gibbs.tempered_power(w, jnp.float32(1.0)), w)
    np.testing.assert_allclose(bcm_gibbs.tempered_power(w, jnp.float32(0.3)), np.asarray(w, np.float64) ** 0.3, rtol=1e-5)


def test_thousands_of_tokens_in_one_cell_stay_finite():
    x = np.zeros((2500, 2), int)
    x[::7, 1] = 1
    static, data = make_target(x, 2, n_values=np.array([2, 2]))
    params = {"omega": np.ones((1, 2, 2), int), "prototype": np.zeros((1, 2), int), "z": np.zeros((1, 2500, 2), int)}
    states = jit_states_from_params(static, data, params)
    for i in range(3):
        states, _ = jit_step(static, data, states, jax.random.split(jax.random.PRNGKey(i), 1), jnp.ones(1))
        assert np.isfinite(states.log_prior[0]) and np.isfinite(states.log_likelihood[0])
        assert np.all(np.isin(states.omega, [0, 1]))
    assert int(states.cell_counts.max()) > 1000
