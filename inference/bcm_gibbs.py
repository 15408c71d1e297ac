"""Exact collapsed Gibbs sampler for the Bayesian Case Model (pi and phi integrated out).

One sweep updates three blocks, each from its exact full conditional given the others:

1. the cluster indices z_ij, by eq. (1): p(z_ij = s) is proportional to
   (alpha/S + n_{s,i,not j}) (g_sj(x_ij) + n_{s,.,j,x_ij}) / (sum_v g_sj(v) + n_{s,.,j,.}), counts without
   the token itself. Two tokens in different rows and different columns share no count, so their joint
   conditional factorises: a set with at most one token per row and per column is updated at once,
   exactly. The N x P grid is covered by max(N, P) such "wrapped diagonals" of min(N, P) tokens, visited
   in a ``lax.scan`` (sequential over diagonals, vectorized inside one);
2. all omega_sj at once by eq. (2) (they are conditionally independent given z and the prototypes);
3. all prototypes at once (conditionally independent across clusters): log p(p_s = i) =
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
potential_energy: minus the log target; accept_prob: 1 (Gibbs); sorted_cluster_size: tokens per cluster,
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


def _finish(problem: _Problem, key, params, row_counts, cell_counts) -> BCMState:
    potential = -log_target(problem, params, row_counts, cell_counts)
    sizes = -jnp.sort(-row_counts.sum(0))
    return BCMState(params, row_counts, cell_counts, potential, jnp.ones(()), sizes, key)


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


def _z_block(problem: _Problem, key, params, row_counts, cell_counts):
    """All z_ij by eq. (1), one wrapped diagonal (independent tokens) at a time."""
    n_obs, n_features = problem.shape
    n_values = problem.mask.shape[1]
    rows, cols = problem.diagonal_rows, problem.diagonal_cols
    cells = cols * n_values + problem.x[rows, cols]  # (M, L) cell of each token
    concentration = _concentrations(problem, params)  # (S, P, V)
    g_cells = concentration.reshape(problem.n_clusters, -1).T  # (P * V, S)
    g_totals = concentration.sum(-1).T  # (P, S)
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
    """One Gibbs sweep: all z (eq. (1)), all omega (eq. (2)), all prototypes."""
    key, key_z, key_blocks = jax.random.split(state.rng_key, 3)
    params, row_counts, cell_counts = _z_block(problem, key_z, state.params, state.row_counts, state.cell_counts)
    params = _omega_and_prototype_blocks(problem, key_blocks, params, cell_counts)
    return _finish(problem, key, params, row_counts, cell_counts)
