"""Exact tempered partially collapsed Gibbs sampler for the Bayesian Case Model: phi explicit, pi integrated out.

Following Magnusson, Jonsson, Villani and Broman (2018, "Sparse partially collapsed MCMC for parallel inference
in topic models"), the cluster distributions phi_sj are kept in the state and only pi_i is integrated out.
Given phi, the tokens of different observations share no count, so every observation's tokens are updated
at once; within an observation the Polya term of pi_i couples them, so its P tokens are visited in turn:
P sequential steps per sweep, each over all N observations (the collapsed kernel, ``inference.bcm_gibbs``,
needs max(N, P) steps, each with scatter updates of the shared cell counts). ``fit_bcm`` runs it with
``kernel="partially_collapsed"`` (docs/decisions/bcm-sampler.md).

A replica at inverse temperature beta targets the explicit path pi_beta(omega, p, phi, z), in which the
likelihood p(x | z, phi) alone is tempered (:class:`PCGibbsState`). Integrating phi out gives::

    pi_beta(omega, p, z) propto p(omega) p(p) p(z) prod_sj B(g_sj + beta n_sj) / B(g_sj),

which at beta = 1 is ``collapsed_model``'s posterior (the target of ``inference.bcm_gibbs``); at beta < 1
it differs from the collapsed kernel's path, whose likelihood factor is [B(g + n) / B(g)]^beta. beta = 0 is
the prior. :func:`step` runs two blocks, each drawing from a conditional of pi_beta, and a
Metropolis-Hastings move between them: block (a), z given phi, omega and p by eq. (1) with phi explicit
(``_z_block``); move (a'), the collapsed kernel's whole-observation re-split move given phi
(``_resplit_block``); block (b), (omega, p, phi) given z jointly, omega by eq. (2) with tempered counts
(``_parameters_block``). There is no split-merge move. Static and data are the collapsed kernel's
(:func:`make_target`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln, logsumexp

from interpretable_zoo.inference import bcm_gibbs
from interpretable_zoo.inference.bcm_gibbs import BCMData, BCMStatic
from interpretable_zoo.inference.tempering import TargetKernel
from interpretable_zoo.models import bcm


class PCGibbsState(NamedTuple):
    """One replica (or a batch along a leading axis) of the explicit path at inverse temperature beta::

        pi_beta(omega, p, phi, z) propto p(omega) p(p) p(phi | omega, p) p(z) p(x | z, phi)^beta,

    p(phi | omega, p) = prod_sj Dirichlet(phi_sj; g_sj), g_sj = g(x_{p_s j}, omega_sj) over the values
    v < V_j (``models.bcm.g``), p(z) the row term of ``models.bcm.collapsed_model`` (pi_i integrated out)
    and p(x | z, phi) = prod_sjv phi_sjv^{n_sjv}, n_sjv the tokens of feature j with value v in cluster s.

    Fields: z (N, P), omega (S, P), prototype (S,) int32; log_phi (S, P, V) log phi_sjv, -inf on padded
    values v >= V_j; row_counts (N, S), cell_counts (P * V, S) as in ``bcm_gibbs.BCMTargetState``, so that
    ``bcm_gibbs.summaries`` and the records of ``inference.bcm`` apply; log_prior = log p(omega) + log p(p)
    + log p(phi | omega, p) + log p(z) and log_likelihood = log p(x | z, phi). The tempering engine swaps
    on the latter, so the engine's ``log_joint`` is the explicit joint."""

    z: jax.Array
    omega: jax.Array
    prototype: jax.Array
    log_phi: jax.Array
    row_counts: jax.Array
    cell_counts: jax.Array
    log_prior: jax.Array
    log_likelihood: jax.Array


class PCGibbsInfo(NamedTuple):
    """What a :func:`step` did, per replica: z_changed, the share of the observations' tokens whose cluster
    changed; resplit_moved, the share of observations whose tokens the re-split move moved."""

    z_changed: jax.Array
    resplit_moved: jax.Array


def make_target(x, n_clusters: int, priors: bcm.Priors | None = None, n_values=None, *,
                padded_rows: int | None = None) -> tuple[BCMStatic, BCMData]:
    """(static, data) of ``collapsed_model(x, n_clusters, priors, n_values)``: those of
    ``bcm_gibbs.make_target`` (arguments checked there, ``padded_rows`` as there) without the split-merge
    move, which this kernel does not run, so that the prior tables come from the model file's hooks in one
    place."""
    return bcm_gibbs.make_target(x, n_clusters, priors, n_values, split_merge_clusters=0, padded_rows=padded_rows)


def _concentrations(static: BCMStatic, data: BCMData, omega, prototype):
    """g_sj over the values, (S, P, V), 0 on padded values."""
    return data.g_values[omega, jnp.arange(static.n_features), data.x[prototype]]


def _log_terms(static: BCMStatic, data: BCMData, omega, prototype, log_phi, row_counts, cell_counts):
    """(log_prior, log_likelihood) of one replica (:class:`PCGibbsState`)."""
    mask = data.value_mask
    collapsed_prior, _ = bcm_gibbs.log_target_parts(static, data, omega, prototype, row_counts, cell_counts)
    concentration = _concentrations(static, data, omega, prototype)
    log_dirichlet = jnp.where(mask, (concentration - 1.0) * log_phi, 0.0).sum() - bcm.log_multivariate_beta(
        jnp.where(mask, concentration, 1.0), mask
    ).sum()
    counts = bcm_gibbs.cells_by_cluster(static, cell_counts)
    log_likelihood = jnp.where(mask, counts * log_phi, 0.0).sum()
    return collapsed_prior + log_dirichlet, log_likelihood


def _with_log_terms(static, data, z, omega, prototype, log_phi, row_counts, cell_counts) -> PCGibbsState:
    log_prior, log_likelihood = _log_terms(static, data, omega, prototype, log_phi, row_counts, cell_counts)
    return PCGibbsState(z, omega, prototype, log_phi, row_counts, cell_counts, log_prior, log_likelihood)


def state_from_params(static: BCMStatic, data: BCMData, omega, prototype, log_phi, z) -> PCGibbsState:
    """The replica state of the given omega (S, P), prototype (S,), log phi (S, P, V) and z (N, P)."""
    omega, prototype, z = (jnp.asarray(value, jnp.int32) for value in (omega, prototype, z))
    row_counts, cell_counts = bcm_gibbs.token_counts(static, data, z)
    log_phi = jnp.where(data.value_mask, jnp.asarray(log_phi, jnp.result_type(float)), -jnp.inf)
    return _with_log_terms(static, data, z, omega, prototype, log_phi, row_counts, cell_counts)


def log_gamma_draws(key, concentration):
    """log X, X ~ Gamma(concentration, 1) elementwise: Marsaglia and Tsang's (2000) rejection sampler, every
    element proposing at once until all have accepted (each element's accepted proposal is an exact draw,
    whatever the others do), and for a < 1 their boost X = Y U^(1/a), Y ~ Gamma(a + 1), in log space so
    that tiny X stay finite. On CPU it costs less than half of ``jax.random.loggamma``, which runs a
    rejection loop and splits a key per element."""
    boost = concentration < 1.0
    shape = jnp.where(boost, concentration + 1.0, concentration)
    d = shape - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)

    def propose(carry):
        key, done, log_x = carry
        key, key_normal, key_uniform = jax.random.split(key, 3)
        normal = jax.random.normal(key_normal, concentration.shape)
        log_u = jnp.log1p(-jax.random.uniform(key_uniform, concentration.shape))
        v = 1.0 + c * normal
        log_v3 = 3.0 * jnp.log(jnp.where(v > 0, v, 1.0))
        accept = ~done & (v > 0) & (log_u < 0.5 * normal**2 + d - d * v**3 + d * log_v3)
        return key, done | accept, jnp.where(accept, jnp.log(d) + log_v3, log_x)

    key_loop, key_boost = jax.random.split(key)
    start = (key_loop, jnp.zeros(concentration.shape, bool), jnp.zeros(concentration.shape, d.dtype))
    _, _, log_x = jax.lax.while_loop(lambda carry: ~carry[1].all(), propose, start)
    log_u = jnp.log1p(-jax.random.uniform(key_boost, concentration.shape, d.dtype))
    return jnp.where(boost, log_x + log_u / concentration, log_x)


def _draw_log_phi(data: BCMData, key, concentration):
    """log phi_sj ~ log Dirichlet(concentration) over the valid values, from log-Gamma draws (stable for
    small concentrations); -inf on padded values."""
    log_gamma = log_gamma_draws(key, jnp.where(data.value_mask, concentration, 1.0))
    log_gamma = jnp.where(data.value_mask, log_gamma, -jnp.inf)
    return log_gamma - logsumexp(log_gamma, -1, keepdims=True)


def init(static: BCMStatic, data: BCMData, key) -> PCGibbsState:
    """One replica drawn from the prior: (omega, p, z) as ``bcm_gibbs.init``, phi_sj ~ Dirichlet(g_sj)."""
    key_collapsed, key_phi = jax.random.split(key)
    start = bcm_gibbs.init(static, data, key_collapsed)
    log_phi = _draw_log_phi(data, key_phi, _concentrations(static, data, start.omega, start.prototype))
    return _with_log_terms(static, data, start.z, start.omega, start.prototype, log_phi, start.row_counts,
                           start.cell_counts)


def state_with_z(static: BCMStatic, data: BCMData, key, z) -> PCGibbsState:
    """A start at the given z (N, P): omega and the prototypes drawn from their prior, then phi from its
    conditional given them and z, Dirichlet(g_sj + n_sj), so that the first sweep of z given phi starts
    from z's clusters rather than from a phi unrelated to them."""
    key_prior, key_phi = jax.random.split(key)
    drawn = bcm_gibbs.init(static, data, key_prior)
    row_counts, cell_counts = bcm_gibbs.token_counts(static, data, z)
    concentration = _concentrations(static, data, drawn.omega, drawn.prototype) + bcm_gibbs.cells_by_cluster(
        static, cell_counts)
    log_phi = _draw_log_phi(data, key_phi, concentration)
    return _with_log_terms(static, data, z, drawn.omega, drawn.prototype, log_phi, row_counts, cell_counts)


def log_phi_of_tokens(data: BCMData, log_phi):
    """log phi_{s j x_ij} of every token (P, S, N), from log phi (S, P, V): what blocks (a) and (a') read."""
    return jnp.take_along_axis(jnp.moveaxis(log_phi, 1, 0), data.x.T[:, None, :], axis=2)


def _z_block(static: BCMStatic, data: BCMData, key, beta, z, token_log_phi, row_counts):
    """Block (a) for one replica: z_ij by p(z_ij = s) propto (a_s + n_{i,s,not j}) phi_{s j x_ij}^beta (eq. (1)
    with phi explicit), a_s the Dirichlet concentration of pi_i (``models.bcm.z_concentration``) and
    n_{i,s,not j} the tokens of observation i in s other than j; one feature j at a time over all
    observations (they are independent given phi); ``token_log_phi`` (P, S, N):
    log phi_{s j x_ij}. Returns z and row counts. The counts are carried as (S, N) floats (small integers,
    exact): on CPU a step over that layout costs half as much as over (N, S). A padding row's tokens keep
    their cluster (``BCMData.observed``; its counts are 0, so its draws are not of a distribution)."""
    tempered = beta * token_log_phi  # finite: x_ij is a valid value of feature j
    # phi^beta relative to the token's largest: exp never overflows, and the weights keep their ratios
    weights = jnp.exp(tempered - tempered.max(1, keepdims=True))
    uniforms = jax.random.uniform(key, (static.n_features, static.n_obs))
    clusters = jnp.arange(static.n_clusters)[:, None]
    alpha = data.pi_concentration[:, None]

    def update_feature(counts, inputs):
        old, phi_weight, u = inputs
        is_old = clusters == old
        new = jnp.where(data.observed, bcm_gibbs.inverse_cdf_draw(((alpha + counts - is_old) * phi_weight).T, u), old)
        return counts + (clusters == new) - is_old, new

    counts, z_new = jax.lax.scan(update_feature, row_counts.T.astype(weights.dtype), (z.T, weights, uniforms))
    return z_new.T, counts.T.astype(row_counts.dtype)


def _resplit_block(static: BCMStatic, data: BCMData, key, beta, z, token_log_phi, row_counts):
    """Move (a') for one replica: the collapsed kernel's whole-observation re-split move
    (``bcm_gibbs._row_resplit_block``) with l_j = beta (log phi_{b j x_ij} - log phi_{a j x_ij}), which
    leaves p(z_i | phi, omega, p) propto p(z_i) prod_j phi_{z_ij j x_ij}^beta invariant for each i. Given phi
    the observations are independent, so every observation's move is made at once. Without it, with alpha
    small, an observation whose tokens share one cluster rarely moves, and the cluster sizes mix slowly.
    A padding row's move is never accepted. Returns z, row counts and the share of observations whose
    tokens moved."""
    n_features, n_clusters = static.n_features, static.n_clusters
    if n_clusters == 1:
        return z, row_counts, jnp.zeros(())
    token, shift, component, uniforms, log_u = bcm_gibbs.resplit_draws(key, data.observed, n_features, n_clusters)
    a = jnp.take_along_axis(z, token[:, None], axis=1)  # (N, 1)
    b = (a + shift[:, None]) % n_clusters
    by_token = jnp.moveaxis(token_log_phi, 2, 0)  # (N, P, S)
    log_phi_a, log_phi_b = (jnp.take_along_axis(by_token, s[:, :, None], axis=2)[..., 0] for s in (a, b))
    in_b = z == b
    in_pair = (z == a) | in_b
    log_ratio = jnp.where(in_pair, beta * (log_phi_b - log_phi_a), 0.0)  # l_j
    row_log_gamma = gammaln(data.pi_concentration[:, None] + jnp.arange(n_features + 1))
    moved, row_counts, any_moved = bcm_gibbs.resplit_decision(row_log_gamma, log_ratio, in_pair, in_b, row_counts, a,
                                                              b, component, uniforms, log_u)
    share = (any_moved.sum() / data.observed.sum()).astype(jnp.float32)
    return jnp.where(moved, jnp.where(in_b, a, b), z), row_counts, share


def _parameters_block(static: BCMStatic, data: BCMData, key, beta, cell_counts):
    """Block (b) for one replica: (omega, p, phi) given z jointly from the tempered conditional, the clusters
    being independent given z. With phi_s integrated out, p_s with omega_s summed out: log p(p_s = i) =
    prior logit + sum_j log sum_b p(omega_sj = b) exp(E_b[s, j, x_ij]), E_b[s, j, v] = log B(g(v, b) +
    beta n_sj) - log B(g(v, b)) (non-integer tempered counts: log Gamma evaluated directly); then omega_sj
    given p_s, log-odds = prior log-odds + E_1 - E_0 (eq. (2) with tempered counts); then
    phi_sj ~ Dirichlet(g_sj + beta n_sj), the conjugate update of the tempered likelihood. Returns
    (omega, prototype, log_phi)."""
    key_prototype, key_omega, key_phi = jax.random.split(key, 3)
    features = jnp.arange(static.n_features)
    tempered = beta * bcm_gibbs.cells_by_cluster(static, cell_counts).astype(jnp.result_type(float))  # (S, P, V)
    mask = data.value_mask[:, None, :]  # (P, 1, V) over (j, v, u)
    # E[b, s, j, v] = log B(g(v, b) + beta n_sj) - log B(g(v, b)), g_values (2, P, V, V) over (b, j, v, u).
    # g(v, 0) does not depend on the prototype value v (models.bcm.g's contract): one term for every v.
    log_beta_out = bcm.log_multivariate_beta(data.g_values[0, :, 0] + tempered, data.value_mask)  # (S, P)
    log_beta_in = bcm.log_multivariate_beta(data.g_values[1] + tempered[:, :, None, :], mask)  # (S, P, V)
    log_beta = jnp.stack([jnp.broadcast_to(log_beta_out[..., None], log_beta_in.shape), log_beta_in])
    evidence = log_beta - data.log_beta_prior[:, None]  # (2, S, P, V)
    omega_log_prob = jnp.moveaxis(data.omega_log_prob, -1, 0)[..., None]  # (2, S, P, 1)
    by_value = logsumexp(omega_log_prob + evidence, 0)  # (S, P, V), omega summed out
    scores = data.prototype_log_prob + by_value[:, features, data.x].sum(-1)  # (S, N)
    prototype = jax.random.categorical(key_prototype, scores).astype(jnp.int32)
    prototype_values = data.x[prototype]  # (S, P)
    clusters = jnp.arange(static.n_clusters)[:, None]
    omega_logits = omega_log_prob[..., 0] + evidence[:, clusters, features, prototype_values]  # (2, S, P)
    omega = jax.random.categorical(key_omega, omega_logits, axis=0).astype(jnp.int32)
    concentration = _concentrations(static, data, omega, prototype) + tempered
    return omega, prototype, _draw_log_phi(data, key_phi, concentration)


def _one_step(static: BCMStatic, data: BCMData, state: PCGibbsState, key, beta):
    key_z, key_resplit, key_parameters = jax.random.split(key, 3)
    by_token = log_phi_of_tokens(data, state.log_phi)
    z, row_counts = _z_block(static, data, key_z, beta, state.z, by_token, state.row_counts)
    z, row_counts, resplit_moved = _resplit_block(static, data, key_resplit, beta, z, by_token, row_counts)
    _, cell_counts = bcm_gibbs.token_counts(static, data, z)
    omega, prototype, log_phi = _parameters_block(static, data, key_parameters, beta, cell_counts)
    new = _with_log_terms(static, data, z, omega, prototype, log_phi, row_counts, cell_counts)
    changed = ((z != state.z) & data.observed[:, None]).sum() / (data.observed.sum() * static.n_features)
    return new, PCGibbsInfo(changed.astype(jnp.float32), resplit_moved)


def step(static: BCMStatic, data: BCMData, states: PCGibbsState, keys, betas) -> tuple[PCGibbsState, PCGibbsInfo]:
    """One sweep of B replicas (fields of ``states`` with a leading axis B; ``keys`` (B,), ``betas`` (B,) in
    [0, 1]): block (a), the re-split move (a'), then block (b). Replica b leaves its pi_beta invariant
    (:class:`PCGibbsState`)."""
    betas = jnp.asarray(betas, jnp.result_type(float))
    return jax.vmap(lambda state, key, beta: _one_step(static, data, state, key, beta))(states, keys, betas)


def summaries(static: BCMStatic, data: BCMData, states: PCGibbsState) -> dict:
    """Label-free scalars per replica: those of ``bcm_gibbs.summaries`` (sorted cluster sizes, active omega)
    and ``collapsed_log_joint``, log p(omega, p, z, x) with phi and pi integrated out (``collapsed_model``):
    the collapsed kernel's ``log_joint``, where the engine's is the explicit joint."""
    parts = jax.vmap(lambda o, p, r, c: bcm_gibbs.log_target_parts(static, data, o, p, r, c))(
        states.omega, states.prototype, states.row_counts, states.cell_counts
    )
    return {**bcm_gibbs.summaries(static, data, states), "collapsed_log_joint": parts[0] + parts[1]}


def record(static: BCMStatic, data: BCMData, states: PCGibbsState) -> dict:
    """What a kept draw stores: omega, the prototypes and the row counts."""
    return {"omega": states.omega, "prototype": states.prototype, "row_counts": states.row_counts}


STEP_TEMPORARY_STATES = 18
"""A replica's :func:`step` holds temporaries of at most about this many of its states. Measured by XLA's
memory analysis of compiled scans of 64 replicas: 7.7-15.7 states over six shapes from 30 x 12 to 200 x 64
observations x features, 2 to 32 clusters and 2 to 12 values (two of them checked in tests/test_bcm_fit.py)."""


def state_bytes(static: BCMStatic) -> int:
    """Bytes of one replica's :class:`PCGibbsState`."""
    n, p, v, s = static.n_obs, static.n_features, static.n_values, static.n_clusters
    return 4 * (n * p + s * p + s + s * p * v + n * s + p * v * s + 2)


def scratch(static: BCMStatic) -> tuple[int, str, None]:
    """The memory of a replica's :func:`step` beyond its state (for the run's memory estimate)."""
    return STEP_TEMPORARY_STATES * state_bytes(static), "the step's work over tokens and clusters", None


KERNEL = TargetKernel(init, step, summaries, record, scratch=scratch)
"""The kernel as ``inference.convergence.sample`` runs it."""
