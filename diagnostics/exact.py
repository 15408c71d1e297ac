"""Exact posteriors by enumeration, and a goodness-of-fit test of MCMC draws against them.

On a problem small enough to list every discrete state, a sampler's draws can be checked against the
exact posterior::

    probs = enumerate_posterior(log_joint_fn, states)           # exact p(state | data), float64
    indices = state_index(draws, states)                         # (chains, draws) -> state numbers
    result = exact_gof_test(indices, probs)                      # autocorrelation-aware z-scores
    assert result.passed(alpha=1e-3), result

States are pytrees (an int, an array, a dict of arrays, a tuple, ...). They are given either as a Python
``list`` of single states or as one stacked pytree whose leaves share a leading state axis; in both
cases the state numbering is the list (or leading-axis) order.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import arviz as az
import jax
import numpy as np
from scipy import stats
from scipy.special import logsumexp

IMPOSSIBLE_PROB = 1e-12
"""Exact probability below which a visited state counts as impossible: by a union bound even a million
draws from the exact distribution visit such a state with probability below 1e-6."""

MAX_DEFAULT_INDICATORS = 100
"""Most states for which :func:`~interpretable_zoo.diagnostics.exact.exact_gof_test` defaults to one indicator per state; beyond it the
indicators are mostly too rare to test and their table too large, so statistics must be chosen."""

_DEGENERATE_RTOL = 1e-12
_TRACER_ERRORS = (jax.errors.JAXTypeError, jax.errors.JAXIndexError)


def _stack_states(states):
    """``states`` (a list of single states, or a stacked pytree) as a stacked pytree of numpy arrays.

    Returns ``(stacked, num_states)``; raises ValueError on an empty list, ragged shapes or leaves
    without a shared leading axis.
    """
    if isinstance(states, list):
        if not states:
            raise ValueError("states: the list of states is empty")
        try:
            stacked = jax.tree.map(lambda *leaves: np.stack([np.asarray(leaf) for leaf in leaves]), *states)
        except ValueError as err:
            raise ValueError(f"states: every state must have the same structure and leaf shapes ({err})") from err
    else:
        stacked = jax.tree.map(np.asarray, states)
    leaves = jax.tree.leaves(stacked)
    if not leaves:
        raise ValueError("states: no array leaves")
    if any(leaf.ndim == 0 for leaf in leaves):
        raise ValueError(
            "states: a stacked pytree needs a leading state axis on every leaf; pass a list for single states"
        )
    lengths = {leaf.shape[0] for leaf in leaves}
    if len(lengths) != 1:
        raise ValueError(f"states: leaves have different leading (state) lengths {sorted(lengths)}")
    num_states = lengths.pop()
    if num_states == 0:
        raise ValueError("states: no states")
    return stacked, num_states


def _as_rows(stacked, batch_ndim: int) -> np.ndarray:
    """Flatten a pytree whose leaves share ``batch_ndim`` leading axes to float64 rows, one per element."""
    leaves = jax.tree.leaves(stacked)
    batch_size = int(np.prod(leaves[0].shape[:batch_ndim]))
    # + 0.0 maps -0.0 to 0.0 so that equal values compare equal
    return np.concatenate([leaf.reshape(batch_size, -1).astype(np.float64) + 0.0 for leaf in leaves], axis=1)


def enumerate_posterior(
    log_joint_fn: Callable, states, *, method: str = "auto"
) -> np.ndarray:
    """Exact posterior probabilities over a finite list of discrete states.

    Args:
        log_joint_fn: ``state -> scalar`` unnormalised log joint (log prior + log likelihood); -inf
            marks a state outside the support.
        states: a Python list of states, or a stacked pytree with a leading state axis (see the module
            docstring). States must be distinct.
        method: ``"vmap"`` evaluates all states in one jit-compiled ``jax.vmap`` call; ``"loop"`` calls
            ``log_joint_fn`` once per state with numpy values (for functions JAX cannot trace);
            ``"auto"`` tries ``"vmap"`` and falls back to ``"loop"`` when tracing fails.

    Returns:
        float64 numpy array of probabilities, one per state in order, normalised by log-sum-exp. The
        precision is that of ``log_joint_fn``'s output: enable ``jax_enable_x64`` for float64 accuracy.

    Example:
        A coin's bias is one of 0.25, 0.5, 0.75, a priori equally likely; it shows 7 heads in 10 tosses:

        >>> import jax.numpy as jnp
        >>> bias = jnp.array([0.25, 0.5, 0.75])
        >>> log_joint = lambda state: 7 * jnp.log(bias[state]) + 3 * jnp.log1p(-bias[state])
        >>> iz.diagnostics.enumerate_posterior(log_joint, [0, 1, 2]).round(3)
        array([0.008, 0.316, 0.675])
    """
    if method not in ("auto", "vmap", "loop"):
        raise ValueError(f"method: expected 'auto', 'vmap' or 'loop', got {method!r}")
    stacked, num_states = _stack_states(states)
    _check_distinct(stacked)
    log_joint = None
    if method != "loop":
        try:
            log_joint = np.asarray(jax.jit(jax.vmap(log_joint_fn))(stacked))
        except _TRACER_ERRORS as err:
            if method == "vmap":
                raise ValueError(
                    f"log_joint_fn: cannot be traced by jax.vmap ({type(err).__name__}); use method='loop'"
                ) from err
    if log_joint is None:
        leaves, structure = jax.tree.flatten(stacked)
        log_joint = np.array([np.asarray(log_joint_fn(structure.unflatten([leaf[i] for leaf in leaves])))
                              for i in range(num_states)])
    if log_joint.shape != (num_states,):
        raise ValueError(
            f"log_joint_fn: must return a scalar per state; got outputs of shape {log_joint.shape[1:]}"
        )
    log_joint = log_joint.astype(np.float64)
    bad = np.flatnonzero(np.isnan(log_joint) | (log_joint == np.inf))
    if bad.size:
        raise ValueError(f"log_joint_fn: NaN or +inf at states {bad[:10].tolist()}")
    if np.all(log_joint == -np.inf):
        raise ValueError("log_joint_fn: -inf at every state (no state has positive probability)")
    return np.exp(log_joint - logsumexp(log_joint))


def _check_distinct(stacked) -> None:
    first_of_row = {}
    for index, row in enumerate(_as_rows(stacked, 1)):
        original = first_of_row.setdefault(row.tobytes(), index)
        if original != index:
            raise ValueError(f"states: state {index} repeats state {original}; states must be distinct")


def state_index(draws, states) -> np.ndarray:
    """Map each draw to the number of the enumerated state it equals.

    Args:
        draws: a pytree with the structure of one state and extra leading (batch) axes, e.g. the
            ``(chain, draw)`` arrays of ``mcmc.get_samples(group_by_chain=True)``. When ``states`` is a
            dict, ``draws`` may be a mapping with more keys (continuous sites); only the states' keys
            are used.
        states: as in :func:`enumerate_posterior`.

    Returns:
        int array with the batch shape of ``draws``. Raises ValueError naming a draw that matches no
        state (a draw outside the enumerated list means a wrong enumeration or a broken sampler).

    Example:
        >>> import numpy as np
        >>> states = [np.array([a, b]) for a in (0, 1) for b in (0, 1)]  # (0, 0), (0, 1), (1, 0), (1, 1)
        >>> draws = np.array([[[0, 0], [1, 1], [1, 0]], [[0, 1], [0, 1], [1, 1]]])  # (chain, draw, state)
        >>> iz.diagnostics.state_index(draws, states)
        array([[0, 3, 2],
               [1, 1, 3]])
    """
    stacked, _ = _stack_states(states)
    if isinstance(stacked, dict) and isinstance(draws, Mapping):
        missing = sorted(set(stacked) - set(draws))
        if missing:
            raise ValueError(f"draws: missing the state keys {missing}")
        draws = {key: draws[key] for key in stacked}
    draws = jax.tree.map(np.asarray, draws)
    if jax.tree.structure(draws) != jax.tree.structure(stacked):
        raise ValueError(
            f"draws: structure {jax.tree.structure(draws)} differs from the states' {jax.tree.structure(stacked)}"
        )
    batch_shape = None
    for draw_leaf, state_leaf in zip(jax.tree.leaves(draws), jax.tree.leaves(stacked)):
        state_shape = state_leaf.shape[1:]
        leaf_batch = draw_leaf.shape[: draw_leaf.ndim - len(state_shape)]
        if draw_leaf.ndim < len(state_shape) or draw_leaf.shape[len(leaf_batch) :] != state_shape:
            raise ValueError(f"draws: a leaf of shape {draw_leaf.shape} does not end with the state shape {state_shape}")
        if batch_shape is not None and leaf_batch != batch_shape:
            raise ValueError(f"draws: leaves have different batch shapes {batch_shape} and {leaf_batch}")
        batch_shape = leaf_batch
    # rows compared by their bytes: one hash lookup per draw, where sorting the rows cost several times more
    state_of_row = {row.tobytes(): index for index, row in enumerate(_as_rows(stacked, 1))}
    indices = np.array([state_of_row.get(row.tobytes(), -1) for row in _as_rows(draws, len(batch_shape))], np.int64)
    unmatched = np.flatnonzero(indices < 0)
    if unmatched.size:
        position = np.unravel_index(unmatched[0], batch_shape)
        raise ValueError(
            f"draws: {unmatched.size} draws match no enumerated state; the first, at batch index "
            f"{tuple(int(i) for i in position)}, is {jax.tree.map(lambda leaf: leaf[position], draws)}"
        )
    return indices.reshape(batch_shape)


@dataclass(frozen=True)
class GOFResult:
    """Outcome of :func:`~interpretable_zoo.diagnostics.exact.exact_gof_test`; per-statistic arrays follow the order of ``names``.

    Attributes:
        names: statistic names.
        exact_means: expectation of each statistic under the exact distribution.
        mcmc_means: mean over all chains and draws.
        ess: effective sample size used for each statistic (ArviZ multi-chain ``method="mean"``).
        mcse: Monte Carlo standard error, ``sqrt(exact variance / ess)``.
        z: ``(mcmc_means - exact_means) / mcse``.
        p_values: two-sided normal p-values of ``z``, uncorrected.
        excluded: statistics left out of ``p_value`` because their effective count is too small for the
            normal approximation (rare states); their z and p-values are still reported.
        impossible_states: visited states whose exact probability is below ``IMPOSSIBLE_PROB``.
        p_value: Bonferroni-corrected overall p-value over the included statistics,
            ``min(1, m * min p)``; 0 when an impossible state was visited.
        num_draws: total draws over all chains.

    Example:
        >>> import numpy as np
        >>> exact = np.array([0.2, 0.3, 0.5])
        >>> draws = np.random.default_rng(0).choice(3, size=(4, 500), p=exact)  # 4 chains of exact draws
        >>> result = iz.diagnostics.exact_gof_test(draws, exact)
        >>> result.names, result.num_draws, result.excluded, result.impossible_states
        (('state 0', 'state 1', 'state 2'), 2000, (), ())
        >>> result.exact_means.tolist(), result.mcmc_means.round(2).tolist(), result.passed()
        ([0.2, 0.3, 0.5], [0.21, 0.29, 0.5], True)
    """

    names: tuple[str, ...]
    exact_means: np.ndarray
    mcmc_means: np.ndarray
    ess: np.ndarray
    mcse: np.ndarray
    z: np.ndarray
    p_values: np.ndarray
    excluded: tuple[str, ...]
    impossible_states: tuple[int, ...]
    p_value: float
    num_draws: int

    def passed(self, alpha: float = 0.01) -> bool:
        """True when the draws are consistent with the exact distribution at level ``alpha``."""
        return self.p_value >= alpha

    def __str__(self) -> str:
        lines = [f"exact GOF test: overall p = {self.p_value:.3g} over {self.num_draws} draws"]
        if self.impossible_states:
            lines.append(f"  IMPOSSIBLE STATES VISITED: {list(self.impossible_states)}")
        lines.append(f"  {'statistic':<20} {'exact':>9} {'mcmc':>9} {'mcse':>9} {'ess':>8} {'z':>8}")
        for i, name in enumerate(self.names):
            flag = "  (excluded)" if name in self.excluded else ""
            lines.append(
                f"  {name:<20} {self.exact_means[i]:9.4f} {self.mcmc_means[i]:9.4f} {self.mcse[i]:9.4f} "
                f"{self.ess[i]:8.0f} {self.z[i]:8.2f}{flag}"
            )
        return "\n".join(lines)


def exact_gof_test(
    draw_indices,
    exact_probs,
    *,
    statistics: Mapping[str, np.ndarray] | None = None,
    min_ess: float = 100.0,
    min_effective_count: float = 5.0,
) -> GOFResult:
    """Goodness of fit of MCMC draws to an exact distribution over enumerated states, allowing for autocorrelation.

    For each statistic f (a function of the state, given by its value at every state), the mean of f over
    all chains and draws is compared with its exact expectation: ``z = (mean - exact mean) / mcse`` with
    ``mcse = sqrt(Var_exact(f) / ESS)``, where the ESS comes from ArviZ's multi-chain estimator (it
    accounts for autocorrelation within chains and disagreement between chains). The variance is the
    exact one under the null hypothesis, so the standard error stays defined for a never-visited state.
    Each z is referred to N(0, 1), two-sided; the overall p-value is Bonferroni-corrected over the
    statistics, which is valid under any dependence between them (state indicators are dependent).

    Guards:
        * a visited state with exact probability below ``IMPOSSIBLE_PROB`` is an impossible state
          sampled: a warning names it and the overall p-value is 0;
        * a statistic that is constant over all draws has no estimable autocorrelation (ArviZ would
          report the draw count); it gets the smallest ESS among the other statistics;
        * ESS below ``min_ess`` for any statistic raises ValueError: the run is too short (or the
          chains too stuck) for the normal approximation and for the ESS estimate itself;
        * a 0/1 statistic (e.g. a state indicator) whose effective count ``ESS * min(p, 1 - p)`` is below
          ``min_effective_count`` is excluded from the overall p-value with a warning (the rule of
          thumb of the chi-square test with counts replaced by effective counts); lump rare states into
          one indicator to test them.

    Args:
        draw_indices: int array (num_chains, num_draws) of state numbers, e.g. from :func:`state_index`.
        exact_probs: exact probability of each state, e.g. from :func:`enumerate_posterior`.
        statistics: mapping from a name to the statistic's value at each state, shape (num_states,),
            e.g. ``np.asarray(jax.vmap(f)(states))``. Default: the indicator of each state, allowed up
            to ``MAX_DEFAULT_INDICATORS`` states; for more, pass e.g. indicators of the most probable
            states and label-free summaries.
        min_ess: smallest acceptable ESS of any statistic.
        min_effective_count: smallest effective count of a 0/1 statistic included in the p-value.

    Example:
        >>> import numpy as np
        >>> exact = np.array([0.2, 0.3, 0.5])
        >>> rng = np.random.default_rng(0)
        >>> iz.diagnostics.exact_gof_test(rng.choice(3, size=(4, 500), p=exact), exact).passed()
        True
        >>> iz.diagnostics.exact_gof_test(rng.choice(3, size=(4, 500), p=[0.3, 0.3, 0.4]), exact).passed()  # biased
        False
    """
    exact_probs = np.asarray(exact_probs, dtype=np.float64)
    if exact_probs.ndim != 1 or exact_probs.size == 0:
        raise ValueError(f"exact_probs: expected a non-empty 1-D array, got shape {exact_probs.shape}")
    if not np.all(np.isfinite(exact_probs)) or np.any(exact_probs < 0) or abs(exact_probs.sum() - 1) > 1e-6:
        raise ValueError("exact_probs: must be finite, non-negative and sum to 1")
    num_states = exact_probs.size
    draw_indices = np.asarray(draw_indices)
    if draw_indices.ndim != 2:
        raise ValueError(
            f"draw_indices: expected shape (num_chains, num_draws), got {draw_indices.shape}; "
            "use indices[None] for a single chain"
        )
    if draw_indices.shape[1] < 4:
        raise ValueError(f"draw_indices: need at least 4 draws per chain, got {draw_indices.shape[1]}")
    if not np.issubdtype(draw_indices.dtype, np.integer):
        raise ValueError(f"draw_indices: expected integer state numbers, got dtype {draw_indices.dtype}")
    if (draw_indices.min() < 0 or draw_indices.max() >= num_states):
        raise ValueError(f"draw_indices: state numbers must lie in [0, {num_states}) (the length of exact_probs)")
    names, values = _statistic_table(statistics, num_states)

    visited = np.unique(draw_indices)
    impossible = tuple(int(s) for s in visited if exact_probs[s] < IMPOSSIBLE_PROB)
    if impossible:
        warnings.warn(
            f"exact_gof_test: the draws visit states {list(impossible)} whose exact probability is "
            f"below {IMPOSSIBLE_PROB:g}: the sampler reaches impossible states",
            stacklevel=2,
        )

    exact_means = values @ exact_probs
    exact_sd = np.sqrt(((values - exact_means[:, None]) ** 2) @ exact_probs)
    degenerate = exact_sd <= _DEGENERATE_RTOL * np.maximum(1.0, np.abs(exact_means))
    draw_values = values[:, draw_indices]  # (num_statistics, num_chains, num_draws)
    mcmc_means = draw_values.mean(axis=(1, 2))
    ess = _effective_sample_sizes(draw_values, informative=~degenerate)
    low_ess = [name for name, e, flag in zip(names, ess, degenerate) if not (e >= min_ess or flag)]
    if low_ess:
        raise ValueError(
            f"draw_indices: ESS below min_ess={min_ess:g} for {low_ess} (ESS {np.round(ess, 1).tolist()}); "
            "draw more, or check that the chains mix"
        )

    mcse = exact_sd / np.sqrt(ess)
    z = _z_scores(mcmc_means, exact_means, mcse, degenerate)
    p_values = 2.0 * stats.norm.sf(np.abs(z))

    is_binary = np.all((values == 0) | (values == 1), axis=1)
    effective_count = ess * np.minimum(exact_means, 1.0 - exact_means)
    excluded_mask = is_binary & (effective_count < min_effective_count) & ~degenerate
    excluded = tuple(name for name, flag in zip(names, excluded_mask) if flag)
    if excluded:
        warnings.warn(
            f"exact_gof_test: {list(excluded)} have effective counts below {min_effective_count:g} and are "
            "left out of the overall p-value; lump rare states or draw more to test them",
            stacklevel=2,
        )
    if excluded_mask.all():
        raise ValueError("statistics: every statistic is too rare to test; lump rare states or draw more")
    included_p = p_values[~excluded_mask]
    p_value = 0.0 if impossible else float(min(1.0, included_p.size * included_p.min()))
    return GOFResult(
        names=names,
        exact_means=_read_only(exact_means),
        mcmc_means=_read_only(mcmc_means),
        ess=_read_only(ess),
        mcse=_read_only(mcse),
        z=_read_only(z),
        p_values=_read_only(p_values),
        excluded=excluded,
        impossible_states=impossible,
        p_value=p_value,
        num_draws=int(draw_indices.size),
    )


def _statistic_table(statistics, num_states: int) -> tuple[tuple[str, ...], np.ndarray]:
    """Names and a (num_statistics, num_states) float64 table of statistic values."""
    if statistics is None:
        if num_states > MAX_DEFAULT_INDICATORS:
            raise ValueError(
                f"statistics: required for more than {MAX_DEFAULT_INDICATORS} states (got {num_states}); pass "
                "e.g. indicators of the most probable states and label-free summaries"
            )
        return tuple(f"state {s}" for s in range(num_states)), np.eye(num_states)
    if not isinstance(statistics, Mapping) or not statistics:
        raise ValueError("statistics: expected a non-empty mapping from names to values at each state")
    rows = []
    for name, row in statistics.items():
        row = np.asarray(row, dtype=np.float64)
        if row.shape != (num_states,):
            raise ValueError(f"statistics[{name!r}]: expected shape ({num_states},), got {row.shape}")
        if not np.all(np.isfinite(row)):
            raise ValueError(f"statistics[{name!r}]: values must be finite")
        rows.append(row)
    return tuple(str(name) for name in statistics), np.stack(rows)


def _effective_sample_sizes(draw_values: np.ndarray, informative: np.ndarray) -> np.ndarray:
    """ArviZ multi-chain ESS of each statistic; constant statistics get the smallest ESS of the others.

    ``informative`` marks the statistics that vary under the exact distribution.
    """
    constant = np.all(draw_values == draw_values[:, :1, :1], axis=(1, 2))
    ess = np.full(draw_values.shape[0], np.nan)
    for i in np.flatnonzero(~constant):
        ess[i] = float(az.ess(draw_values[i], method="mean"))
    if informative.any() and np.all(constant[informative]):
        raise ValueError(
            "draw_indices: every statistic is constant over all draws (the chains never leave one state); "
            "their autocorrelation cannot be estimated: check that the sampler moves"
        )
    fallback = np.nanmin(ess) if np.any(~constant) else draw_values[0].size
    return np.where(constant, fallback, ess)


def _z_scores(mcmc_means, exact_means, mcse, degenerate) -> np.ndarray:
    """z-scores; a statistic constant under the exact distribution scores 0 if matched, else +-inf."""
    deviation = mcmc_means - exact_means
    matched = np.abs(deviation) <= _DEGENERATE_RTOL * np.maximum(1.0, np.abs(exact_means))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = deviation / mcse
    return np.where(degenerate, np.where(matched, 0.0, np.copysign(np.inf, deviation)), z)


def _read_only(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=np.float64)
    array.setflags(write=False)
    return array
