"""Exact collapsed Gibbs sampler for the Bayesian Case Model (pi and phi integrated out).

One sweep updates z token by token, then whole observations, then omega, then the prototypes; each
block leaves the target invariant:

1. the cluster indices z_ij, by eq. (1): p(z_ij = s) is proportional to
   (alpha/S + n_{s,i,not j}) (g_sj(x_ij) + n_{s,.,j,x_ij}) / (sum_v g_sj(v) + n_{s,.,j,.}), counts without
   the token itself. Two tokens in different rows and different columns share no count, so their joint
   conditional factorises: a set with at most one token per row and per column is updated at once,
   exactly. The N x P grid is covered by max(N, P) such "wrapped diagonals" of min(N, P) tokens, visited
   in a ``lax.scan`` (sequential over diagonals, vectorized inside one);
2. whole observations, by a Metropolis move per observation (:func:`_row_swap_block`): swap two cluster
   labels on all tokens of observation i at once. With alpha small, pi_i is nearly one-hot and eq. (1)
   almost never moves a single token of an observation out of its dominant cluster (a factor about
   (alpha/S) / (P - 1) against it), so without this move an observation started in a wrong cluster stays there;
3. all omega_sj at once by eq. (2) (they are conditionally independent given z and the prototypes);
4. all prototypes at once (conditionally independent across clusters): log p(p_s = i) =
   const + sum_j T[s, j, x_ij] with T[s, j, v] = log B(g(v, omega_sj) + n_sj) - log B(g(v, omega_sj)),
   a gather over a table computed once per sweep.

Blocks 3 and 4 need log B(g + n) for integer counts n <= N only, and g takes few distinct values: every
log Gamma(a + n) they use is read from a table of log Gamma(a + n), n = 0..N, over the distinct a (the
values of g and their sums over values), built once per data set.

Vectorized chains (:func:`sweep_chains`) run blocks 1 and 2 as one scan over the stacked count tables of
all chains; each chain's draws are exactly those of :func:`sweep` with its key.

The state is count arrays kept consistent with z by every update. Hyperparameters, g and the Beta-function
terms come from ``interpretable_zoo.models.bcm``; the kernel's log target equals
``log_density(collapsed_model)`` up to a constant (tested).
"""

from __future__ import annotations

import inspect
from collections import namedtuple
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from interpretable_zoo.models import bcm

BCMState = namedtuple(
    "BCMState",
    ["params", "row_counts", "cell_counts", "potential_energy", "accept_prob", "sorted_cluster_size", "rng_key"],
)
BCMState.__doc__ = """State of the BCM Gibbs sampler.

params: {"omega": (S, P), "prototype": (S,), "z": (N, P)} int32; row_counts: (N, S) tokens of observation
i in cluster s; cell_counts: (P * V, S) tokens of feature j with value v in cluster s (row j * V + v);
potential_energy: minus the log target; accept_prob: the share of observations whose swap move was
accepted in the last sweep (1 at the start); sorted_cluster_size: tokens per cluster,
largest first (label-free).
"""


@dataclass(frozen=True)
class _Problem:
    """The data and constants one sweep needs, derived once from the model arguments."""

    x: np.ndarray | jax.Array  # (N, P) int32 codes
    n_clusters: int
    priors: bcm.Priors
    n_values: np.ndarray  # (P,)
    mask: np.ndarray  # (P, V)
    diagonal_rows: np.ndarray  # (M, L) row of each token of each diagonal
    diagonal_cols: np.ndarray  # (M, L)
    cell_indicators: jax.Array  # (N, P * V) float32, 1 at column j * V + x_ij: sums over a (P * V) table
    # g(u, b) over values u, for omega b and prototype value v, is g[b, j, v, u] (0 on padded u); the kernel
    # reads it as log Gamma(g + n) from log_gamma_table (A * (N + 1),), float64, over its A distinct values
    # and sums over u, at offsets g_offsets (2, P, V, V) and g_total_offsets (2, P, V)
    log_gamma_table: np.ndarray
    g_offsets: np.ndarray
    g_total_offsets: np.ndarray
    log_beta_prior: np.ndarray  # (2, P, V): log B(g[b, j, v]) over the valid values

    @property
    def shape(self):
        return self.x.shape


def _wrapped_diagonals(n_obs: int, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices (M, L) of M = max(N, P) token sets, each with one token per row and per
    column at most (L = min(N, P) tokens), together covering every (i, j) exactly once."""
    offsets = np.arange(max(n_obs, n_features))[:, None]
    short = np.arange(min(n_obs, n_features))[None, :]
    if n_obs >= n_features:
        return ((short + offsets) % n_obs).astype(np.int32), np.broadcast_to(short, (n_obs, n_features)).astype(np.int32)
    return np.broadcast_to(short, (n_features, n_obs)).astype(np.int32), ((short + offsets) % n_features).astype(np.int32)


def problem_from_model_args(model_args, model_kwargs) -> _Problem:
    """Bind the arguments of ``collapsed_model`` exactly as the model does. ``x`` may be a traced array
    (e.g. a sampler run under ``jax.vmap`` over data sets) when ``n_values`` is given."""
    bound = inspect.signature(bcm.collapsed_model).bind(*model_args, **(model_kwargs or {}))
    bound.apply_defaults()
    x = bound.arguments["x"]
    n_values = bcm.resolve_n_values(x, bound.arguments["n_values"])
    x = jnp.asarray(x, jnp.int32) if isinstance(x, jax.core.Tracer) else np.asarray(x).astype(np.int32)
    priors = bound.arguments["priors"] or bcm.Priors()
    rows, cols = _wrapped_diagonals(*x.shape)
    mask = bcm.value_mask(n_values)
    cells = np.arange(x.shape[1]) * mask.shape[1] + x
    indicators = jnp.zeros((x.shape[0], mask.size), jnp.float32).at[np.arange(x.shape[0])[:, None], cells].set(1.0)
    values = np.arange(mask.shape[1])
    with jax.ensure_compile_time_eval():
        prior_g = bcm.g(values[None, None, :], np.arange(2)[:, None, None], values, priors)  # (2, 1, V, V)
        prior_g = np.where(mask[None, :, None, :], np.asarray(prior_g), 0.0).astype(np.float32)
    table, g_offsets, g_total_offsets = _log_gamma_tables(prior_g, x.shape[0])
    log_beta_prior = _log_beta_from_table(table, g_offsets, g_total_offsets, np.zeros_like(g_offsets))
    return _Problem(
        x, int(bound.arguments["n_clusters"]), priors, n_values, mask, rows, cols, indicators, table, g_offsets,
        g_total_offsets, log_beta_prior,
    )


def _log_gamma_tables(prior_g: np.ndarray, n_obs: int):
    """log Gamma(a + n) for n = 0..N over the distinct concentrations a in ``prior_g`` and in its sums over
    values, flattened (A * (N + 1),); and the offsets into it of prior_g's entries and of its sums. Padded
    values (g = 0) point to a row of zeros: they add nothing to log B."""
    entries = prior_g.astype(np.float64)
    concentrations, index = np.unique(np.concatenate([entries.ravel(), entries.sum(-1).ravel()]), return_inverse=True)
    table = scipy.special.gammaln(concentrations[:, None] + np.arange(n_obs + 1))
    table[concentrations == 0] = 0.0
    offsets = (index * (n_obs + 1)).astype(np.int32)
    return table.ravel(), offsets[: entries.size].reshape(entries.shape), offsets[entries.size :].reshape(entries.shape[:-1])


def _log_beta_from_table(table, g_offsets, total_offsets, counts):
    """log B(g + n) over the last (value) axis, from the log Gamma table of :func:`_log_gamma_tables`:
    ``g_offsets`` (..., V) and ``total_offsets`` (...) locate g and its sum, ``counts`` n broadcasts to
    (..., V). Works on NumPy and JAX arrays alike."""
    return table[g_offsets + counts].sum(-1) - table[total_offsets + counts.sum(-1)]


class BCMGibbs(MCMCKernel):
    """Collapsed Gibbs sampler of :func:`interpretable_zoo.models.bcm.collapsed_model`.

    Run it with ``MCMC`` (or ``inference.mcmc.run_mcmc``) and model arguments ``(x, n_clusters)`` plus
    optional ``priors`` and ``n_values`` keywords. ``init_labels`` (N,) optionally starts every token of
    observation i in cluster ``init_labels[i]``, followed by one omega and one prototype update given
    those clusters; else z starts uniformly random, omega from its prior and the prototypes uniformly.
    With vectorized chains, ``init_labels`` (num_chains, N) gives each chain its own start (chains from
    several starts then share one compiled sampler). ``init_params`` given to ``run`` ({"omega",
    "prototype", "z"}) override both.
    """

    sample_field = "params"

    def __init__(self, init_labels=None):
        self._init_labels = None if init_labels is None else np.asarray(init_labels, np.int32)
        self._sample_fn = None

    @property
    def model(self):
        return bcm.collapsed_model

    def postprocess_fn(self, model_args, model_kwargs):
        return lambda params: params

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        problem = problem_from_model_args(model_args, model_kwargs)
        labels = self._init_labels
        single = is_prng_key(rng_key)
        shapes = [(problem.shape[0],)] + ([] if single else [(len(rng_key), problem.shape[0])])
        if labels is not None and labels.shape not in shapes:
            raise ValueError(f"init_labels: expected shape {' or '.join(map(str, shapes))}, got {labels.shape}")
        init_one = lambda key, params, labels: initial_state(problem, key, params, labels)  # noqa: E731
        if single:
            self._sample_fn = lambda state: sweep(problem, state)  # noqa: E731
            return jax.jit(init_one)(rng_key, init_params, labels)
        self._sample_fn = lambda states: sweep_chains(problem, states)  # noqa: E731
        labels_per_chain = labels is not None and labels.ndim == 2
        in_axes = (0, None if init_params is None else 0, 0 if labels_per_chain else None)
        return jax.jit(jax.vmap(init_one, in_axes=in_axes))(rng_key, init_params, labels)

    def sample(self, state, model_args, model_kwargs):
        return self._sample_fn(state)


def _counts(problem: _Problem, z):
    """Row counts (N, S) and cell counts (P * V, S) of the assignments z (N, P)."""
    n_obs, n_features = problem.shape
    n_values = problem.mask.shape[1]
    tokens = jax.nn.one_hot(z, problem.n_clusters, dtype=jnp.int32)  # (N, P, S)
    cells = jnp.arange(n_features) * n_values + problem.x  # (N, P)
    cell_counts = jnp.zeros((n_features * n_values, problem.n_clusters), jnp.int32).at[cells].add(tokens)
    return tokens.sum(1), cell_counts


def _concentrations(problem: _Problem, params):
    """g for each cluster, feature and value, (S, P, V), zero on padded values."""
    prototype_values = jnp.asarray(problem.x)[params["prototype"]]
    return bcm.concentration_table(prototype_values, params["omega"], problem.n_values, problem.priors)


def log_target(problem: _Problem, params, row_counts, cell_counts):
    """log p(omega, prototype, z | x) + const from the counts (the density of ``collapsed_model``)."""
    priors, n_clusters = problem.priors, problem.n_clusters
    omega = params["omega"]
    log_prior = jnp.sum(jnp.where(omega == 1, jnp.log(priors.q), jnp.log1p(-priors.q)))
    alpha_s = bcm.z_concentration(priors, n_clusters)
    log_rows = jnp.sum(bcm.log_polya(row_counts, jnp.full(n_clusters, alpha_s)))
    cells = _cells_by_cluster(problem, cell_counts)
    log_cells = jnp.sum(bcm.log_polya(cells, _concentrations(problem, params), problem.mask))
    return log_prior + log_rows + log_cells


def _cells_by_cluster(problem: _Problem, cell_counts):
    """(P * V, S) cell counts as (S, P, V)."""
    n_features, n_values = problem.mask.shape
    return cell_counts.T.reshape(problem.n_clusters, n_features, n_values)


def _finish(problem: _Problem, key, params, row_counts, cell_counts, accept_prob=1.0) -> BCMState:
    potential = -log_target(problem, params, row_counts, cell_counts)
    sizes = -jnp.sort(-row_counts.sum(0))
    return BCMState(params, row_counts, cell_counts, potential, jnp.asarray(accept_prob, jnp.float32), sizes, key)


def initial_state(problem: _Problem, rng_key, init_params=None, init_labels=None) -> BCMState:
    n_obs, n_features = problem.shape
    key_state, key_z, key_omega, key_proto, key_blocks = jax.random.split(rng_key, 5)
    if init_params is not None:
        params = {name: jnp.asarray(init_params[name], jnp.int32) for name in ("omega", "prototype", "z")}
        row_counts, cell_counts = _counts(problem, params["z"])
        return _finish(problem, key_state, params, row_counts, cell_counts)
    if init_labels is not None:
        z = jnp.broadcast_to(jnp.asarray(init_labels, jnp.int32)[:, None], (n_obs, n_features))
    else:
        z = jax.random.randint(key_z, (n_obs, n_features), 0, problem.n_clusters, jnp.int32)
    params = {
        "omega": jax.random.bernoulli(key_omega, problem.priors.q, (problem.n_clusters, n_features)).astype(jnp.int32),
        "prototype": jax.random.randint(key_proto, (problem.n_clusters,), 0, n_obs, jnp.int32),
        "z": z,
    }
    row_counts, cell_counts = _counts(problem, z)
    if init_labels is not None:  # start the subspaces and prototypes from the given clusters
        params = _omega_and_prototype_blocks(problem, key_blocks, params, cell_counts)
    return _finish(problem, key_state, params, row_counts, cell_counts)


def _token_concentrations(problem: _Problem, params):
    """g laid out for token lookups: per (feature, value) cell (P * V, S), and summed over values (P, S)."""
    concentration = _concentrations(problem, params)  # (S, P, V)
    return concentration.reshape(problem.n_clusters, -1).T, concentration.sum(-1).T


def _z_block(problem: _Problem, keys, params, row_counts, cell_counts):
    """All z_ij by eq. (1), one wrapped diagonal (independent tokens) at a time, for C chains at once:
    ``keys`` (C,) and the params and counts with a leading chain axis. A scan step updates one diagonal of
    every chain; the chains' count tables are stacked into one, so that a step makes one plain gather and
    one scatter per table (cheaper on CPU than the batched ones of ``vmap``)."""
    n_obs, n_features = problem.shape
    n_values, n_clusters = problem.mask.shape[1], problem.n_clusters
    n_chains = len(keys)
    rows, cols = problem.diagonal_rows, problem.diagonal_cols  # (M, L)
    chain = np.arange(n_chains)[:, None, None]

    def by_step(a):
        """(C, M, L) -> (M, C * L): the tokens of one scan step, chain-major."""
        return jnp.swapaxes(a, 0, 1).reshape(rows.shape[0], -1)

    # token rows, cells and columns as indices into the stacked (chain-major) tables
    row_index = by_step(rows + n_obs * chain)
    cell_index = by_step(cols * n_values + jnp.asarray(problem.x)[rows, cols] + n_features * n_values * chain)
    col_index = by_step(cols + n_features * chain)
    g_cells, g_totals = jax.vmap(lambda p: _token_concentrations(problem, p))(params)
    g_cells, g_totals = g_cells.reshape(-1, n_clusters), g_totals.reshape(-1, n_clusters)
    alpha_s = bcm.z_concentration(problem.priors, n_clusters)
    col_totals = cell_counts.reshape(n_chains * n_features, n_values, -1).sum(1)  # (C * P, S)
    uniforms = by_step(jax.vmap(lambda key: jax.random.uniform(key, rows.shape))(keys))
    z_old = by_step(params["z"][:, rows, cols])

    # Each diagonal holds every row (N <= P) or every column (N >= P) in order: no gather needed there.
    every_row, every_col = n_obs <= n_features, n_obs >= n_features

    def update_diagonal(carry, inputs):
        row_counts, cell_counts, col_totals = carry
        row, col, cell, old, u = inputs
        old_onehot = jax.nn.one_hot(old, n_clusters, dtype=jnp.int32)
        n_row = (row_counts if every_row else row_counts[row]) - old_onehot
        n_cell = cell_counts[cell] - old_onehot
        n_col = (col_totals if every_col else col_totals[col]) - old_onehot
        g_total = g_totals if every_col else g_totals[col]
        weight = (alpha_s + n_row) * (g_cells[cell] + n_cell) / (g_total + n_col)
        new = _inverse_cdf_draw(weight, u)
        delta = jax.nn.one_hot(new, n_clusters, dtype=jnp.int32) - old_onehot
        row_counts = row_counts + delta if every_row else row_counts.at[row].add(delta)
        col_totals = col_totals + delta if every_col else col_totals.at[col].add(delta)
        return (row_counts, cell_counts.at[cell].add(delta), col_totals), new

    carry = (row_counts.reshape(-1, n_clusters), cell_counts.reshape(-1, n_clusters), col_totals)
    (row_counts, cell_counts, _), z_new = jax.lax.scan(
        update_diagonal, carry, (row_index, col_index, cell_index, z_old, uniforms)
    )
    z_new = jnp.swapaxes(z_new.reshape(rows.shape[0], n_chains, -1), 0, 1)
    params = {**params, "z": params["z"].at[:, rows, cols].set(z_new)}
    return params, row_counts.reshape(n_chains, n_obs, -1), cell_counts.reshape(n_chains, -1, n_clusters)


def _inverse_cdf_draw(weight, u):
    """One category per row of the unnormalised weights (L, K): the first whose cumulative weight exceeds
    u * total, u (L,) uniform in [0, 1). The running sum is unrolled over the K (static) categories: on CPU
    this is much cheaper inside the z scan than a cumsum op."""
    cumulative = [weight[:, 0]]
    for k in range(1, weight.shape[1]):
        cumulative.append(cumulative[-1] + weight[:, k])
    target = u * cumulative[-1]
    draw = jnp.zeros(u.shape, jnp.int32)
    for below in cumulative[:-1]:
        draw = draw + (below < target)
    return draw


def _row_swap_block(problem: _Problem, keys, params, row_counts, cell_counts):
    """One Metropolis move per observation, visited in turn: swap two cluster labels on all its tokens.
    For C chains at once (``keys`` (C,), params and counts with a leading chain axis, count tables stacked
    as in :func:`_z_block`). Returns the new params, row counts, cell counts and the share of accepted
    moves per chain.

    For observation i, a is the cluster of one of its tokens drawn uniformly and b one of the other S - 1
    clusters drawn uniformly; the proposal sends the row's tokens in a to b and those in b to a. The
    reverse move has the same probability (n_ia + n_ib) / (P (S - 1)), and the row's factor of the target
    (pi_i integrated out) is unchanged by permuting its counts (all alpha/S equal), so the acceptance is
    min(1, p(z') / p(z)). Only the observation's tokens change cluster, at most one per feature, so
    log p(z') - log p(z) = sum over moved tokens of log w_new - log w_old with w_s = (g_sj(x_ij) +
    n_{s,.,j,x_ij}) / (sum_v g_sj(v) + n_{s,.,j,.}), counts without the token: the likelihood factor of eq. (1).
    """
    n_obs, n_features = problem.shape
    n_clusters, n_values = problem.n_clusters, problem.mask.shape[1]
    n_chains = len(keys)
    if n_clusters == 1:
        return params, row_counts, cell_counts, jnp.zeros(n_chains)
    g_cells, g_totals = jax.vmap(lambda p: _token_concentrations(problem, p))(params)
    col_totals = cell_counts.reshape(n_chains, n_features, n_values, -1).sum(2)  # (C, P, S)
    features = jnp.arange(n_features)
    chain = jnp.arange(n_chains)[:, None]
    # flat positions (C, P) of each feature's cell and column in chain c, before adding the cluster
    cells = (features * n_values + jnp.asarray(problem.x))[:, None, :] + n_features * n_values * chain  # (N, C, P)
    cols = (features + n_features * chain) * n_clusters

    def draws(key):
        key_token, key_shift, key_accept = jax.random.split(key, 3)
        return (
            jax.random.randint(key_token, (n_obs,), 0, n_features, jnp.int32),
            jax.random.randint(key_shift, (n_obs,), 1, n_clusters, jnp.int32),
            jnp.log(jax.random.uniform(key_accept, (n_obs,))),
        )

    # Each observation is visited once, in order: its z and row counts go through the scan as inputs and
    # come out as outputs; only the (flattened) cell counts and column totals are carried.
    token, shift, log_u = (draw.T for draw in jax.vmap(draws)(keys))  # (N, C) each
    inputs = (jnp.swapaxes(params["z"], 0, 1), jnp.swapaxes(row_counts, 0, 1), cells * n_clusters, token, shift, log_u)
    g_cells, g_totals = g_cells.reshape(-1), g_totals.reshape(-1)

    def move_row(carry, step):
        cell_counts, col_totals = carry
        z_row, row_count, row_cells, token, shift, log_u = step  # (C, P), (C, S), (C, P), (C,) x 3
        a = z_row.reshape(-1)[chain * n_features + token[:, None]]  # (C, 1)
        b = (a + shift[:, None]) % n_clusters
        in_a = z_row == a
        moves = in_a | (z_row == b)
        target = jnp.where(in_a, b, a)  # each moving token's cluster after the swap
        cell_now, cell_target = row_cells + z_row, row_cells + target
        col_now, col_target = cols + z_row, cols + target
        # w_target / w_now per token, the token left out of its current cluster's counts
        numerator = (g_cells[cell_target] + cell_counts[cell_target]) * (g_totals[col_now] + col_totals[col_now] - 1)
        denominator = (g_cells[cell_now] + cell_counts[cell_now] - 1) * (g_totals[col_target] + col_totals[col_target])
        accept = log_u < jnp.sum(jnp.where(moves, jnp.log(numerator / denominator), 0.0), -1)
        moved = (accept[:, None] & moves).astype(jnp.int32)
        change = jnp.concatenate([-moved, moved])  # out of the current cluster, into the target
        cell_counts = cell_counts.at[jnp.concatenate([cell_now, cell_target])].add(change)
        col_totals = col_totals.at[jnp.concatenate([col_now, col_target])].add(change)
        z_row = jnp.where(moved == 1, target, z_row)
        clusters = jnp.arange(n_clusters)
        count_a, count_b = (row_count.reshape(-1)[chain * n_clusters + s] for s in (a, b))
        swapped = jnp.where(clusters == a, count_b, jnp.where(clusters == b, count_a, row_count))
        return (cell_counts, col_totals), (z_row, jnp.where(accept[:, None], swapped, row_count), accept)

    carry = (cell_counts.reshape(-1), col_totals.reshape(-1))
    (cell_counts, _), (z, row_counts, accepted) = jax.lax.scan(move_row, carry, inputs)
    cell_counts = cell_counts.reshape(n_chains, -1, n_clusters)
    return {**params, "z": jnp.swapaxes(z, 0, 1)}, jnp.swapaxes(row_counts, 0, 1), cell_counts, accepted.mean(0)


def _log_polya_of_cells(problem: _Problem, omega, prototype_values, cells):
    """log B(g + n_sj) - log B(g) with g = g(prototype_values, omega) (the factor of cluster s and feature j
    with phi_sj integrated out), read from the log Gamma tables. ``omega`` and ``prototype_values`` broadcast
    to a shape (..., P) ending with the feature axis; ``cells`` (counts per value) to that shape + (V,)."""
    features = jnp.arange(problem.mask.shape[0])
    g_offsets = jnp.asarray(problem.g_offsets)[omega, features, prototype_values]  # (..., P, V)
    total_offsets = jnp.asarray(problem.g_total_offsets)[omega, features, prototype_values]  # (..., P)
    log_beta = _log_beta_from_table(jnp.asarray(problem.log_gamma_table), g_offsets, total_offsets, cells)
    return log_beta - jnp.asarray(problem.log_beta_prior)[omega, features, prototype_values]


def _omega_and_prototype_blocks(problem: _Problem, key, params, cell_counts):
    """omega by eq. (2), then the prototypes by their conditional, each block all at once; both are made of
    log B(g(v, b) + n_sj) - log B(g(v, b)) for prototype values v and omega values b."""
    key_omega, key_proto = jax.random.split(key)
    cells = _cells_by_cluster(problem, cell_counts)  # (S, P, V)
    prototype_values = jnp.asarray(problem.x)[params["prototype"]]  # (S, P)

    # eq. (2): the evidence of omega_sj = 0 and 1 at the current prototypes, (2, S, P)
    evidence = _log_polya_of_cells(problem, jnp.arange(2)[:, None, None], prototype_values, cells)
    log_odds = jnp.log(problem.priors.q) - jnp.log1p(-problem.priors.q) + evidence[1] - evidence[0]
    omega = (jnp.log(jax.random.uniform(key_omega, log_odds.shape)) < jax.nn.log_sigmoid(log_odds)).astype(jnp.int32)

    # T[s, j, v] = log B(g(v, omega_sj) + n_sj) - log B(g(v, omega_sj)): the prototype's terms if it had
    # value v on feature j; the score of observation i is sum_j T[s, j, x_ij].
    candidates = jnp.arange(problem.mask.shape[1])[:, None, None]  # (V, 1, 1)
    table = _log_polya_of_cells(problem, omega, candidates, cells).transpose(1, 2, 0)  # (S, P, V)
    table = jnp.where(problem.mask, table, 0.0)
    scores = problem.cell_indicators @ table.reshape(problem.n_clusters, -1).T  # (N, S)
    prototype = jax.random.categorical(key_proto, scores, axis=0).astype(jnp.int32)
    return {**params, "omega": omega, "prototype": prototype}


def sweep(problem: _Problem, state: BCMState) -> BCMState:
    """One sweep of one chain: all z (eq. (1)), a swap move per observation, all omega (eq. (2)), all
    prototypes."""
    states = sweep_chains(problem, jax.tree.map(lambda value: value[None], state))
    return jax.tree.map(lambda value: value[0], states)


def sweep_chains(problem: _Problem, states: BCMState) -> BCMState:
    """One sweep of C independent chains at once (every field of ``states`` with a leading chain axis);
    chain c gets exactly what :func:`sweep` would give it."""
    keys = jax.vmap(lambda key: jax.random.split(key, 4))(states.rng_key)
    key, key_z, key_rows, key_blocks = (keys[:, i] for i in range(4))
    params, row_counts, cell_counts = _z_block(problem, key_z, states.params, states.row_counts, states.cell_counts)
    params, row_counts, cell_counts, accepted = _row_swap_block(problem, key_rows, params, row_counts, cell_counts)
    params = jax.vmap(lambda k, p, c: _omega_and_prototype_blocks(problem, k, p, c))(key_blocks, params, cell_counts)
    return jax.vmap(lambda k, p, r, c, a: _finish(problem, k, p, r, c, a))(key, params, row_counts, cell_counts, accepted)
