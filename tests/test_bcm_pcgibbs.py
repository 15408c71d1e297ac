"""BCM partially collapsed Gibbs (phi explicit, pi integrated out): exact against enumeration at beta = 1 and
on its own tempered path at beta < 1 (negative controls: a wrong prior, the collapsed kernel's tempered path),
under the tempering engine, its re-split move alone (negative control: without the proposal's ratio), and its
log terms against the model's densities."""

from functools import partial
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats
from jax import enable_x64
from numpyro.infer.util import log_density
from test_bcm_exact import (
    N_CLUSTERS,
    OTHER_PRIORS,
    PADDED_ROWS,
    X_TINY,
    X_WIDE,
    enumerated_log_terms,
    exact_draws,
    exact_probabilities,
    gof_of_draws,
    label_free_statistics,
)

from interpretable_zoo.diagnostics.exact import enumerate_posterior, exact_gof_test, state_index
from interpretable_zoo.inference import bcm_gibbs, bcm_pcgibbs, convergence
from interpretable_zoo.inference.tempering import TargetKernel
from interpretable_zoo.models import bcm

N_CHAINS, N_WARMUP, N_DRAWS = 8, 200, 2000
TEMPERED_PRIORS = bcm.Priors(alpha=1.0, lam=0.1, c=5.0, q=0.3)
"""A small lambda: the two tempered paths differ most (by about 12 Monte Carlo errors at beta = 0.4)."""


@partial(jax.jit, static_argnums=(0, 4))
def sampled_params(static, data, key, betas, n_sweeps):
    """One chain per entry of ``betas`` from prior draws, ``n_sweeps`` sweeps in one scan; the params
    (omega, prototype, z) after every sweep, (chain, sweep, ...)."""
    key_init, key_run = jax.random.split(key)
    states = jax.vmap(lambda k: bcm_pcgibbs.init(static, data, k))(jax.random.split(key_init, len(betas)))

    def sweep(states, key):
        states, _ = bcm_pcgibbs.step(static, data, states, jax.random.split(key, len(betas)), betas)
        return states, (states.omega, states.prototype, states.z)

    _, params = jax.lax.scan(sweep, states, jax.random.split(key_run, n_sweeps))
    return {name: jnp.swapaxes(value, 0, 1) for name, value in zip(("omega", "prototype", "z"), params)}


def chains(sampler_priors, beta, seed=0):
    """N_CHAINS chains of the kernel on X_TINY at inverse temperature ``beta``, warm-up dropped."""
    static, data = bcm_pcgibbs.make_target(X_TINY, N_CLUSTERS, sampler_priors)
    params = sampled_params(static, data, jax.random.PRNGKey(seed), jnp.full(N_CHAINS, beta), N_WARMUP + N_DRAWS)
    return {name: np.asarray(value[:, N_WARMUP:]) for name, value in params.items()}


def log_polya_numpy(counts, concentration):
    """log B(a + n) - log B(a) over the last axis (SciPy, independent of the kernel's code)."""
    def log_beta(a):
        return scipy.special.gammaln(a).sum(-1) - scipy.special.gammaln(a.sum(-1))
    return log_beta(concentration + counts) - log_beta(concentration)


def partially_collapsed_path(priors, beta, x=X_TINY):
    """Enumerated states of ``x`` (binary, S = 2) and the exact probabilities of the kernel's tempered path
    with phi integrated out: p(omega) p(p) p(z) prod_sj B(g_sj + beta n_sj) / B(g_sj)."""
    x = np.asarray(x, np.int64)
    states, log_prior, _ = enumerated_log_terms(priors, x.tobytes(), x.shape, N_CLUSTERS)
    tokens = np.eye(N_CLUSTERS)[states["z"]]  # (M, N, P, S)
    counts = np.einsum("mips,ipv->mspv", tokens, np.eye(2)[x])  # (M, S, P, V)
    prototype_values = x[states["prototype"]]  # (M, S, P)
    copies = (states["omega"][..., None] == 1) & (prototype_values[..., None] == np.arange(2))
    g = priors.lam * (1.0 + priors.c * copies)  # the paper's g (sec. 3), written out independently
    log_target = log_prior + log_polya_numpy(beta * counts, g).reshape(len(counts), -1).sum(-1)
    return states, enumerate_posterior(lambda index: log_target[index], list(range(len(log_target))), method="loop")


def collapsed_path(priors, beta):
    """The collapsed kernel's tempered target p(prior) [B(g + n) / B(g)]^beta: another path, equal at beta = 1."""
    return exact_probabilities(priors, beta=beta)


def test_posterior_rung_matches_the_enumerated_posterior():
    result = gof_of_draws(chains(OTHER_PRIORS, 1.0), *exact_probabilities(OTHER_PRIORS))
    assert result.passed(alpha=1e-3), result


def test_a_wrong_prior_fails_the_same_check():
    draws = chains(bcm.Priors(alpha=1.0, lam=0.5, c=5.0, q=0.6), 1.0)
    result = gof_of_draws(draws, *exact_probabilities(OTHER_PRIORS))
    assert not result.passed(alpha=1e-3), result


@pytest.mark.parametrize("padding_counted", [False, True], ids=["padded", "padding_counted_must_fail"])
def test_padded_target_matches_the_enumerated_posterior(padding_counted):
    """X_TINY padded with inert rows, as ``fit_bcm`` pads: the draws over the observations follow the
    unpadded posterior and the padding rows' z never moves. Negative control: the padding rows counted as
    observations."""
    static, data = bcm_pcgibbs.make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, padded_rows=PADDED_ROWS)
    if padding_counted:
        data = data._replace(observed=jnp.ones(PADDED_ROWS, bool))
    params = sampled_params(static, data, jax.random.PRNGKey(0), jnp.ones(N_CHAINS), N_WARMUP + N_DRAWS)
    draws = {name: np.asarray(value[:, N_WARMUP:]) for name, value in params.items()}
    n_obs = len(X_TINY)
    if not padding_counted:
        assert np.all(draws["z"][:, :, n_obs:] == draws["z"][:, :1, n_obs:])
    result = gof_of_draws({**draws, "z": draws["z"][:, :, :n_obs]}, *exact_probabilities(OTHER_PRIORS))
    assert result.passed(alpha=1e-3) == (not padding_counted), result


@pytest.mark.parametrize("beta", [0.4])
@pytest.mark.parametrize("path, passes", [(partially_collapsed_path, True), (collapsed_path, False)],
                         ids=["its_own_path", "collapsed_path_must_fail"])
def test_tempered_rung_matches_its_own_path(beta, path, passes):
    """At beta < 1 the draws follow p(omega) p(p) p(z) prod B(g + beta n) / B(g), not the collapsed kernel's
    [B(g + n) / B(g)]^beta (the negative control: same draws, the other path)."""
    result = gof_of_draws(chains(TEMPERED_PRIORS, beta), *path(TEMPERED_PRIORS, beta))
    assert result.passed(alpha=1e-3) == passes, result


def test_under_the_tempering_engine_the_posterior_rung_is_exact():
    """8 chains of a 4-rung ladder (swaps on the explicit log p(x | z, phi)); the posterior rung's draws."""
    kernel = TargetKernel(bcm_pcgibbs.init, bcm_pcgibbs.step, bcm_pcgibbs.summaries,
                          lambda static, data, states: {"omega": states.omega, "prototype": states.prototype,
                                                        "z": states.z})
    static, data = bcm_pcgibbs.make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS)
    run = convergence.sample(kernel, static, data, num_chains=8, seed=3, n_temperatures=4, num_samples=2000,
                             tuning_rounds=1, scans_per_chunk=500, progress_bar=False)
    assert run.n_temperatures == 4 and 0 < run.swap_accept.mean() < 1
    result = gof_of_draws({name: run.records[name] for name in ("omega", "prototype", "z")},
                          *exact_probabilities(OTHER_PRIORS))
    assert result.passed(alpha=1e-3), result


def resplit_of_exact_draws(static, data, key, beta, params):
    """phi drawn from its conditional Dirichlet(g + beta n) given each (omega, p, z), then the re-split move:
    the z of the result. Traced afresh by each call (a patched move is not served from a cache)."""
    key_phi, key_move = jax.random.split(key)
    keys = jax.random.split(key_phi, len(params["z"])), jax.random.split(key_move, len(params["z"]))

    def one(key_phi, key_move, omega, prototype, z):
        row_counts, cell_counts = bcm_gibbs.token_counts(static, data, z)
        tempered = beta * bcm_gibbs.cells_by_cluster(static, cell_counts)
        log_phi = bcm_pcgibbs._draw_log_phi(data, key_phi, bcm_pcgibbs._concentrations(static, data, omega, prototype) + tempered)
        by_token = bcm_pcgibbs.log_phi_of_tokens(data, log_phi)
        return bcm_pcgibbs._resplit_block(static, data, key_move, beta, z, by_token, row_counts)[0]

    return jax.vmap(one)(*keys, params["omega"], params["prototype"], params["z"])


@pytest.mark.parametrize(
    "priors, beta, proposal_ratio",
    [(bcm.Priors(alpha=0.1, lam=0.5, c=5.0, q=0.3), 1.0, True), (TEMPERED_PRIORS, 0.4, True),
     (bcm.Priors(alpha=0.5, lam=0.5, c=5.0, q=0.3), 1.0, False)],
    ids=["small_alpha", "tempered", "no_proposal_ratio_must_fail"],
)
def test_resplit_move_keeps_its_target_invariant(priors, beta, proposal_ratio):
    """40000 exact draws of (omega, p, z) on X_WIDE (an observation's pair holds 0 to 4 tokens) from the
    kernel's path with phi integrated out, phi drawn given each, one re-split move of every observation: the
    moved states follow the same path. Negative control: the move without the proposal's ratio f(m) / f(m')."""
    states, probs = partially_collapsed_path(priors, beta, X_WIDE)
    key_draw, key_move = jax.random.split(jax.random.PRNGKey(0))
    params = exact_draws(states, probs, 40000, key_draw)
    static, data = bcm_pcgibbs.make_target(X_WIDE, N_CLUSTERS, priors)
    with mock.patch.object(bcm_gibbs, "_log_split_proposal", bcm_gibbs._log_split_proposal if proposal_ratio
                           else lambda log_ratio, in_pair, n_b, n_pair: jnp.zeros(n_b.shape)):
        moved = np.asarray(jax.jit(partial(resplit_of_exact_draws, static))(data, key_move, beta, params))
    assert np.mean(np.any(moved != np.asarray(params["z"]), axis=(1, 2))) > 0.05  # the move does move
    indices = state_index({**{k: np.asarray(v) for k, v in params.items()}, "z": moved}, states).reshape(8, -1)
    result = exact_gof_test(indices, probs, statistics=label_free_statistics(states))
    assert result.passed(alpha=1e-3) == proposal_ratio, result


def test_log_terms_are_the_collapsed_density_times_the_phi_conditional():
    """p(omega, p, phi, z, x) = p(omega, p, z, x) Dirichlet(phi; g + n) at prior draws (mixed V_j):
    log_prior + log_likelihood - log Dirichlet(phi; g + n) (SciPy) equals ``log_density(collapsed_model)``,
    log_likelihood is sum_ij log phi_{z_ij j x_ij}, and phi is -inf on padded values."""
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.integers(0, 2, 7), rng.integers(0, 4, 7), rng.integers(0, 3, 7)])
    n_values, n_clusters, priors = np.array([2, 4, 3]), 3, OTHER_PRIORS
    with enable_x64():
        static, data = bcm_pcgibbs.make_target(x, n_clusters, priors, n_values)
        states = jax.jit(jax.vmap(lambda key: bcm_pcgibbs.init(static, data, key)))(jax.random.split(jax.random.PRNGKey(0), 4))

        def collapsed_log_joint(omega, prototype, z):
            kwargs = {"priors": priors, "n_values": n_values}
            return log_density(bcm.collapsed_model, (x, n_clusters), kwargs, {"omega": omega, "prototype": prototype, "z": z})[0]

        log_joint = jax.jit(jax.vmap(collapsed_log_joint))(states.omega, states.prototype, states.z)
    states = jax.tree.map(np.asarray, states)
    for i in range(len(log_joint)):
        z, omega, prototype, log_phi = states.z[i], states.omega[i], states.prototype[i], states.log_phi[i]
        log_phi_conditional = 0.0
        for s, j in np.ndindex(n_clusters, len(n_values)):
            valid = np.arange(n_values[j])
            counts = np.bincount(x[z[:, j] == s, j], minlength=n_values[j])
            g = np.asarray(bcm.g(x[prototype[s], j], omega[s, j], valid, priors))
            phi = np.exp(log_phi[s, j, valid])
            log_phi_conditional += scipy.stats.dirichlet.logpdf(phi / phi.sum(), g + counts)
        log_likelihood = log_phi[z, np.arange(len(n_values)), x].sum()
        np.testing.assert_allclose(states.log_likelihood[i], log_likelihood, rtol=1e-9)
        np.testing.assert_allclose(states.log_prior[i] + states.log_likelihood[i] - log_phi_conditional, log_joint[i],
                                   rtol=1e-7, atol=1e-7)
    assert np.all(np.isneginf(states.log_phi[:, :, 0, 2:])) and np.all(np.isneginf(states.log_phi[:, :, 2, 3:]))
    assert np.all(np.isfinite(states.log_phi[:, :, 1]))


@partial(jax.jit, static_argnums=0)
def fresh_states(static, data, states):
    """The partially collapsed and the collapsed kernel's states of the same params, computed from scratch."""
    ours = jax.vmap(lambda o, p, f, z: bcm_pcgibbs.state_from_params(static, data, o, p, f, z))(
        states.omega, states.prototype, states.log_phi, states.z)
    collapsed = jax.vmap(lambda o, p, z: bcm_gibbs.state_from_params(static, data, o, p, z))(
        states.omega, states.prototype, states.z)
    return ours, collapsed, bcm_pcgibbs.summaries(static, data, states)


def test_sweeps_keep_counts_and_log_terms_current():
    """After tempered sweeps the counts and log terms are those of the state computed from scratch, and the
    summary ``collapsed_log_joint`` is the collapsed kernel's log joint of the same (omega, p, z)."""
    static, data = bcm_pcgibbs.make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS)
    betas = jnp.linspace(1.0, 0.0, N_CHAINS)
    states = jax.jit(jax.vmap(lambda key: bcm_pcgibbs.init(static, data, key)))(jax.random.split(jax.random.PRNGKey(6), N_CHAINS))
    step = jax.jit(bcm_pcgibbs.step, static_argnums=0)
    for i in range(3):
        states, info = step(static, data, states, jax.random.split(jax.random.PRNGKey(i), N_CHAINS), betas)
        fresh, collapsed, summaries = fresh_states(static, data, states)
        for name in ("row_counts", "cell_counts"):
            np.testing.assert_array_equal(getattr(states, name), getattr(fresh, name))
        for name in ("log_prior", "log_likelihood"):
            np.testing.assert_allclose(getattr(states, name), getattr(fresh, name), rtol=1e-5)
        np.testing.assert_allclose(summaries["collapsed_log_joint"], collapsed.log_prior + collapsed.log_likelihood,
                                   rtol=1e-5)
        assert info.z_changed.shape == info.resplit_moved.shape == (N_CHAINS,)


def test_a_start_at_given_clusters_keeps_them_and_draws_phi_given_them():
    """``state_with_z``: the start's z is the one given, its counts and log terms are those of its params
    computed afresh, and phi is drawn from Dirichlet(g + n): with every token of value v in cluster v (40
    observations, two features), phi_sj puts most of its mass on value s (drawn from the prior, it would not)."""
    x = np.repeat([[0, 0], [1, 1]], 20, axis=0)
    static, data = bcm_pcgibbs.make_target(x, 2, OTHER_PRIORS)
    z = jnp.asarray(np.repeat(x[:, :1], 2, axis=1), jnp.int32)  # cluster = value
    states = jax.jit(jax.vmap(lambda key: bcm_pcgibbs.state_with_z(static, data, key, z)))(
        jax.random.split(jax.random.PRNGKey(0), N_CHAINS))
    fresh, _, _ = fresh_states(static, data, states)
    assert np.all(np.asarray(states.z) == np.asarray(z))
    for name in ("row_counts", "cell_counts"):
        np.testing.assert_array_equal(getattr(states, name), getattr(fresh, name))
    for name in ("log_prior", "log_likelihood"):
        np.testing.assert_allclose(getattr(states, name), getattr(fresh, name), rtol=1e-5)
    phi = np.exp(np.asarray(states.log_phi))  # (chain, S, P, V)
    assert np.all(phi[:, 0, :, 0] > 0.8) and np.all(phi[:, 1, :, 1] > 0.8)


@pytest.mark.parametrize("shift, passes", [(1.0, True), (1.03, False)], ids=["exact", "shape_3_percent_off_must_fail"])
def test_log_gamma_draws_follow_the_gamma_distribution(shift, passes):
    """Kolmogorov-Smirnov of 20000 draws per shape (below 1: the boost; above: Marsaglia-Tsang alone) against
    SciPy's Gamma CDF of log X; negative control: the CDF of shapes 3 % larger."""
    shapes = np.array([0.05, 0.6, 1.0, 3.5, 40.0])
    draws = np.asarray(jax.jit(bcm_pcgibbs.log_gamma_draws)(jax.random.PRNGKey(0), jnp.repeat(jnp.asarray(shapes, jnp.float32), 20000).reshape(5, -1)), np.float64)
    p_values = [scipy.stats.kstest(y, lambda t, a=a: scipy.stats.gamma(a * shift).cdf(np.exp(t))).pvalue
                for a, y in zip(shapes, draws)]
    assert (min(p_values) * len(shapes) > 1e-3) == passes, p_values


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="n_clusters"):
        bcm_pcgibbs.make_target(X_TINY, 0)
    with pytest.raises(ValueError, match="x"):
        bcm_pcgibbs.make_target(-np.ones((3, 2), int), 2)
