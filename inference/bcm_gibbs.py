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
    prior_g: np.ndarray  # (2, P, V, V): g(v, b) over values, for omega b and prototype value v, 0 on padding
    log_beta_prior: np.ndarray  # (2, P, V): log B(prior_g) over the valid values

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
        log_beta_prior = np.asarray(bcm.log_multivariate_beta(prior_g, mask[:, None, :]))
    return _Problem(
        x, int(bound.arguments["n_clusters"]), priors, n_values, mask, rows, cols, indicators, prior_g, log_beta_prior
    )


class BCMGibbs(MCMCKernel):
    """Collapsed Gibbs sampler of :func:`interpretable_zoo.models.bcm.collapsed_model`.

    Run it with ``MCMC`` (or ``inference.mcmc.run_mcmc``) and model arguments ``(x, n_clusters)`` plus
    optional ``priors`` and ``n_values`` keywords. ``init_labels`` (N,) optionally starts every token of
    observation i in cluster ``init_labels[i]``, followed by one omega and one prototype update given
    those clusters; else z starts uniformly random, omega from its prior and the prototypes uniformly.
    ``init_params`` given to ``run`` ({"omega", "prototype", "z"}) override both.
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
        if self._init_labels is not None and self._init_labels.shape != (problem.shape[0],):
            raise ValueError(f"init_labels: expected shape ({problem.shape[0]},), got {self._init_labels.shape}")
        init_one = lambda key, params: initial_state(problem, key, params, self._init_labels)  # noqa: E731
        sweep_one = lambda state: sweep(problem, state)  # noqa: E731
        if is_prng_key(rng_key):
            self._sample_fn = sweep_one
            return jax.jit(init_one)(rng_key, init_params)
        self._sample_fn = jax.vmap(sweep_one)
        return jax.jit(jax.vmap(init_one, in_axes=(0, None if init_params is None else 0)))(rng_key, init_params)

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


def _z_block(problem: _Problem, key, params, row_counts, cell_counts):
    """All z_ij by eq. (1), one wrapped diagonal (independent tokens) at a time."""
    n_obs, n_features = problem.shape
    n_values = problem.mask.shape[1]
    rows, cols = problem.diagonal_rows, problem.diagonal_cols
    cells = cols * n_values + problem.x[rows, cols]  # (M, L) cell of each token
    g_cells, g_totals = _token_concentrations(problem, params)
    alpha_s = bcm.z_concentration(problem.priors, problem.n_clusters)
    col_totals = cell_counts.reshape(n_features, n_values, -1).sum(1)  # (P, S)
    uniforms = jax.random.uniform(key, rows.shape)
    z_old = params["z"][rows, cols]

    # Each diagonal holds every row (N <= P) or every column (N >= P) in order: no gather needed there.
    every_row, every_col = n_obs <= n_features, n_obs >= n_features

    def update_diagonal(carry, inputs):
        row_counts, cell_counts, col_totals = carry
        row, col, cell, old, u = inputs
        old_onehot = jax.nn.one_hot(old, problem.n_clusters, dtype=jnp.int32)
        n_row = (row_counts if every_row else row_counts[row]) - old_onehot
        n_cell = cell_counts[cell] - old_onehot
        n_col = (col_totals if every_col else col_totals[col]) - old_onehot
        g_total = g_totals if every_col else g_totals[col]
        weight = (alpha_s + n_row) * (g_cells[cell] + n_cell) / (g_total + n_col)
        cumulative = jnp.cumsum(weight, -1)
        new = jnp.sum(cumulative < u[:, None] * cumulative[:, -1:], -1).astype(jnp.int32)
        delta = jax.nn.one_hot(new, problem.n_clusters, dtype=jnp.int32) - old_onehot
        row_counts = row_counts + delta if every_row else row_counts.at[row].add(delta)
        col_totals = col_totals + delta if every_col else col_totals.at[col].add(delta)
        return (row_counts, cell_counts.at[cell].add(delta), col_totals), new

    (row_counts, cell_counts, _), z_new = jax.lax.scan(
        update_diagonal, (row_counts, cell_counts, col_totals), (rows, cols, cells, z_old, uniforms)
    )
    params = {**params, "z": params["z"].at[rows, cols].set(z_new)}
    return params, row_counts, cell_counts


def _row_swap_block(problem: _Problem, key, params, row_counts, cell_counts):
    """One Metropolis move per observation, visited in turn: swap two cluster labels on all its tokens.
    Returns the new params, row counts, cell counts and the share of accepted moves.

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
    if n_clusters == 1:
        return params, row_counts, cell_counts, jnp.zeros(())
    g_cells, g_totals = _token_concentrations(problem, params)
    col_totals = cell_counts.reshape(n_features, n_values, -1).sum(1)  # (P, S)
    cells = jnp.arange(n_features) * n_values + jnp.asarray(problem.x)  # (N, P)
    key_token, key_shift, key_accept = jax.random.split(key, 3)
    # Each observation is visited once, in order: its z and row counts go through the scan as inputs and
    # come out as outputs; only the cell counts are carried.
    inputs = (
        params["z"],
        row_counts,
        cells,
        jax.random.randint(key_token, (n_obs,), 0, n_features, jnp.int32),
        jax.random.randint(key_shift, (n_obs,), 1, n_clusters, jnp.int32),
        jnp.log(jax.random.uniform(key_accept, (n_obs,))),
    )

    def move_row(carry, step):
        cell_counts, col_totals = carry
        z_row, row_count, row_cells, token, shift, log_u = step
        a = z_row[token]
        b = (a + shift) % n_clusters
        in_a, in_b = z_row == a, z_row == b
        n_cells, g_row = cell_counts[row_cells], g_cells[row_cells]  # (P, S)

        def log_weight(s, own):
            """log w_s of each feature's token, without the token when it sits in s (own)."""
            return jnp.log(g_row[:, s] + n_cells[:, s] - own) - jnp.log(g_totals[:, s] + col_totals[:, s] - own)

        log_w_a, log_w_b = log_weight(a, in_a), log_weight(b, in_b)
        log_ratio = jnp.sum(jnp.where(in_a, log_w_b - log_w_a, 0.0) + jnp.where(in_b, log_w_a - log_w_b, 0.0))
        accept = log_u < log_ratio
        to_b = (accept & in_a).astype(jnp.int32) - (accept & in_b).astype(jnp.int32)  # +1 moves a -> b
        swap = jax.nn.one_hot(b, n_clusters, dtype=jnp.int32) - jax.nn.one_hot(a, n_clusters, dtype=jnp.int32)
        delta = to_b[:, None] * swap  # (P, S)
        z_row = jnp.where(accept & in_a, b, jnp.where(accept & in_b, a, z_row))
        row_count = row_count + jnp.where(accept, (row_count[a] - row_count[b]) * swap, 0)
        return (cell_counts.at[row_cells].add(delta), col_totals + delta), (z_row, row_count, accept)

    (cell_counts, _), (z, row_counts, accepted) = jax.lax.scan(move_row, (cell_counts, col_totals), inputs)
    return {**params, "z": z}, row_counts, cell_counts, accepted.mean()


def _omega_and_prototype_blocks(problem: _Problem, key, params, cell_counts):
    """omega by eq. (2), then the prototypes by their conditional, each block all at once.

    Both use log B(g(v, b) + n_sj) - log B(g(v, b)) for prototype values v and omega values b; the
    second term comes from the problem's precomputed ``log_beta_prior``.
    """
    n_features = problem.mask.shape[0]
    features = jnp.arange(n_features)
    key_omega, key_proto = jax.random.split(key)
    cells = _cells_by_cluster(problem, cell_counts)  # (S, P, V)
    prototype_values = jnp.asarray(problem.x)[params["prototype"]]  # (S, P)

    # eq. (2): g(p_sj, b) for b = 0, 1 at the current prototypes
    both = jnp.arange(2)[:, None, None]
    prior_g, log_beta_prior = jnp.asarray(problem.prior_g), jnp.asarray(problem.log_beta_prior)
    g_both = prior_g[both, features, prototype_values]  # (2, S, P, V)
    log_beta_both = log_beta_prior[both, features, prototype_values]  # (2, S, P)
    evidence = bcm.log_multivariate_beta(g_both + cells, problem.mask) - log_beta_both
    log_odds = jnp.log(problem.priors.q) - jnp.log1p(-problem.priors.q) + evidence[1] - evidence[0]
    omega = (jnp.log(jax.random.uniform(key_omega, log_odds.shape)) < jax.nn.log_sigmoid(log_odds)).astype(jnp.int32)

    # T[s, j, v] = log B(g(v, omega_sj) + n_sj) - log B(g(v, omega_sj)): the prototype's terms if it had
    # value v on feature j; the score of observation i is sum_j T[s, j, x_ij].
    concentration = prior_g[omega, features]  # (S, P, V candidate, V)
    table = bcm.log_multivariate_beta(concentration + cells[:, :, None, :], problem.mask[:, None, :])
    table = jnp.where(problem.mask, table - log_beta_prior[omega, features], 0.0)
    scores = problem.cell_indicators @ table.reshape(problem.n_clusters, -1).T  # (N, S)
    prototype = jax.random.categorical(key_proto, scores, axis=0).astype(jnp.int32)
    return {**params, "omega": omega, "prototype": prototype}


def sweep(problem: _Problem, state: BCMState) -> BCMState:
    """One sweep: all z (eq. (1)), a swap move per observation, all omega (eq. (2)), all prototypes."""
    key, key_z, key_rows, key_blocks = jax.random.split(state.rng_key, 4)
    params, row_counts, cell_counts = _z_block(problem, key_z, state.params, state.row_counts, state.cell_counts)
    params, row_counts, cell_counts, accepted = _row_swap_block(problem, key_rows, params, row_counts, cell_counts)
    params = _omega_and_prototype_blocks(problem, key_blocks, params, cell_counts)
    return _finish(problem, key, params, row_counts, cell_counts, accepted)
