"""Exact tempered collapsed Gibbs sampler for the Bayesian Case Model (pi and phi integrated out).

A replica at inverse temperature beta targets p(omega) p(prototype) p(z) p(x | z, omega, prototype)^beta,
where p(z) is the row term of ``models.bcm.collapsed_model`` (pi_i integrated out: a Polya term per
observation) and p(x | ...) its cell term (phi_sj integrated out, the ratio of eq. (2)); beta = 1 is the
posterior, beta = 0 the prior. :func:`step` runs four blocks, each leaving that target invariant: the
cluster indices z_ij by eq. (1) with the likelihood factor tempered (``_z_block``); a Metropolis-Hastings
move per observation that splits its tokens afresh between two clusters (``_row_resplit_block``), since
with alpha small eq. (1) almost never moves one token out of its observation's dominant cluster; on every
``split_merge_every``-th sweep (every sweep at a ladder's posterior rung), on the rungs where it pays
(:func:`learn_split_merge_rungs`), a restricted-Gibbs split-merge move over k clusters (Jain and Neal 2004,
:func:`split_merge_proposal`); and the prototypes and omega of every cluster jointly from their tempered
conditional given z, omega by eq. (2) (``_prototypes_and_omega_block``). The last two read every
log B(g + n) from a table of log Gamma(a + n), n = 0..N, built once per target (:func:`likelihood_tables`),
and a tempered z sweep reads its powers (g + n)^beta from a table built per replica from log(a + n).

Interface (the tempering engine's target kernel): :func:`make_target` turns the model arguments into a
hashable :class:`BCMStatic` (shapes and switches) and a :class:`BCMData` pytree (observations and every
prior or likelihood table, so that a refit of the same shapes compiles nothing); :func:`init` draws one
replica's start from the prior, :func:`step` advances a batch of replicas with their own inverse
temperatures, :func:`summaries` gives label-free scalars, and :func:`learn_split_merge_rungs` /
:func:`with_split_merge_rungs` keep the split-merge move to the rungs where it paid. :class:`BCMGibbs`
wraps the same functions (beta = 1) as a NumPyro ``MCMCKernel``. The path starts at the prior, not at a
reference learned from the chains as BRL's does: a learned reference lowered the barrier but not the
mixing, which the local moves at the cold rungs limit (docs/decisions/bcm-sampler.md). Hyperparameters,
g, the priors of omega and the prototypes and the Beta-function terms come from
``interpretable_zoo.models.bcm``; log_prior + log_likelihood equals ``log_density(collapsed_model)``
(tested).
"""

from __future__ import annotations

import inspect
import itertools
from collections import namedtuple
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jax.scipy.special import gammaln, logsumexp
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from interpretable_zoo import compiled_hooks
from interpretable_zoo.inference import hyperpriors
from interpretable_zoo.models import bcm

RESPLIT_TILTS = np.arange(-12.0, 13.0, 2.0)
"""The tilts lambda of the observation re-split proposal (``_row_resplit_block``): token j goes to b with
probability sigmoid(l_j + lambda). Symmetric about 0, so that the proposal is the same whichever of the two
clusters is a; spaced so that some tilt puts the expected split near any m when the l_j are spread."""
DEFAULT_SPLIT_MERGE_CLUSTERS = 3
"""The split-merge move's k. With k = 3 one move merges two clusters and splits a third. k = 2 costs half
as much per proposal but did not mix better per second (docs/decisions/bcm-sampler.md)."""
DEFAULT_LAUNCH_SCANS = 2
DEFAULT_SPLIT_MERGE_EVERY = 4
"""Sweeps per split-merge move, which costs about four sweeps of the other blocks. Every fourth sweep mixed
better per second than every sweep, every eighth or none (docs/decisions/bcm-sampler.md)."""
LADDER_POSTERIOR_SPLIT_MERGE_EVERY = 1
"""Sweeps per split-merge move at the posterior's rung of a tempered ladder (``fit_bcm``). That rung's draws
are the ones kept, the move is what carries groups of similar observations between clusters there, and
its moves are 1/K of the ladder's. On the recipes it mixed better per second than every fourth sweep
(docs/decisions/bcm-sampler.md)."""


def fit_options(tempered: bool, platform: str) -> dict:
    """The split-merge options of :func:`make_target` for a fit on devices of ``platform`` ("cpu", "gpu",
    ...): on a tempered ladder the move runs on every sweep at the posterior's rung
    (:data:`LADDER_POSTERIOR_SPLIT_MERGE_EVERY`), and on the CPU replica by replica
    (``BCMStatic.split_merge_in_turn``), so that the rungs left out cost nothing. An accelerator runs a
    batch's replicas side by side, so there one masked batch costs about one replica's move, and a loop of
    n due replicas n times that. A fit of one rung keeps the defaults. Both forms draw the same."""
    if not tempered:
        return {}
    return {"split_merge_in_turn": platform == "cpu", "split_merge_posterior_every": LADDER_POSTERIOR_SPLIT_MERGE_EVERY}


class BCMStatic(NamedTuple):
    """Shapes and switches of a BCM target (hashable; equal for two fits of the same shapes).

    split_merge_clusters: k, the number of clusters the split-merge move re-partitions (0: no move);
    launch_scans: restricted Gibbs scans building its launch state; split_merge_every: the move runs on
    the sweeps whose count (``BCMTargetState.sweeps``) is a multiple of it; split_merge_posterior_every: the
    same for the replicas at beta = 1 (a ladder's posterior rung); split_merge_in_turn: the step
    runs the move replica by replica over those due (a tempered ladder on the CPU, where it runs on some
    rungs only: ``_split_merge_where_due``), else as one batch over all replicas, masked (cheaper when all
    are due, and on an accelerator: :func:`fit_options`);
    power_table: the tempered z sweep reads w ** beta from a table per replica (``_z_block``,
    :func:`power_table_pays`).
    """

    n_obs: int  # rows of x, padding rows included (make_target's padded_rows)
    n_features: int
    n_values: int  # V = max_j V_j
    n_clusters: int
    split_merge_clusters: int
    launch_scans: int
    split_merge_every: int
    split_merge_in_turn: bool = False
    power_table: bool = False
    split_merge_posterior_every: int = DEFAULT_SPLIT_MERGE_EVERY


class BCMData(NamedTuple):
    """Everything of a BCM target that is an array: the data and the prior and likelihood tables.

    Index conventions: b the value of omega_sj, v a prototype value, u a candidate value of x_ij.
    """

    x: jax.Array  # (N, P) int32 codes, 0 on padding rows
    observed: jax.Array  # (N,) True on the observations, False on padding rows (make_target's padded_rows)
    value_mask: jax.Array  # (P, V) True where v < V_j
    cell_indicators: jax.Array  # (N, P * V) 1 at column j * V + x_ij: sums over a (P * V) table
    diagonal_rows: jax.Array  # (M, L) row of each token of each wrapped diagonal
    diagonal_cols: jax.Array  # (M, L)
    g_values: jax.Array  # (2, P, V, V) g(v, b)(u) of feature j, 0 on padded u
    log_gamma_table: jax.Array  # (A * (N + 1),) log Gamma(a + n), n = 0..N, over A concentrations a
    log_count_table: jax.Array  # (A * (N + 1),) log(a + n), same layout (0 on the padding row)
    g_offsets: jax.Array  # (2, P, V, V) int32 offsets of g(v, b)(u) into log_gamma_table
    g_total_offsets: jax.Array  # (2, P, V) int32 offsets of sum_u g(v, b)(u)
    log_beta_prior: jax.Array  # (2, P, V) log B(g(v, b)) over the valid values
    omega_log_prob: jax.Array  # (S, P, 2) log p(omega_sj = b), from models.bcm.omega_distribution
    prototype_log_prob: jax.Array  # (S, N) log p(p_s = i), from models.bcm.prototype_distribution; -inf on padding
    pi_concentration: jax.Array  # (S,) Dirichlet concentration of pi_i, models.bcm.z_concentration
    split_merge_max_beta: jax.Array  # () the split-merge move runs at inverse temperatures up to this, and
    split_merge_posterior: jax.Array  # () at beta = 1 if True (learn_split_merge_rungs; 1 and True: every rung)


class BCMTargetState(NamedTuple):
    """One replica (or, in :func:`step`, a batch of replicas along a leading axis).

    z (N, P), omega (S, P), prototype (S,) int32; row_counts (N, S) tokens of observation i in cluster s;
    cell_counts (P * V, S) tokens of feature j with value v in cluster s (row j * V + v); the tokens of
    padding rows (``BCMData.observed`` False) are in no count and never change cluster; log_prior =
    log p(omega) + log p(prototype) + log p(z) and log_likelihood = log p(x | z, omega, prototype), both
    normalised; sweeps: the sweeps run from this state's start (int32), which pick those with a
    split-merge move.
    """

    z: jax.Array
    omega: jax.Array
    prototype: jax.Array
    row_counts: jax.Array
    cell_counts: jax.Array
    log_prior: jax.Array
    log_likelihood: jax.Array
    sweeps: jax.Array


class BCMInfo(NamedTuple):
    """What a :func:`step` did, per replica: resplit_moved, the share of observations whose tokens the
    re-split move moved; split_merge_accepted, 1.0 if the split-merge move was accepted, 0.0 if rejected,
    NaN on a sweep that does not run it."""

    resplit_moved: jax.Array
    split_merge_accepted: jax.Array


def _wrapped_diagonals(n_obs: int, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices (M, L) of M = max(N, P) token sets, each with one token per row and per
    column at most (L = min(N, P) tokens), together covering every (i, j) exactly once."""
    offsets = np.arange(max(n_obs, n_features))[:, None]
    short = np.arange(min(n_obs, n_features))[None, :]
    if n_obs >= n_features:
        return ((short + offsets) % n_obs).astype(np.int32), np.broadcast_to(short, (n_obs, n_features)).astype(np.int32)
    return np.broadcast_to(short, (n_features, n_obs)).astype(np.int32), ((short + offsets) % n_features).astype(np.int32)


def _check_codes(x, n_values):
    """x as an (N, P) int32 array (NumPy, or a traced JAX array) and n_values (P,), checked."""
    if isinstance(x, jax.core.Tracer):
        if n_values is None:
            raise ValueError("n_values: required when x is a traced array")
        return x.astype(jnp.int32), np.asarray(n_values, np.int64)
    x = np.asarray(x)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"x: expected a non-empty (observations x features) matrix, got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.integer) or x.min() < 0:
        raise ValueError("x: expected non-negative integer category codes")
    n_values = bcm.resolve_n_values(x, n_values)
    if n_values.shape != (x.shape[1],) or np.any(n_values <= x.max(0)):
        raise ValueError(f"n_values: expected {x.shape[1]} counts, each above the feature's largest code")
    return x.astype(np.int32), n_values


def _log_gamma_offsets(n_values: np.ndarray, n_obs: int):
    """Offsets into the log Gamma table of :func:`likelihood_tables`, which depend on V, the values per
    feature and N only: its rows are g(v, b)(u) for every (b, v, u), then the partial sums
    sum_{u <= k} g(v, b)(u) for every (b, v, k), then a row of zeros for padded values (they add nothing to
    log B), each row log Gamma(row + n) for n = 0..N. Returns the (2, P, V, V) offsets of g(v, b)(u) and the
    (2, P, V) offsets of sum_u g(v, b)(u) over the feature's valid values."""
    n_vals = int(n_values.max())
    padding_row = 4 * n_vals * n_vals
    entry = np.arange(2 * n_vals * n_vals).reshape(2, 1, n_vals, n_vals)
    valid = bcm.value_mask(n_values)[None, :, None, :]  # (1, P, 1, V)
    g_rows = np.where(valid, entry, padding_row)
    total_rows = 2 * n_vals * n_vals + entry[..., 0][:, :, :, None] + (n_values - 1)[None, None, None, :]  # (2, 1, V, P)
    total_rows = np.moveaxis(total_rows, -1, 1)[:, :, 0]  # (2, P, V)
    return (g_rows * (n_obs + 1)).astype(np.int32), (total_rows * (n_obs + 1)).astype(np.int32)


def likelihood_tables(g, mask, n_obs: int, g_offsets, g_total_offsets, xp=np):
    """The tables of :class:`BCMData` that g (2, V, V) over (b, v, u) determines: g_values (2, P, V, V),
    the flat log Gamma table (layout of ``_log_gamma_offsets``), the flat table of log(a + n) in the same
    layout (the log of eq. (1)'s likelihood factor's numerator and denominator, ``_z_block``) and
    log_beta_prior (2, P, V). ``xp``: numpy (float64, once per target) or jax.numpy (traced, rebuilt from a
    sampled lam or c)."""
    gammaln_of = scipy.special.gammaln if xp is np else gammaln
    concentrations = xp.concatenate([g.ravel(), xp.cumsum(g, -1).ravel(), xp.zeros(1)])
    padding = (xp.arange(concentrations.shape[0]) == concentrations.shape[0] - 1)[:, None]
    shifted = concentrations[:, None] + xp.arange(n_obs + 1)
    table = xp.where(padding, 0.0, gammaln_of(shifted)).ravel()
    log_count_table = xp.where(padding, 0.0, xp.log(xp.where(padding, 1.0, shifted))).ravel()
    g_values = xp.where(mask[None, :, None, :], g[:, None], 0.0)
    log_beta_prior = _log_beta_from_table(table, g_offsets, g_total_offsets, xp.zeros_like(g_offsets))
    return g_values, table, log_count_table, log_beta_prior


def _table_entries(n_obs: int, n_vals):
    """Entries of the flat tables of :func:`likelihood_tables`: 4 V^2 + 1 concentrations x (N + 1) counts."""
    return (4 * n_vals**2 + 1) * (n_obs + 1)


def memory_bytes(n_obs: int, n_values, n_clusters: int, n_replicas: int, tables_per_replica: bool = False) -> float:
    """Estimated peak bytes of a target's value tables and of one :func:`step` of ``n_replicas`` replicas,
    before anything is allocated; V = max_j V_j. The log Gamma table of :func:`likelihood_tables` holds
    4 V^2 + 1 concentrations x (N + 1) counts, built in float64 next to its argument; the (2, P, V, V) g
    tables and offsets take about 48 bytes per entry while built; a replica's step gathers float32 terms
    over (2, V, S, P, V) for the prototypes and omega and (2, V, k, P, V) for the split-merge evidence.
    ``tables_per_replica``: each replica rebuilds the log Gamma table and g tables in float32 (a sampled
    lam or c). A tempered sweep's table of powers (:func:`power_table_pays`) is counted per replica."""
    n_values = np.asarray(n_values, np.float64)
    n_vals, n_features = float(n_values.max()), len(n_values)
    k = min(DEFAULT_SPLIT_MERGE_CLUSTERS, n_clusters) if n_clusters >= 2 else 0
    log_gamma = 16 * _table_entries(n_obs, n_vals)
    g_tables = 48 * 2 * n_features * n_vals**2
    per_replica = _step_gather_bytes(n_features, n_vals, n_clusters, k)
    if power_table_pays(n_obs, n_features, n_vals, n_clusters):
        per_replica += 4 * _table_entries(n_obs, n_vals)
    if tables_per_replica:
        per_replica += (log_gamma + g_tables) / 4
    return log_gamma + g_tables + n_replicas * per_replica


def _step_gather_bytes(n_features, n_vals, n_clusters: int, split_merge_clusters: int) -> float:
    """Bytes of a replica's step's float32 gathers over (2, V, S + k, P, V) (see :func:`memory_bytes`)."""
    return 8 * n_features * n_vals**2 * (n_clusters + split_merge_clusters)


STEP_TEMPORARY_STATES = 9
"""A replica's :func:`step` holds temporaries of at most about this many of its states, besides its gathers
over features x values, which grow with V^2 (``_step_gather_bytes``). Measured by XLA's memory
analysis of the compiled scans: 4.6-8.5 states over nine shapes from 60 x 6 to 700 x 256 observations x
features and 2 to 32 clusters (two of them checked in tests/test_bcm_fit.py)."""


def state_bytes(static: BCMStatic) -> int:
    """Bytes of one replica's :class:`BCMTargetState`."""
    n, p, v, s = static.n_obs, static.n_features, static.n_values, static.n_clusters
    return 4 * (n * p + s * p + s + n * s + p * v * s + 3)


def scratch(static: BCMStatic) -> tuple[int, str, None]:
    """The memory of a replica's :func:`step` beyond its state (for the run's memory estimate)."""
    n_bytes = STEP_TEMPORARY_STATES * state_bytes(static) + _step_gather_bytes(
        static.n_features, static.n_values, static.n_clusters, static.split_merge_clusters
    ) + static.power_table * 4 * _table_entries(static.n_obs, static.n_values)
    return int(n_bytes), f"the step's work over {static.n_features} features x {static.n_values} values", None


def _log_beta_from_table(table, g_offsets, total_offsets, counts):
    """log B(g + n) over the last (value) axis from the log Gamma table: ``g_offsets`` (..., V) and
    ``total_offsets`` (...) locate g and its sum, ``counts`` n broadcasts to (..., V)."""
    return table[g_offsets + counts].sum(-1) - table[total_offsets + counts.sum(-1)]


def hook_tables(priors: bcm.Priors, n_obs: int, n_features: int, n_clusters: int, n_vals: int):
    """From the model's hooks: g (2, V, V) of values v, u (:func:`~interpretable_zoo.models.bcm.g`), omega_log_prob (S, P, 2) and
    prototype_log_prob (S, N) over all N rows (:func:`over_observations` keeps the observations'); the
    distributions' shapes are checked as they are traced."""
    values = np.arange(n_vals)
    g = jnp.broadcast_to(bcm.g(values[None, :], np.arange(2)[:, None], values, priors), (2, n_vals, n_vals))
    omega_prior = bcm.omega_distribution(priors, n_clusters, n_features)
    if omega_prior.batch_shape != (n_clusters, n_features) or omega_prior.event_shape != ():
        raise ValueError(
            "omega_distribution: expected independent cells, batch shape (S, P) and event shape (), got "
            f"{omega_prior.batch_shape} and {omega_prior.event_shape}"
        )
    omega_log_prob = jnp.stack([omega_prior.log_prob(jnp.full((n_clusters, n_features), b)) for b in (0, 1)], -1)
    prototype_prior = bcm.prototype_distribution(priors, n_obs, n_clusters)
    if prototype_prior.batch_shape != (n_clusters,) or prototype_prior.event_shape != ():
        raise ValueError(
            "prototype_distribution: expected independent clusters, batch shape (S,) and event shape (), got "
            f"{prototype_prior.batch_shape} and {prototype_prior.event_shape}"
        )
    return g, omega_log_prob, prototype_prior.log_prob(jnp.arange(n_obs)[:, None]).T


def over_observations(prototype_log_prob, observed, xp=np):
    """The prototypes' prior (S, N) over the observations alone: ``prototype_log_prob`` (S, N) of
    :func:`hook_tables` over all N rows, -inf on the padding rows (``observed`` (N,) False), which so are
    never a prototype, and renormalised over the observations. Without padding it is the hook's table. With
    padding it equals the hook's distribution over the observations exactly when the hook's logits of
    observation i do not depend on the number of rows (as the paper's uniform prior, sec. 3); the fit-time
    check (``target_check.check_bcm``, on a padded miniature) refuses an edited hook whose logits do. The
    number of observations enters as data (``observed``), so that targets of different N padded to one size
    share their compiled programs. ``xp``: numpy (once per target) or jax.numpy (traced)."""
    logsumexp_of = scipy.special.logsumexp if xp is np else logsumexp
    kept = xp.where(observed, prototype_log_prob, -xp.inf)
    return kept - logsumexp_of(kept, -1, keepdims=True)


def _prior_tables(priors: bcm.Priors, observed: np.ndarray, n_features: int, n_clusters: int, n_vals: int):
    """g, omega_log_prob, prototype_log_prob (:func:`hook_tables`, one compiled program per number of rows,
    then :func:`over_observations`) and pi_concentration (S,), checked to be distributions over what they
    describe."""
    g, omega_log_prob, prototype_log_prob = (
        np.asarray(table, np.float64)
        for table in compiled_hooks.evaluate(bcm, hook_tables, priors, len(observed), n_features, n_clusters, n_vals)
    )
    if not np.allclose(np.logaddexp(omega_log_prob[..., 0], omega_log_prob[..., 1]), 0.0, atol=1e-5):
        raise ValueError("omega_distribution: must put all its mass on omega in {0, 1} (a Bernoulli per cell)")
    if not np.allclose(scipy.special.logsumexp(prototype_log_prob, -1), 0.0, atol=1e-5):
        raise ValueError("prototype_distribution: must put all its mass on the observations 0..N-1")
    with np.errstate(divide="ignore", invalid="ignore"):
        prototype_log_prob = over_observations(prototype_log_prob, observed)
    if np.isnan(prototype_log_prob).any():  # -inf - -inf: no mass on any observation
        raise ValueError("prototype_distribution: must put some mass on the observations of every cluster")
    pi_concentration = np.asarray(bcm.z_concentration(priors, n_clusters), np.float64)
    if pi_concentration.shape != (n_clusters,) or not np.all(pi_concentration > 0):
        raise ValueError(f"z_concentration: expected {n_clusters} positive values, got {pi_concentration!r}")
    return g, omega_log_prob, prototype_log_prob, pi_concentration


@partial(jax.jit, static_argnums=1)
def _cell_indicators(x, n_vals: int):
    """(N, P V) float: 1 at column p V + x[n, p] of row n."""
    n_obs, n_features = x.shape
    cells = jnp.arange(n_features) * n_vals + x
    return jnp.zeros((n_obs, n_features * n_vals)).at[jnp.arange(n_obs)[:, None], cells].set(1.0)


def make_target(
    x,
    n_clusters: int,
    priors: bcm.Priors | None = None,
    n_values=None,
    *,
    split_merge_clusters: int = DEFAULT_SPLIT_MERGE_CLUSTERS,
    launch_scans: int = DEFAULT_LAUNCH_SCANS,
    split_merge_every: int = DEFAULT_SPLIT_MERGE_EVERY,
    split_merge_in_turn: bool = False,
    padded_rows: int | None = None,
    power_table: bool | None = None,
    split_merge_posterior_every: int | None = None,
) -> tuple[BCMStatic, BCMData]:
    """The target of :func:`~interpretable_zoo.models.bcm.collapsed_model` (arguments as there) as (static, data).

    ``x`` may be a traced array (e.g. under ``jax.vmap`` over data sets) when ``n_values`` is given.
    ``split_merge_clusters``: k of the split-merge move (at most S; 0 turns it off); ``launch_scans``: its
    restricted Gibbs scans before the proposal; ``split_merge_every``: sweeps per move (1: every sweep);
    ``split_merge_posterior_every``: sweeps per move of the replicas at beta = 1 (None: ``split_merge_every``);
    ``split_merge_in_turn``: as in :class:`BCMStatic` (the same draws either way). A fit's choice of both:
    :func:`fit_options`.
    ``padded_rows``: x is padded with inert rows up to that many (at least N), so that targets of different
    N padded to one size share the compiled programs; the target over the observations is unchanged: the
    padding rows' tokens are in no count and never move, their rows are never a prototype
    (:func:`over_observations`), and they add nothing to the log terms. ``power_table``: as in
    :class:`BCMStatic` (draws equal to float rounding either way); None where :func:`power_table_pays`."""
    if priors is not None and not isinstance(priors, bcm.Priors):
        raise ValueError(f"priors: expected interpretable_zoo.models.bcm.Priors, got {type(priors).__name__}")
    priors = priors or bcm.Priors()
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, (int, np.integer)) or n_clusters < 1:
        raise ValueError(f"n_clusters: expected a positive integer, got {n_clusters!r}")
    if split_merge_posterior_every is None:
        split_merge_posterior_every = split_merge_every
    for name, value, least in (("split_merge_clusters", split_merge_clusters, 0), ("launch_scans", launch_scans, 0),
                               ("split_merge_every", split_merge_every, 1),
                               ("split_merge_posterior_every", split_merge_posterior_every, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name}: expected an integer >= {least}, got {value!r}")
    x, n_values = _check_codes(x, n_values)
    n_real, n_features = x.shape
    n_obs = n_real if padded_rows is None else padded_rows
    if isinstance(n_obs, bool) or not isinstance(n_obs, (int, np.integer)) or n_obs < n_real:
        raise ValueError(f"padded_rows: expected an integer >= the {n_real} observations, got {padded_rows!r}")
    n_obs = int(n_obs)
    x = (jnp if isinstance(x, jax.core.Tracer) else np).pad(x, ((0, n_obs - n_real), (0, 0)))
    observed = np.arange(n_obs) < n_real
    n_clusters = int(n_clusters)
    n_vals = int(n_values.max())
    mask = bcm.value_mask(n_values)
    g, omega_log_prob, prototype_log_prob, pi_concentration = _prior_tables(priors, observed, n_features, n_clusters,
                                                                            n_vals)
    g_offsets, g_total_offsets = _log_gamma_offsets(n_values, n_obs)
    g_values, table, log_count_table, log_beta_prior = likelihood_tables(g, mask, n_obs, g_offsets, g_total_offsets)
    rows, cols = _wrapped_diagonals(n_obs, n_features)
    k = min(int(split_merge_clusters), n_clusters)
    if power_table is None:
        power_table = power_table_pays(n_obs, n_features, n_vals, n_clusters)
    static = BCMStatic(n_obs, n_features, n_vals, n_clusters, k if k >= 2 else 0, int(launch_scans),
                       int(split_merge_every), bool(split_merge_in_turn), bool(power_table),
                       int(split_merge_posterior_every))
    data = BCMData(
        x=jnp.asarray(x, jnp.int32),
        observed=jax.device_put(observed),
        value_mask=jax.device_put(mask),
        cell_indicators=_cell_indicators(x, n_vals),
        diagonal_rows=jax.device_put(rows),
        diagonal_cols=jax.device_put(cols),
        g_values=jax.device_put(g_values),
        log_gamma_table=jax.device_put(table),
        log_count_table=jax.device_put(log_count_table),
        g_offsets=jax.device_put(g_offsets),
        g_total_offsets=jax.device_put(g_total_offsets),
        log_beta_prior=jax.device_put(log_beta_prior),
        omega_log_prob=jax.device_put(omega_log_prob),
        prototype_log_prob=jax.device_put(prototype_log_prob),
        pi_concentration=jax.device_put(pi_concentration),
        split_merge_max_beta=jax.device_put(np.float32(1.0)),
        split_merge_posterior=jax.device_put(np.bool_(True)),
    )
    return static, data


def target_from_model_args(model_args, model_kwargs, **options) -> tuple[BCMStatic, BCMData]:
    """:func:`make_target` from the arguments of ``collapsed_model``, bound exactly as the model binds them."""
    bound = inspect.signature(bcm.collapsed_model).bind(*model_args, **(model_kwargs or {}))
    bound.apply_defaults()
    arguments = bound.arguments
    if arguments["priors"] is not None:
        hyperpriors.refuse_hyperpriors(arguments["priors"], "BCMGibbs (a NumPyro kernel)",
                                       "fit_bcm samples q, alpha, lam and c within the chain")
    return make_target(arguments["x"], arguments["n_clusters"], arguments["priors"], arguments["n_values"], **options)


# ----------------------------------------------------------------------------------------------------------
# counts and the log target


def token_counts(static: BCMStatic, data: BCMData, z):
    """Row counts (N, S) and cell counts (P * V, S) of the assignments z (N, P), padding rows left out."""
    tokens = jax.nn.one_hot(z, static.n_clusters, dtype=jnp.int32) * data.observed[:, None, None]  # (N, P, S)
    cells = jnp.arange(static.n_features) * static.n_values + data.x  # (N, P)
    cell_counts = jnp.zeros((static.n_features * static.n_values, static.n_clusters), jnp.int32).at[cells].add(tokens)
    return tokens.sum(1), cell_counts


def cells_by_cluster(static: BCMStatic, cell_counts):
    """(P * V, S) cell counts as (S, P, V)."""
    return cell_counts.T.reshape(static.n_clusters, static.n_features, static.n_values)


def _log_polya_of_cells(data: BCMData, omega, prototype_values, cells):
    """log B(g + n_sj) - log B(g) with g = g(prototype value, omega) (the factor of cluster s and feature j
    with phi_sj integrated out, eq. (2)), read from the log Gamma table. ``omega`` and
    ``prototype_values`` broadcast to a shape (..., P) ending with the feature axis; ``cells`` (counts per
    value) to that shape + (V,)."""
    features = jnp.arange(data.g_offsets.shape[1])
    g_offsets = data.g_offsets[omega, features, prototype_values]  # (..., P, V)
    total_offsets = data.g_total_offsets[omega, features, prototype_values]  # (..., P)
    log_beta = _log_beta_from_table(data.log_gamma_table, g_offsets, total_offsets, cells)
    return log_beta - data.log_beta_prior[omega, features, prototype_values]


def log_row_term(pi_concentration, row_counts):
    """log p(z) with pi integrated out: sum_i log B(a + n_i) - log B(a), a = pi_concentration (S,). A row
    without tokens (a padding row) adds exactly 0."""
    a = pi_concentration
    per_row = jnp.sum(gammaln(a + row_counts) - gammaln(a), -1) - (gammaln(a.sum() + row_counts.sum(-1)) - gammaln(a.sum()))
    return jnp.sum(per_row)


def log_target_parts(static: BCMStatic, data: BCMData, omega, prototype, row_counts, cell_counts):
    """(log_prior, log_likelihood) of one replica: log p(omega) + log p(prototype) + log p(z), and
    log p(x | z, omega, prototype) = sum_sj log B(g_sj + n_sj) - log B(g_sj)."""
    cells = data.omega_log_prob[jnp.arange(static.n_clusters)[:, None], jnp.arange(static.n_features), omega]
    log_prior = cells.sum() + data.prototype_log_prob[jnp.arange(static.n_clusters), prototype].sum()
    log_prior = log_prior + log_row_term(data.pi_concentration, row_counts)
    log_likelihood = _log_polya_of_cells(data, omega, data.x[prototype], cells_by_cluster(static, cell_counts)).sum()
    return log_prior, log_likelihood


def state_from_params(static: BCMStatic, data: BCMData, omega, prototype, z) -> BCMTargetState:
    """The replica state of the given omega (S, P), prototype (S,) and z (N, P), counts and log terms computed."""
    omega, prototype, z = (jnp.asarray(value, jnp.int32) for value in (omega, prototype, z))
    row_counts, cell_counts = token_counts(static, data, z)
    return _with_log_terms(static, data, z, omega, prototype, row_counts, cell_counts, jnp.zeros((), jnp.int32))


def _with_log_terms(static, data, z, omega, prototype, row_counts, cell_counts, sweeps):
    log_prior, log_likelihood = log_target_parts(static, data, omega, prototype, row_counts, cell_counts)
    return BCMTargetState(z, omega, prototype, row_counts, cell_counts, log_prior, log_likelihood, sweeps)


def init(static: BCMStatic, data: BCMData, key) -> BCMTargetState:
    """One replica drawn from the prior: omega and the prototypes from their prior distributions,
    pi_i ~ Dirichlet(a) and z_ij ~ Categorical(pi_i) (the row term of ``collapsed_model`` with pi drawn)."""
    key_omega, key_prototype, key_pi, key_z = jax.random.split(key, 4)
    omega = jax.random.categorical(key_omega, data.omega_log_prob).astype(jnp.int32)
    prototype = jax.random.categorical(key_prototype, data.prototype_log_prob).astype(jnp.int32)
    log_pi = jax.random.loggamma(key_pi, jnp.broadcast_to(data.pi_concentration, (static.n_obs, static.n_clusters)))
    z = jax.random.categorical(key_z, log_pi[:, None, :], shape=(static.n_obs, static.n_features)).astype(jnp.int32)
    return state_from_params(static, data, omega, prototype, z)


def summaries(static: BCMStatic, data: BCMData, states: BCMTargetState) -> dict:
    """Label-free scalars per replica, each (B,): ``cluster_size_0`` .. ``cluster_size_{S-1}`` (tokens per
    cluster, largest first) and ``n_subspace_features`` (active omega_sj)."""
    sizes = -jnp.sort(-states.row_counts.sum(-2), axis=-1)
    result = {f"cluster_size_{s}": sizes[..., s] for s in range(static.n_clusters)}
    result["n_subspace_features"] = states.omega.sum((-2, -1))
    return result


def pointwise_log_likelihood(static: BCMStatic, data: BCMData, states: BCMTargetState):
    """(B, N) float32: ``log p(x_i | z_i, omega, prototypes, x_-i, z_-i)`` of every observation i, phi integrated
    out (eq. (2)) given the other observations' tokens: sum over features j of
    log (g_sj(x_ij) + n_sj(x_ij) - 1) - log (sum_v g_sj(v) + n_sj - 1), s = z_ij (observation i holds one
    token of each feature). Each term conditions on every other observation (what PSIS-LOO needs), so
    their sum is a pseudo-likelihood, not the collapsed likelihood log p(x | z, omega, prototypes). 0 on
    padding rows."""
    features = jnp.arange(static.n_features)

    def one(state):
        posterior = data.g_values[state.omega, features, data.x[state.prototype]] + cells_by_cluster(
            static, state.cell_counts
        )  # (S, P, V)
        own = posterior[state.z, features, data.x]  # (N, P)
        total = posterior.sum(-1)[state.z, features]
        terms = jnp.where(data.observed[:, None], jnp.log(own - 1) - jnp.log(total - 1), 0.0)
        return terms.sum(-1).astype(jnp.float32)

    return jax.vmap(one)(states)


# ----------------------------------------------------------------------------------------------------------
# block 1: z by eq. (1), and block 2: whole-observation re-splits, for all replicas over stacked count tables


def _token_concentrations(static: BCMStatic, data: BCMData, omega, prototype):
    """g laid out for token lookups: per (feature, value) cell (P * V, S), and summed over values (P, S)."""
    concentration = data.g_values[omega, jnp.arange(static.n_features), data.x[prototype]]  # (S, P, V)
    return concentration.reshape(static.n_clusters, -1).T, concentration.sum(-1).T


def _token_table_offsets(static: BCMStatic, data: BCMData, omega, prototype):
    """Where g and its sum over values start in the flat tables of :func:`likelihood_tables`, laid out as
    ``_token_concentrations``: per (feature, value) cell (P * V, S), and per feature (P, S)."""
    features, prototype_values = jnp.arange(static.n_features), data.x[prototype]
    cells = data.g_offsets[omega, features, prototype_values]  # (S, P, V)
    totals = data.g_total_offsets[omega, features, prototype_values]  # (S, P)
    return cells.reshape(static.n_clusters, -1).T, totals.T


def tempered_power(w, beta):
    """w ** beta for w > 0 as exp(beta log w) (a sweep 15 % faster than with XLA's pow), and w itself at beta = 1,
    so that a replica at beta = 1 draws the same whether its batch is tempered or not."""
    return jnp.where(beta == 1, w, jnp.exp(beta * jnp.log(w)))


def power_table_pays(n_obs: int, n_features: int, n_values: int, n_clusters: int) -> bool:
    """Whether the tempered z sweep should read w ** beta from a table of (a + n) ** (+-beta) per replica
    (``_z_block``): when the table, (4 V^2 + 1) (N + 1) entries, is smaller than the sweep's N P S powers,
    as on every data set of the benchmarks."""
    return _table_entries(n_obs, n_values) <= n_obs * n_features * n_clusters


def _z_block(static: BCMStatic, data: BCMData, keys, betas, states: BCMTargetState):
    """All z_ij by tempered eq. (1), one wrapped diagonal (independent tokens) at a time, for C replicas at
    once (``keys``, ``betas`` (C,), ``states`` batched). Returns z, row counts and cell counts.

    p(z_ij = s) is proportional to (a_s + n_{s,i,not j}) w_s^beta, w_s = (g_sj(x_ij) + n_{s,.,j,x_ij}) /
    (sum_v g_sj(v) + n_{s,.,j,.}), counts without the token itself, a_s the Dirichlet concentration of pi_is
    (``models.bcm.z_concentration``). Tokens in different rows and different columns share no count, so a
    set with at most one token per row and per column is updated at once, exactly: the N x P grid is
    covered by max(N, P) such "wrapped diagonals", visited in a ``lax.scan``. A scan step updates one
    diagonal of every replica; the replicas' count tables are stacked into one, so that a step makes one
    plain gather and scatter per table. A token of a padding row keeps its cluster and changes no count.

    A batch all at beta = 1 (an untempered run) uses w itself. Otherwise w^beta would cost two
    transcendentals per token and cluster; with ``static.power_table``, it is the product of
    (g + n)^beta and (sum_v g + n)^-beta read from a table built per replica before the scan, since g takes
    at most 4 V^2 values (the rows of :func:`likelihood_tables`) and n at most N + 1. A replica at beta = 1
    uses w itself in every batch, so that it draws the same whether its batch is tempered or not."""
    n_obs, n_features, n_values, n_clusters = static.n_obs, static.n_features, static.n_values, static.n_clusters
    n_chains = len(keys)
    rows, cols = data.diagonal_rows, data.diagonal_cols  # (M, L)
    n_steps, n_short = rows.shape
    chain = jnp.arange(n_chains)[:, None, None]

    def by_step(a):
        """(C, M, L) -> (M, C * L): the tokens of one scan step, chain-major."""
        return jnp.swapaxes(a, 0, 1).reshape(n_steps, -1)

    # token rows, cells and columns as indices into the stacked (chain-major) tables
    row_index = by_step(rows + n_obs * chain)
    cell_index = by_step(cols * n_values + data.x[rows, cols] + n_features * n_values * chain)
    col_index = by_step(cols + n_features * chain)
    g_cells, g_totals = jax.vmap(lambda o, p: _token_concentrations(static, data, o, p))(states.omega, states.prototype)
    g_cells, g_totals = g_cells.reshape(-1, n_clusters), g_totals.reshape(-1, n_clusters)
    alpha = data.pi_concentration
    token_beta = jnp.repeat(betas, n_short)[:, None]  # (C * L, 1)
    col_totals = states.cell_counts.reshape(n_chains * n_features, n_values, -1).sum(1)  # (C * P, S)
    uniforms = by_step(jax.vmap(lambda key: jax.random.uniform(key, rows.shape))(keys))
    z_old = by_step(states.z[:, rows, cols])
    observed = by_step(jnp.broadcast_to(data.observed[rows], (n_chains, n_steps, n_short)))

    # Each diagonal holds every row (N <= P) or every column (N >= P) in order: no gather needed there.
    every_row, every_col = n_obs <= n_features, n_obs >= n_features

    def likelihood_factor(cell, col, n_cell, n_col):  # w_s
        return (g_cells[cell] + n_cell) / ((g_totals if every_col else g_totals[col]) + n_col)

    def update_diagonal(factor, carry, inputs):
        row_counts, cell_counts, col_totals = carry
        row, col, cell, old, u, real = inputs
        old_onehot = jax.nn.one_hot(old, n_clusters, dtype=jnp.int32)
        n_row = (row_counts if every_row else row_counts[row]) - old_onehot
        n_cell = cell_counts[cell] - old_onehot
        n_col = (col_totals if every_col else col_totals[col]) - old_onehot
        weight = (alpha + n_row) * factor(cell, col, n_cell, n_col)
        new = jnp.where(real, inverse_cdf_draw(weight, u), old)
        delta = jax.nn.one_hot(new, n_clusters, dtype=jnp.int32) - old_onehot
        row_counts = row_counts + delta if every_row else row_counts.at[row].add(delta)
        col_totals = col_totals + delta if every_col else col_totals.at[col].add(delta)
        return (row_counts, cell_counts.at[cell].add(delta), col_totals), new

    def sweep(factor, carry):
        return jax.lax.scan(partial(update_diagonal, factor), carry, (row_index, col_index, cell_index, z_old, uniforms,
                                                                    observed))

    def tempered_sweep(carry):  # builds the table of powers in the branch that reads it
        if not static.power_table:
            return sweep(lambda *token: tempered_power(likelihood_factor(*token), token_beta), carry)
        table_size = data.log_count_table.shape[0]
        sign = jnp.where(jnp.arange(table_size) < 2 * n_values**2 * (n_obs + 1), 1.0, -1.0)  # g rows, then sums
        powers = jnp.exp(betas[:, None] * sign * data.log_count_table).reshape(-1)  # (C * A * (N + 1),)
        cell_offsets, total_offsets = jax.vmap(lambda o, p: _token_table_offsets(static, data, o, p))(
            states.omega, states.prototype)
        replica_offset = table_size * jnp.arange(n_chains)[:, None, None]
        cell_offsets = (cell_offsets + replica_offset).reshape(-1, n_clusters)
        total_offsets = (total_offsets + replica_offset).reshape(-1, n_clusters)

        def tempered_factor(cell, col, n_cell, n_col):
            total = powers[(total_offsets if every_col else total_offsets[col]) + n_col]
            return jnp.where(token_beta == 1, likelihood_factor(cell, col, n_cell, n_col),
                             powers[cell_offsets[cell] + n_cell] * total)

        return sweep(tempered_factor, carry)

    carry = (states.row_counts.reshape(-1, n_clusters), states.cell_counts.reshape(-1, n_clusters), col_totals)
    (row_counts, cell_counts, _), z_new = jax.lax.cond(
        jnp.all(betas == 1), partial(sweep, likelihood_factor), tempered_sweep, carry
    )
    z_new = jnp.swapaxes(z_new.reshape(n_steps, n_chains, -1), 0, 1)
    z = states.z.at[:, rows, cols].set(z_new)
    return z, row_counts.reshape(n_chains, n_obs, -1), cell_counts.reshape(n_chains, -1, n_clusters)


def inverse_cdf_draw(weight, u):
    """One category per row of the unnormalised weights (L, K): the first whose cumulative weight exceeds
    u * total, u (L,) uniform in [0, 1). The running sums are one product with a triangular matrix: on CPU
    much cheaper inside a scan than a cumsum op, and than a sum unrolled over the K categories, which XLA
    recomputes in every consumer of the draw."""
    n_categories = weight.shape[1]
    upper = jnp.triu(jnp.ones((n_categories, n_categories), weight.dtype))
    cumulative = jnp.matmul(weight, upper, precision=jax.lax.Precision.HIGHEST)  # no reduced-precision products
    return (cumulative[:, :-1] < (u * cumulative[:, -1])[:, None]).sum(-1, dtype=jnp.int32)


def _log_split_proposal(log_ratio, in_pair, n_b, n_pair):
    """log of the re-split proposal's probability of a split with ``n_b`` of the ``n_pair`` tokens in b,
    divided by exp(sum_j l_j [z_j = b]) (which the target shares), for each replica: log f(m) =
    log sum over components c of w_c exp(lambda_c m) / prod_j (1 + exp(l_j + lambda_c)) for the finite
    tilts, plus w_a [m = 0] and w_b exp(-sum_j l_j) [m = n_pair] for "all in a" and "all in b".
    ``log_ratio`` (C, P): l_j, 0 outside the pair; ``in_pair`` (C, P); ``n_pair`` (C,); ``n_b`` (..., C),
    several counts per replica sharing the products over tokens, which cost the most."""
    tilts = jnp.asarray(RESPLIT_TILTS, log_ratio.dtype)
    log_tilt_weight = -jnp.log(3.0 * len(RESPLIT_TILTS))
    # softplus(l_j + lambda_c) as log(1 + exp(l_j) exp(lambda_c)): one transcendental per term instead of two,
    # and log rather than log1p, which costs half as much again on CPU (an error below 1e-7 nats a term, under
    # the float32 rounding of the sum); where the sum is large, softplus(x) = x to float precision
    shifted = log_ratio[:, None, :] + tilts[:, None]  # (C, T, P)
    softplus = jnp.where(shifted > 30.0, shifted, jnp.log(1.0 + jnp.exp(log_ratio)[:, None, :] * jnp.exp(tilts)[:, None]))
    normaliser = jnp.where(in_pair[:, None, :], softplus, 0.0).sum(-1)
    terms = [
        log_tilt_weight + tilts * n_b[..., None] - normaliser,  # (..., C, L)
        jnp.where(n_b == 0, -jnp.log(3.0), -jnp.inf)[..., None],
        jnp.where(n_b == n_pair, -jnp.log(3.0) - log_ratio.sum(-1), -jnp.inf)[..., None],
    ]
    return logsumexp(jnp.concatenate(terms, -1), -1)


def resplit_draws(key, observed, n_features: int, n_clusters: int):
    """The re-split move's random numbers for the rows of ``observed`` (N,) (one replica): the token whose
    cluster is a, the shift from a to b (1..S-1), the proposal's component (>= len(RESPLIT_TILTS): all in a
    or b), a uniform per token and log u for the accept step, +inf on padding rows (``observed`` False), so
    that their move is never accepted."""
    n_rows = observed.shape[0]
    key_token, key_shift, key_component, key_tokens, key_accept = jax.random.split(key, 5)
    return (
        jax.random.randint(key_token, (n_rows,), 0, n_features, jnp.int32),
        jax.random.randint(key_shift, (n_rows,), 1, n_clusters, jnp.int32),
        jax.random.randint(key_component, (n_rows,), 0, 3 * len(RESPLIT_TILTS), jnp.int32),
        jax.random.uniform(key_tokens, (n_rows, n_features)),
        jnp.where(observed, jnp.log(jax.random.uniform(key_accept, (n_rows,))), jnp.inf),
    )


def resplit_decision(row_log_gamma, log_ratio, in_pair, in_b, row_counts, a, b, component, uniforms, log_u):
    """The re-split move of ``_row_resplit_block`` for L rows (observations or replicas) given their
    l_j: proposes a split of each row's pair {a, b} and accepts or rejects it. ``row_log_gamma`` (S, P + 1):
    log Gamma(a_s + m); ``log_ratio`` (L, P), l_j 0 outside the pair; ``in_pair``, ``in_b`` (L, P): the
    tokens in a or b, and in b; ``uniforms`` (L, P); ``row_counts`` (L, S); ``a``, ``b`` (L, 1);
    ``component``, ``log_u`` (L,). Returns the tokens that change cluster (L, P), the new row counts and
    whether any token of the row moved (L,)."""
    n_tilts = len(RESPLIT_TILTS)
    tilts = jnp.asarray(RESPLIT_TILTS, log_ratio.dtype)
    tilt = tilts[jnp.minimum(component, n_tilts - 1)]
    to_b = jnp.where((component < n_tilts)[:, None], uniforms < jax.nn.sigmoid(log_ratio + tilt[:, None]),
                     (component >= 2 * n_tilts)[:, None]) & in_pair
    n_pair, n_b, new_b, n_moving = jnp.stack([in_pair, in_b, to_b, to_b != in_b]).sum(-1, dtype=jnp.int32)  # one reduction
    log_split_now, log_split_new = _log_split_proposal(log_ratio, in_pair, jnp.stack([n_b, new_b]), n_pair)
    row_terms = row_log_gamma[jnp.stack([a[:, 0], b[:, 0]] * 2), jnp.stack([n_pair - new_b, new_b, n_pair - n_b, n_b])]
    log_accept = row_terms[0] + row_terms[1] - row_terms[2] - row_terms[3] + log_split_now - log_split_new
    accept = log_u < log_accept
    clusters = jnp.arange(row_counts.shape[-1])
    split = jnp.where(clusters == a, (n_pair - new_b)[:, None], jnp.where(clusters == b, new_b[:, None], row_counts))
    return accept[:, None] & (to_b != in_b), jnp.where(accept[:, None], split, row_counts), accept & (n_moving > 0)


def _row_resplit_block(static: BCMStatic, data: BCMData, keys, betas, omega, prototype, z, row_counts, cell_counts):
    """One Metropolis-Hastings move per observation, visited in turn: its tokens in two clusters a and b
    are split between a and b afresh. For C replicas at once (``keys``, ``betas`` (C,), the rest with a
    leading replica axis, count tables stacked as in ``_z_block``). Returns z, row counts, cell
    counts and the share of observations whose tokens moved.

    For observation i, a is the cluster of one of its tokens drawn uniformly and b one of the other S - 1
    clusters drawn uniformly: the pair {a, b} has probability (n_ia + n_ib) / (P (S - 1)), which the move
    does not change (and the proposal below is the same for (a, b) and (b, a)); drawing b by the
    observation's likelihood moved more observations but cost more than it gained
    (docs/decisions/bcm-sampler.md). Given the rest, the tempered target of the pair's T tokens is exactly

        pi(z) proportional to Gamma(a_a + T - m) Gamma(a_b + m) exp(sum_j l_j [z_j = b]),

    m the tokens in b, a_s the Dirichlet concentrations of pi_i (its row term, pi_i integrated out) and
    l_j = beta (log w_b - log w_a) with w_s = (g_sj(x_ij) + n_{s,.,j,x_ij}) / (sum_v g_sj(v) + n_{s,.,j,.}),
    counts without the token (the likelihood factor of eq. (1); tokens in different features share no
    count). With alpha small the row term is U-shaped in m: one token away from a pure observation
    costs about log(a_b / T), so single-token moves (block 1) rarely start or finish a split: without this
    move an observation started in a wrong cluster stays there, and one that truly mixes two clusters
    changes its split slowly. The proposal needs no sequential draws, its probability has a closed form,
    and it is independent of the current split: with probability 1/3 all T tokens go to a, 1/3 all to b,
    and 1/3 each token goes to b independently with probability sigmoid(l_j + lambda), lambda uniform over
    ``RESPLIT_TILTS``. Its probability is f(m) exp(sum_j l_j [z_j = b]) (``_log_split_proposal``), so the
    move is accepted
    with probability min(1, Gamma(a_a + T - m') Gamma(a_b + m') f(m) / (Gamma(a_a + T - m) Gamma(a_b + m) f(m'))).
    A padding row's move is never accepted (its log u is +inf), and the moved share counts the observations
    only.
    """
    n_features, n_clusters, n_values = static.n_features, static.n_clusters, static.n_values
    n_chains = len(keys)
    if n_clusters == 1:
        return z, row_counts, cell_counts, jnp.zeros(n_chains)
    g_cells, g_totals = jax.vmap(lambda o, p: _token_concentrations(static, data, o, p))(omega, prototype)
    col_totals = cell_counts.reshape(n_chains, n_features, n_values, -1).sum(2)  # (C, P, S)
    features = jnp.arange(n_features)
    chain = jnp.arange(n_chains)[:, None]
    # flat positions (C, P) of each feature's cell and column in chain c, before adding the cluster
    cells = (features * n_values + data.x)[:, None, :] + n_features * n_values * chain  # (N, C, P)
    cols = (features + n_features * chain) * n_clusters
    # log Gamma(a_s + m), m = 0..P: the row term's factors, read from a table (one gather per observation)
    row_log_gamma = gammaln(data.pi_concentration[:, None] + jnp.arange(n_features + 1))
    # Each observation is visited once, in order: its z and row counts go through the scan as inputs and
    # come out as outputs; only the (flattened) cell counts and column totals are carried.
    token, shift, component, uniforms, log_u = (
        jnp.swapaxes(draw, 0, 1)
        for draw in jax.vmap(lambda key: resplit_draws(key, data.observed, n_features, n_clusters))(keys)
    )  # (N, C, ...)
    inputs = (jnp.swapaxes(z, 0, 1), jnp.swapaxes(row_counts, 0, 1), cells * n_clusters, token, shift, component,
              uniforms, log_u)
    g_cells, g_totals = g_cells.reshape(-1), g_totals.reshape(-1)

    def resplit_row(carry, step):
        cell_counts, col_totals = carry
        z_row, row_count, row_cells, token, shift, component, uniforms, log_u = step  # (C, P), (C, S), (C, P), (C,) x 3, (C, P), (C,)
        a = z_row.reshape(-1)[chain * n_features + token[:, None]]  # (C, 1)
        b = (a + shift[:, None]) % n_clusters
        in_b = z_row == b
        in_pair = (z_row == a) | in_b

        def weight(s):  # w_s per token, the token left out of its current cluster's counts
            own = (z_row == s).astype(cell_counts.dtype)
            cell, col = row_cells + s, cols + s
            return (g_cells[cell] + cell_counts[cell] - own) / (g_totals[col] + col_totals[col] - own)

        log_ratio = jnp.where(in_pair, betas[:, None] * jnp.log(weight(b) / weight(a)), 0.0)  # l_j
        moved, row_count, any_moved = resplit_decision(row_log_gamma, log_ratio, in_pair, in_b, row_count, a, b,
                                                       component, uniforms, log_u)
        source, target = jnp.where(in_b, b, a), jnp.where(in_b, a, b)
        change = moved.astype(jnp.int32)
        change = jnp.concatenate([-change, change])  # out of the current cluster, into the target
        cell_counts = cell_counts.at[jnp.concatenate([row_cells + source, row_cells + target])].add(change)
        col_totals = col_totals.at[jnp.concatenate([cols + source, cols + target])].add(change)
        return (cell_counts, col_totals), (jnp.where(moved, target, z_row), row_count, any_moved)

    carry = (cell_counts.reshape(-1), col_totals.reshape(-1))
    (cell_counts, _), (z, row_counts, moved) = jax.lax.scan(resplit_row, carry, inputs)
    cell_counts = cell_counts.reshape(n_chains, -1, n_clusters)
    return jnp.swapaxes(z, 0, 1), jnp.swapaxes(row_counts, 0, 1), cell_counts, moved.sum(0) / data.observed.sum()


# ----------------------------------------------------------------------------------------------------------
# block 3: split-merge over k clusters (one replica; vmapped in step)


class SplitMergeProposal(NamedTuple):
    """A proposed re-partition of the k clusters ``chosen`` (K), before the accept step.

    local (N, P): each token's index in K (k outside K) in the current state; orientation (N,): the
    permutation (index into the k! permutations) relabelling each observation's block in the proposal;
    cells (k, P, V) and row_counts (N, k): the proposal's counts per group (the proposal's label within K);
    log_target_current, log_target_proposed (k!,): log p~ of the current state and of the proposal with
    its groups relabelled by each permutation sigma of K (omega and prototypes of K summed out);
    log_reverse, log_forward (k!,): log T(launch -> sigma(current)) and log T(launch -> sigma(proposal));
    prototype_scores (k!, N, k) and evidence (2, V, k, P): what the omega and prototype draws need.
    """

    chosen: jax.Array
    local: jax.Array
    orientation: jax.Array
    cells: jax.Array
    row_counts: jax.Array
    log_target_current: jax.Array
    log_target_proposed: jax.Array
    log_reverse: jax.Array
    log_forward: jax.Array
    prototype_scores: jax.Array
    evidence: jax.Array


def _permutations(k: int):
    """The k! permutations of 0..k-1 (F, k), identity first, and their composition table (F, F):
    compose[a, b] is the index of perms[a] o perms[b] (m -> perms[a][perms[b][m]])."""
    perms = np.array(list(itertools.permutations(range(k))), np.int32)
    index = {tuple(p): n for n, p in enumerate(perms)}
    compose = np.array([[index[tuple(a[b])] for b in perms] for a in perms], np.int32)
    return perms, compose


def _evidence(static: BCMStatic, data: BCMData, cells):
    """E_b[s, j, v] = log B(g(v, b) + n_sj) - log B(g(v, b)) (eq. (2)) for cells (k, P, V): (2, V, k, P)."""
    return _log_polya_of_cells(
        data, jnp.arange(2)[:, None, None, None], jnp.arange(static.n_values)[None, :, None, None], cells[None, None]
    )


def _prototype_scores(data: BCMData, beta, labels, evidence):
    """log p(p_s = i) + log sum over omega_s of p(omega_s) L^beta, up to a constant, (N, k): the tempered
    conditional of the prototypes of clusters ``labels`` (k,) with their omega summed out, from their
    ``evidence`` (2, V, k, P). Per cluster s the likelihood factorises over features given (omega_s, p_s),
    so the sum is prod_j sum_b p(omega_sj = b) exp(beta E_b[s, j, x_ij]): a gather over a (P * V) table."""
    prior = jnp.moveaxis(data.omega_log_prob[labels], -1, 0)[:, None]  # (2, 1, k, P)
    per_value = logsumexp(prior + beta * evidence, axis=0).transpose(1, 2, 0)  # (k, P, V)
    per_value = jnp.where(data.value_mask, per_value, 0.0)
    return data.cell_indicators @ per_value.reshape(len(labels), -1).T + data.prototype_log_prob[labels].T


def _labelled_marginals(data: BCMData, beta, labels, evidence, row_counts):
    """log p~ (up to terms the move does not change) of groups of observations given the cluster labels
    (k,) they carry, omega and prototypes of those clusters summed out; and the prototype scores (N, k)
    (``_prototype_scores``). ``evidence`` (2, V, k, P) and ``row_counts`` (N, k) of the groups; the
    row term of p(z) (pi integrated out) enters through the labels' a_s."""
    scores = _prototype_scores(data, beta, labels, evidence)
    log_marginal = logsumexp(scores, axis=0).sum() + gammaln(data.pi_concentration[labels] + row_counts).sum()
    return log_marginal, scores


def _prototypes_then_omega(static: BCMStatic, data: BCMData, key, beta, labels, evidence, scores):
    """The prototypes and omega of clusters ``labels`` (k,) drawn jointly from their tempered conditional
    given z: each p_s from ``scores`` (``_prototype_scores``, omega summed out), then omega_s given it
    by eq. (2), tempered: log-odds of omega_sj = 1 = prior log-odds + beta (E_1 - E_0), E_b[s, j, x_{p_s j}]
    from the clusters' ``evidence`` (2, V, k, P) (``_evidence``). Returns (omega (k, P), prototype (k,))."""
    key_prototype, key_omega = jax.random.split(key)
    k = len(labels)
    prototype = jax.random.categorical(key_prototype, scores, axis=0).astype(jnp.int32)
    chosen_evidence = evidence[:, data.x[prototype], jnp.arange(k)[:, None], jnp.arange(static.n_features)]  # (2, k, P)
    prior = data.omega_log_prob[labels]  # (k, P, 2)
    log_odds = prior[..., 1] - prior[..., 0] + beta * (chosen_evidence[1] - chosen_evidence[0])
    omega = (jnp.log(jax.random.uniform(key_omega, log_odds.shape)) < jax.nn.log_sigmoid(log_odds)).astype(jnp.int32)
    return omega, prototype


def split_merge_proposal(static: BCMStatic, data: BCMData, key, beta, state: BCMTargetState) -> SplitMergeProposal:
    """The proposal of the split-merge move (restricted Gibbs sampling, Jain and Neal 2004, adapted to the
    fixed S), for one replica.

    k distinct clusters K are drawn uniformly. Every observation's tokens in K form a block that moves as a
    whole: the move relabels it by a permutation of K (for an observation all in one cluster of K: it moves
    to any cluster of K), so the observations' patterns within K up to permutation (their orbits) stay
    fixed; a merge of two clusters with a split of a third is one such relabelling, which no move of single
    observations can make. Restricted Gibbs scans visit the observations in a random order and draw each
    block's relabelling sigma from::

        a(sigma) = row term of p(z) after sigma * prod over the block's tokens of w^beta,

    w a surrogate predictive that needs no omega or prototype of K: for cluster m, feature j and value v,
    w = sum_b p(omega_mj = b) (g(u_mj, b)(v) + n_mjv) / (sum_u g(u_mj, b)(u) + n_mj.) with u_mj the most
    frequent value of the cluster on feature j (where a prototype of the cluster would most likely lie).
    The launch state relabels every block by a uniform permutation (uniform over its orbit, whatever the
    current state) followed by ``launch_scans`` scans; a last scan from the launch draws the proposal B.
    A padding row's block is empty (its tokens count as outside K): its draws change nothing and their
    probabilities are 1.
    The move proposes B's partition of the observations of K, not its labels: its probability is the sum
    of T(launch -> sigma(B)) over the k! relabellings sigma of K (each T a product of the scan's
    conditionals, summed over the permutations giving the same relabelling of an observation), computed
    with the current state's sum in one forced scan from the launch in the same order. The launch does not
    depend on which member of the orbits, nor on which relabelling, the current state is, so it is an
    auxiliary variable of the accept step (:func:`split_merge_accept`).
    """
    n_obs, n_features, n_values = static.n_obs, static.n_features, static.n_values
    k = static.split_merge_clusters
    perms, compose = _permutations(k)
    n_perms = len(perms)
    agree = jnp.asarray(perms[:, None, :] == perms[None, :, :])  # (F, F, k)
    keys = jax.random.split(key, 4)
    chosen = jax.random.permutation(keys[0], static.n_clusters)[:k].astype(jnp.int32)
    in_chosen = (state.z[..., None] == chosen) & data.observed[:, None, None]  # (N, P, k)
    local = jnp.where(in_chosen.any(-1), jnp.argmax(in_chosen, -1), k)  # (N, P): index in K, k outside (padding too)
    local_counts = state.row_counts[:, chosen]  # (N, k)
    alpha = data.pi_concentration[chosen]
    features = jnp.arange(n_features)
    g_totals = data.g_values.sum(-1)  # (2, P, V)
    omega_prob = jnp.exp(data.omega_log_prob[chosen])  # (k, P, 2)
    perms_k = jnp.asarray(np.concatenate([perms, np.full((n_perms, 1), k)], 1))  # label k stays outside

    def counts_of(orientation):
        """Cell counts (k, P, V) of K when every block i is relabelled by perms[orientation[i]]."""
        labels = jnp.take_along_axis(perms_k[orientation], local, axis=1)  # (N, P)
        return jnp.zeros((k + 1, n_features, n_values), jnp.int32).at[labels, features, data.x].add(1)[:k]

    def visit(orientation, counts, i, u, target):
        """Observation i in a restricted Gibbs scan: draw its block's relabelling (``target`` < 0), or put
        it to the relabelling ``target``; also the log probability of the relabelling made."""
        rows_tokens, values = local[i], data.x[i]  # (P,)
        present = local_counts[i] > 0  # (k,)
        counts = counts.at[perms_k[orientation[i]][rows_tokens], features, values].add(-1, mode="drop")
        totals = counts.sum(-1)  # (k, P)
        mode = jnp.argmax(counts, -1)  # (k, P)
        in_cell = counts[:, features, values]  # (k, P)
        predictive = jnp.log(sum(
            omega_prob[..., b] * (data.g_values[b, features, mode, values] + in_cell) / (g_totals[b, features, mode] + totals)
            for b in (0, 1)
        ))
        block = (rows_tokens[:, None] == jnp.arange(k)).astype(predictive.dtype)  # (P, k)
        moved = predictive @ block  # (k, k): tokens now in K[m] sent to K[m'], at [m', m]
        log_weight = gammaln(alpha[perms] + local_counts[i]).sum(-1) + beta * moved[perms, jnp.arange(k)].sum(-1)
        drawn = inverse_cdf_draw(jnp.exp(log_weight - log_weight.max())[None], u[None])[0]
        choice = jnp.where(target < 0, drawn, target)
        same = jnp.all(agree[choice] | ~present, -1)  # permutations giving the same relabelling
        log_prob = logsumexp(jnp.where(same, log_weight, -jnp.inf)) - logsumexp(log_weight)
        counts = counts.at[perms_k[choice][rows_tokens], features, values].add(1, mode="drop")
        return orientation.at[i].set(choice), counts, log_prob

    def draw_pass(carry, step):
        """A scan drawing every block in turn; the last of them (from the launch) draws the proposal."""
        orientation, launch = carry
        index, order, uniforms = step
        launch = jnp.where(index == static.launch_scans, orientation, launch)

        def visit_draw(carry, step):
            orientation, counts, _ = visit(*carry, *step, -1)
            return (orientation, counts), None

        (orientation, counts), _ = jax.lax.scan(visit_draw, (orientation, counts_of(orientation)), (order, uniforms))
        return (orientation, launch), counts

    # a random order of the observations and uniforms per scan; the forced scan reuses the proposal's order
    orders = jnp.argsort(jax.random.uniform(keys[2], (static.launch_scans + 1, n_obs)), axis=-1)
    uniforms = jax.random.uniform(keys[3], (static.launch_scans + 1, n_obs))
    random_start = jax.random.randint(keys[1], (n_obs,), 0, n_perms)
    (proposal, launch), pass_counts = jax.lax.scan(
        draw_pass, (random_start, random_start), (jnp.arange(static.launch_scans + 1), orders, uniforms)
    )
    cells = pass_counts[-1]

    # forced scan from the launch to every relabelling of the current state and of the proposal
    targets = jnp.concatenate([jnp.broadcast_to(jnp.arange(n_perms)[:, None], (n_perms, n_obs)), jnp.asarray(compose)[:, proposal]])

    def visit_forced(carry, step):
        orientation, counts = carry
        i = step
        orientation, counts, log_prob = jax.vmap(lambda o, c, t: visit(o, c, i, jnp.zeros(()), t[i]))(orientation, counts, targets)
        return (orientation, counts), log_prob

    lanes = 2 * n_perms
    start = (jnp.broadcast_to(launch, (lanes, n_obs)), jnp.broadcast_to(counts_of(launch), (lanes, k, n_features, n_values)))
    _, log_probs = jax.lax.scan(visit_forced, start, orders[-1])
    log_probs = log_probs.sum(0)

    new_labels = perms_k[proposal][:, :k]  # (N, k): block label m of observation i goes to new_labels[i, m]
    new_counts = jnp.zeros((n_obs, k), local_counts.dtype).at[jnp.arange(n_obs)[:, None], new_labels].set(local_counts)
    current_cells = cells_by_cluster(static, state.cell_counts)[chosen]
    labels = chosen[jnp.asarray(perms)]  # (F, k): the clusters the groups carry under each relabelling
    evidence = jax.vmap(lambda c: _evidence(static, data, c))(jnp.stack([current_cells, cells]))  # (2, 2, V, k, P)
    log_targets, scores = jax.vmap(
        lambda e, rows: jax.vmap(lambda lab: _labelled_marginals(data, beta, lab, e, rows))(labels)
    )(evidence, jnp.stack([local_counts, new_counts]))
    return SplitMergeProposal(
        chosen=chosen,
        local=local,
        orientation=proposal,
        cells=cells,
        row_counts=new_counts,
        log_target_current=log_targets[0],
        log_target_proposed=log_targets[1],
        log_reverse=log_probs[:n_perms],
        log_forward=log_probs[n_perms:],
        prototype_scores=scores[1],
        evidence=evidence[1],
    )


def split_merge_log_ratio(proposal: SplitMergeProposal):
    """log r of the split-merge move, proposing a partition of K's observations and then its labels:

        r = sum_sigma p~(sigma B) / sum_sigma p~(sigma A) * sum_sigma T(launch -> sigma A) / sum_sigma T(launch -> sigma B),

    A the current state, B the proposal, sigma over the relabellings of K, p~ the tempered target with the
    omega and prototypes of K summed out. (A relabelling that leaves a state unchanged is counted as often
    in both sums of that state, so the sums may run over all k! permutations.)"""
    return (
        logsumexp(proposal.log_target_proposed) - logsumexp(proposal.log_target_current)
        + logsumexp(proposal.log_reverse) - logsumexp(proposal.log_forward)
    )


def split_merge_accept(static: BCMStatic, data: BCMData, key, beta, state, proposal: SplitMergeProposal, log_ratio):
    """Accept ``proposal`` with probability min(1, exp(log_ratio)); on acceptance its labels sigma(B) are
    drawn with probability proportional to p~(sigma B), then the prototypes of K from p(p_s | z) (omega
    summed out) and omega_s from its tempered eq. (2) given them. Returns (z, omega, prototype, row
    counts, cell counts, accepted)."""
    key_accept, key_labels, key_parameters = jax.random.split(key, 3)
    accept = jnp.log(jax.random.uniform(key_accept)) < log_ratio
    k = static.split_merge_clusters
    perms, _ = _permutations(k)
    relabel = jax.random.categorical(key_labels, proposal.log_target_proposed)
    labels = proposal.chosen[jnp.asarray(perms)[relabel]]  # (k,): the cluster of each group
    omega, prototype = _prototypes_then_omega(static, data, key_parameters, beta, labels, proposal.evidence,
                                              proposal.prototype_scores[relabel])
    group = jnp.take_along_axis(jnp.asarray(perms)[proposal.orientation], jnp.minimum(proposal.local, k - 1), axis=1)
    z = jnp.where(proposal.local < k, labels[group], state.z)

    def pick(new, old):
        return jnp.where(accept, new, old)

    return (
        pick(z, state.z),
        pick(state.omega.at[labels].set(omega), state.omega),
        pick(state.prototype.at[labels].set(prototype), state.prototype),
        pick(state.row_counts.at[:, labels].set(proposal.row_counts), state.row_counts),
        pick(state.cell_counts.at[:, labels].set(proposal.cells.reshape(k, -1).T), state.cell_counts),
        accept,
    )


def _split_merge_block(static: BCMStatic, data: BCMData, key, beta, state: BCMTargetState):
    """The split-merge move of :func:`split_merge_proposal`, accepted with the exact Metropolis-Hastings
    ratio of :func:`split_merge_log_ratio` (the launch state and scan orders are auxiliary variables drawn
    independently of the current member of the orbits and of its labels, so the move is
    Metropolis-Hastings on z given them). Omega and prototypes of K are then drawn from their
    conditionals: this makes the joint move exact, as p(z', omega', p') / q(omega', p' | z') = p~(z')."""
    key_proposal, key_accept = jax.random.split(key)
    proposal = split_merge_proposal(static, data, key_proposal, beta, state)
    return split_merge_accept(static, data, key_accept, beta, state, proposal, split_merge_log_ratio(proposal))


# ----------------------------------------------------------------------------------------------------------
# block 4: prototypes and omega (one replica; vmapped in step)


def _prototypes_and_omega_block(static: BCMStatic, data: BCMData, key, beta, cell_counts):
    """The prototypes and omega of every cluster drawn jointly from their tempered conditional given z
    (``_prototypes_then_omega``). Drawing omega by eq. (2) and then the prototypes given omega would
    leave the same target invariant, but omega_sj = 1 ties p_s to its value on feature j: a prototype
    would rarely change while its omega stayed."""
    clusters = jnp.arange(static.n_clusters)
    evidence = _evidence(static, data, cells_by_cluster(static, cell_counts))  # (2, V, S, P)
    return _prototypes_then_omega(static, data, key, beta, clusters, evidence,
                                  _prototype_scores(data, beta, clusters, evidence))


def step(static: BCMStatic, data: BCMData, states: BCMTargetState, keys, betas) -> tuple[BCMTargetState, BCMInfo]:
    """One sweep of B replicas (every field of ``states`` with a leading axis B; ``keys`` (B,), ``betas``
    (B,) in [0, 1]): all z (eq. (1)), a re-split move per observation, a split-merge move (on the sweeps
    :class:`BCMStatic` says, on the rungs of :func:`learn_split_merge_rungs`), then the
    prototypes and omega jointly. Replica b leaves p_prior * p_likelihood ** betas[b] invariant, and gets
    exactly the draws it would get in a batch of its own. Returns the new states and what the moves did (B,)."""
    betas = jnp.asarray(betas, jnp.result_type(float))
    split = jax.vmap(lambda key: jax.random.split(key, 4))(keys)
    key_z, key_rows, key_split_merge, key_blocks = (split[:, i] for i in range(4))
    z, row_counts, cell_counts = _z_block(static, data, key_z, betas, states)
    z, row_counts, cell_counts, resplit_share = _row_resplit_block(
        static, data, key_rows, betas, states.omega, states.prototype, z, row_counts, cell_counts
    )
    states = states._replace(z=z, row_counts=row_counts, cell_counts=cell_counts)
    hot_sweep = states.sweeps % static.split_merge_every == 0
    posterior_sweep = states.sweeps % static.split_merge_posterior_every == 0
    due = (hot_sweep & (betas <= data.split_merge_max_beta)) | (
        posterior_sweep & data.split_merge_posterior & (betas == 1.0))
    on_sweep = hot_sweep | posterior_sweep
    accepted = jnp.zeros(len(keys), bool)
    if static.split_merge_clusters:
        states, accepted = _split_merge_where_due(static, data, key_split_merge, betas, states, due, on_sweep)
    omega, prototype = jax.vmap(lambda key, beta, c: _prototypes_and_omega_block(static, data, key, beta, c))(
        key_blocks, betas, states.cell_counts
    )
    states = jax.vmap(lambda *args: _with_log_terms(static, data, *args))(
        states.z, omega, prototype, states.row_counts, states.cell_counts, states.sweeps + 1
    )
    due = due & (static.split_merge_clusters > 0)
    split_merge_accepted = jnp.where(due, accepted, jnp.nan).astype(jnp.float32)
    return states, BCMInfo(jnp.asarray(resplit_share, jnp.float32), split_merge_accepted)


def _split_merge_where_due(static: BCMStatic, data: BCMData, keys, betas, states: BCMTargetState, due, on_sweep):
    """The split-merge move (``_split_merge_block``) of the replicas that are ``due`` (B,), of those on a
    sweep that runs it (``on_sweep``). Returns the states and whether each replica's move was accepted
    (False where none ran).

    With ``static.split_merge_in_turn``, one replica after another in a loop of as many iterations as there
    are due: a ladder whose hotter rungs alone run the move pays for those alone. Else one batch over all
    replicas, the moves of those not due dropped: with every replica due, 18-25 % cheaper than the loop
    (the move's sequential scans run once for the batch; docs/decisions/bcm-sampler.md)."""
    def moved(key, beta, state):  # one replica's state after its move, and whether it was accepted
        *fields, accept = _split_merge_block(static, data, key, beta, state)
        return state._replace(**dict(zip(("z", "omega", "prototype", "row_counts", "cell_counts"), fields))), accept

    if not static.split_merge_in_turn:

        def every_replica(states):
            new, accepted = jax.vmap(moved)(keys, betas, states)
            return jax.tree.map(lambda x, old: jnp.where(due.reshape(-1, *[1] * (x.ndim - 1)), x, old), new,
                                states), accepted

        # branched on the sweep count alone: under jax.vmap over data sets it stays one value, and the
        # branch a real one, where the rungs (swapped by each data set's draws) would make it a select
        return jax.lax.cond(on_sweep.any(), every_replica, lambda states: (states, jnp.zeros(len(keys), bool)),
                            states)
    due_first = jnp.argsort(~due, stable=True)

    def move(i, carry):
        states, accepted = carry
        replica = due_first[i]
        new, accept = moved(keys[replica], betas[replica], jax.tree.map(lambda x: x[replica], states))
        return jax.tree.map(lambda x, value: x.at[replica].set(value), states, new), accepted.at[replica].set(accept)

    return jax.lax.fori_loop(0, due.sum(), move, (states, jnp.zeros(len(keys), bool)))


SPLIT_MERGE_MIN_ACCEPTANCE = 0.1
"""The split-merge move's acceptance below which a rung's move does not pay for itself
(:func:`learn_split_merge_rungs`): a proposal costs about three sweeps of the other blocks, and on the
middle rungs of a ladder, where it is seldom accepted, the swaps bring the hotter rungs' changes instead
(docs/decisions/bcm-sampler.md)."""


class SplitMergeRungs(NamedTuple):
    """Where the split-merge move runs (``BCMData``): at inverse temperatures up to ``max_beta`` (the
    hottest rungs), and at the posterior's (beta = 1) if ``posterior``."""

    max_beta: np.float32
    posterior: bool


def learn_split_merge_rungs(static: BCMStatic, data: BCMData, records, states, rungs, facts) -> SplitMergeRungs | None:
    """Where the split-merge move runs, a ``TargetKernel.learn_proposal``: while tuning, None (every rung,
    so that each is measured); once tuning ends, from the acceptance a_k measured on each rung of that
    round, then fixed. The hottest rungs up to the one that maximises the sum of a_k -
    :data:`SPLIT_MERGE_MIN_ACCEPTANCE` over them (a contiguous block, so that a rare acceptance on one cold
    rung does not bring the move back to every rung between), and the posterior's if a_K reaches it (the
    only rung whose draws are kept). A rung that ran no move counts as neither paying nor costing. A
    ladder of one rung keeps the move, which nothing else there replaces. Each rung's kernel is fixed
    within a round, so every rung's target stays invariant."""
    if rungs is not None or not facts.tuned or len(facts.schedule) == 1 or not static.split_merge_clusters:
        return rungs
    rates = np.asarray(facts.move_rates["split_merge_accepted"], dtype=float)
    gains = np.nan_to_num(rates - SPLIT_MERGE_MIN_ACCEPTANCE, nan=0.0)
    prefix_gains = np.concatenate([[0.0], np.cumsum(gains[:-1])])  # of the 0..K - 1 hottest rungs
    hottest = len(prefix_gains) - 1 - int(np.argmax(prefix_gains[::-1]))  # the most rungs among the best
    max_beta = np.asarray(facts.schedule)[hottest - 1] if hottest else -1.0
    return SplitMergeRungs(np.float32(max_beta), bool(gains[-1] >= 0.0))


def with_split_merge_rungs(static: BCMStatic, data: BCMData, rungs: SplitMergeRungs) -> BCMData:
    """``data`` whose step runs the split-merge move on ``rungs``."""
    return data._replace(split_merge_max_beta=jax.device_put(np.float32(rungs.max_beta)),
                         split_merge_posterior=jax.device_put(np.bool_(rungs.posterior)))


# ----------------------------------------------------------------------------------------------------------
# NumPyro kernel (beta = 1)

BCMState = namedtuple(
    "BCMState",
    [
        "params", "row_counts", "cell_counts", "potential_energy", "log_likelihood", "accept_prob",
        "split_merge_accepted", "sorted_cluster_size", "sweeps", "rng_key",
    ],
)
BCMState.__doc__ = """State of :class:`BCMGibbs`: NumPyro's view of a :class:`BCMTargetState` at beta = 1 and of the
:class:`BCMInfo` of its last step.

params: {"omega": (S, P), "prototype": (S,), "z": (N, P)} int32; row_counts, cell_counts as in
:class:`BCMTargetState`; potential_energy: -(log_prior + log_likelihood); log_likelihood; accept_prob: the share of
observations whose tokens the re-split move moved in the last sweep (1 at the start); split_merge_accepted: 1 if
the last sweep's split-merge move was accepted, 0 if rejected, NaN if that sweep (or the start) ran none;
sorted_cluster_size: tokens per cluster, largest first (label-free);
sweeps: as in :class:`BCMTargetState`.
"""


def _to_numpyro(state: BCMTargetState, info: BCMInfo, rng_key) -> BCMState:
    params = {"omega": state.omega, "prototype": state.prototype, "z": state.z}
    sizes = -jnp.sort(-state.row_counts.sum(-2), axis=-1)
    potential = -(state.log_prior + state.log_likelihood)
    return BCMState(
        params, state.row_counts, state.cell_counts, potential, state.log_likelihood, info.resplit_moved,
        info.split_merge_accepted, sizes, state.sweeps, rng_key,
    )


def _from_numpyro(state: BCMState) -> BCMTargetState:
    params = state.params
    return BCMTargetState(
        params["z"], params["omega"], params["prototype"], state.row_counts, state.cell_counts,
        -state.potential_energy - state.log_likelihood, state.log_likelihood, state.sweeps,
    )


def _numpyro_init(static: BCMStatic, data: BCMData, key, init_params, init_labels) -> BCMState:
    """One chain's start: ``init_params``, else z from ``init_labels`` with omega and the prototypes drawn
    given it, else a prior draw (:func:`init`)."""
    key_state, key_init, key_blocks = jax.random.split(key, 3)
    if init_params is not None:
        state = state_from_params(static, data, init_params["omega"], init_params["prototype"], init_params["z"])
    else:
        state = init(static, data, key_init)
        if init_labels is not None:
            z = jnp.broadcast_to(jnp.asarray(init_labels, jnp.int32)[:, None], (static.n_obs, static.n_features))
            row_counts, cell_counts = token_counts(static, data, z)
            omega, prototype = _prototypes_and_omega_block(static, data, key_blocks, 1.0, cell_counts)
            state = state_from_params(static, data, omega, prototype, z)
    return _to_numpyro(state, BCMInfo(jnp.float32(1.0), jnp.float32(jnp.nan)), key_state)


def _numpyro_sample(static: BCMStatic, data: BCMData, states: BCMState) -> BCMState:
    """One sweep of a batch of chains at beta = 1."""
    keys = jax.vmap(jax.random.split)(states.rng_key)
    new, info = step(static, data, _from_numpyro(states), keys[:, 1], jnp.ones(len(keys)))
    return _to_numpyro(new, info, keys[:, 0])


class BCMGibbs(MCMCKernel):
    """Collapsed Gibbs sampler of :func:`interpretable_zoo.models.bcm.collapsed_model` (:func:`step` at beta = 1).

    Run it with ``MCMC`` (or ``inference.mcmc.run_mcmc``) and model arguments ``(x, n_clusters)`` plus
    optional ``priors`` and ``n_values`` keywords. ``init_labels`` (N,) optionally starts every token of
    observation i in cluster ``init_labels[i]``, followed by one omega and one prototype update given
    those clusters; else the start is a draw from the prior (:func:`init`). With vectorized chains,
    ``init_labels`` (num_chains, N) gives each chain its own start. ``init_params`` given to ``run``
    ({"omega", "prototype", "z"}) override both. ``split_merge_clusters``, ``launch_scans`` and
    ``split_merge_every``: as in :func:`make_target`.
    """

    sample_field = "params"

    def __init__(self, init_labels=None, *, split_merge_clusters=DEFAULT_SPLIT_MERGE_CLUSTERS,
                 launch_scans=DEFAULT_LAUNCH_SCANS, split_merge_every=DEFAULT_SPLIT_MERGE_EVERY):
        self._init_labels = None if init_labels is None else np.asarray(init_labels, np.int32)
        self._options = {"split_merge_clusters": split_merge_clusters, "launch_scans": launch_scans,
                         "split_merge_every": split_merge_every}

    @property
    def model(self):
        return bcm.collapsed_model

    def postprocess_fn(self, model_args, model_kwargs):
        return _identity

    def target(self, model_args, model_kwargs) -> tuple[BCMStatic, BCMData]:
        """(static, data) of :func:`make_target` for these model arguments. ``init`` and ``sample`` both
        derive it, so the kernel keeps no state and ``sample`` always runs on its own arguments."""
        return target_from_model_args(model_args, model_kwargs, **self._options)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """Chains' starts, after the fit-time check of ``fit_bcm`` (``target_check.check_bcm``): under an
        edit of the model file that this kernel cannot follow, a ModelMismatchError, not the old posterior."""
        from interpretable_zoo.inference import target_check  # it imports this module

        static, data = self.target(model_args, model_kwargs)
        priors = inspect.signature(bcm.collapsed_model).bind(*model_args, **(model_kwargs or {})).arguments.get("priors")
        target_check.outside_traces(target_check.check_bcm, static.n_clusters, priors or bcm.Priors())
        labels = self._init_labels
        batched = not is_prng_key(rng_key)
        shapes = [(static.n_obs,)] + ([(len(rng_key), static.n_obs)] if batched else [])
        if labels is not None and labels.shape not in shapes:
            raise ValueError(f"init_labels: expected shape {' or '.join(map(str, shapes))}, got {labels.shape}")
        if not batched:
            return _jit_numpyro_init(static, data, rng_key, init_params, labels)
        labels_per_chain = labels is not None and labels.ndim == 2
        in_axes = (None, None, 0, None if init_params is None else 0, 0 if labels_per_chain else None)
        return jax.jit(jax.vmap(_numpyro_init, in_axes=in_axes), static_argnums=0)(static, data, rng_key, init_params, labels)

    def sample(self, state, model_args, model_kwargs):
        static, data = self.target(model_args, model_kwargs)
        if not is_prng_key(state.rng_key):
            return _numpyro_sample(static, data, state)
        return jax.tree.map(lambda value: value[0], _numpyro_sample(static, data, jax.tree.map(lambda value: value[None], state)))


_jit_numpyro_init = jax.jit(_numpyro_init, static_argnums=0)


def _identity(params):
    return params
