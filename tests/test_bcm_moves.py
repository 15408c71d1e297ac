"""BCM's split-merge move, its joint prototype-and-omega block and the tempered kernel: the move and the
block applied to exact draws keep the (tempered) target invariant, with negative controls; tempered chains
against the enumerated tempered target; a refit of the same shapes compiles nothing; the NumPyro kernel
pickles; label-free summaries."""

import functools
import pickle
from functools import partial
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compile_events import compile_pipeline_events
from jax.scipy.special import logsumexp

from interpretable_zoo.diagnostics.exact import exact_gof_test, state_index
from interpretable_zoo.inference.bcm_gibbs import (
    SPLIT_MERGE_MIN_ACCEPTANCE,
    BCMGibbs,
    BCMTargetState,
    SplitMergeRungs,
    _prototypes_and_omega_block,
    learn_split_merge_rungs,
    make_target,
    split_merge_accept,
    split_merge_log_ratio,
    split_merge_proposal,
    state_from_params,
    step,
    summaries,
    with_split_merge_rungs,
)
from interpretable_zoo.inference.tempering import RoundFacts
from interpretable_zoo.models import bcm
from test_bcm_exact import (
    BETAS,
    N_CLUSTERS,
    OTHER_PRIORS,
    X_TINY,
    exact_draws,
    exact_probabilities,
    gof_of_draws,
    jit_init,
    jit_step,
    label_free_statistics,
    run_chains,
    with_padding_rows,
)

X_THREE = np.array([[0, 1], [1, 1]])  # N = 2, P = 2, for S = 3 clusters
NUM_DRAWS = 40000


@partial(jax.jit, static_argnums=0)
def _moved(static, data, keys, betas, params, hastings):
    """One split-merge move on every draw (each a replica of its own). With ``hastings`` False the move
    accepts with the target ratio alone, dropping the ratio of the proposal probabilities (the sums of
    T(launch -> relabelled current) and T(launch -> relabelled proposal)): a negative control."""
    states = jax.vmap(lambda p: state_from_params(static, data, p["omega"], p["prototype"], p["z"]))(params)

    def move(key, beta, state):
        key_proposal, key_accept = jax.random.split(key)
        proposal = split_merge_proposal(static, data, key_proposal, beta, state)
        target_ratio = logsumexp(proposal.log_target_proposed) - logsumexp(proposal.log_target_current)
        log_ratio = jnp.where(hastings, split_merge_log_ratio(proposal), target_ratio)
        return split_merge_accept(static, data, key_accept, beta, state, proposal, log_ratio)

    z, omega, prototype, _, _, accepted = jax.vmap(move)(keys, betas, states)
    return {"omega": omega, "prototype": prototype, "z": z}, accepted


def split_merge_of_exact_draws(x, n_clusters, priors, beta, move_beta=None, hastings=True, seed=0, padded_rows=None):
    """Draw states i.i.d. from the enumerated tempered target at ``beta``, apply one split-merge move
    (at ``move_beta``, default ``beta``; on the observations padded to ``padded_rows`` rows of random
    clusters, which must not move) to each, and test the moved states against the same target."""
    states, probs = exact_probabilities(priors, x, n_clusters, beta)
    key_draw, key_move = jax.random.split(jax.random.PRNGKey(seed))
    params = exact_draws(states, probs, NUM_DRAWS, key_draw)
    static, data = make_target(x, n_clusters, priors, padded_rows=padded_rows)
    params = with_padding_rows(params, static.n_obs, n_clusters, key_draw)
    betas = jnp.full(NUM_DRAWS, beta if move_beta is None else move_beta)
    moved, accepted = _moved(static, data, jax.random.split(key_move, NUM_DRAWS), betas, params, jnp.asarray(hastings))
    n_obs = len(x)
    np.testing.assert_array_equal(moved["z"][:, n_obs:], params["z"][:, n_obs:])  # padding rows never move
    moved, params = {**moved, "z": moved["z"][:, :n_obs]}, {**params, "z": params["z"][:, :n_obs]}
    changed = np.any(np.asarray(moved["z"]) != np.asarray(params["z"]), axis=(1, 2))
    assert changed.mean() > 0.05, changed.mean()  # the move does move
    indices = state_index({k: np.asarray(v) for k, v in moved.items()}, states).reshape(8, -1)
    return exact_gof_test(indices, probs, statistics=label_free_statistics(states)), float(np.mean(accepted))


CASES = {
    "S2": (X_TINY, N_CLUSTERS, OTHER_PRIORS),
    "S3": (X_THREE, 3, OTHER_PRIORS),
    "S3_paper_priors": (X_THREE, 3, bcm.Priors()),
}


@pytest.mark.parametrize(
    "case, beta", [("S2", 1.0), ("S2", 0.3), ("S3", 1.0), ("S3", 0.3), ("S3_paper_priors", 1.0)]
)
def test_split_merge_keeps_the_target_invariant(case, beta):
    result, acceptance = split_merge_of_exact_draws(*CASES[case], beta)
    assert result.passed(alpha=1e-3), result
    assert acceptance > 0.05


@pytest.mark.parametrize("case, beta", [("S2", 0.3), ("S3", 1.0)])
def test_split_merge_on_padded_observations_keeps_the_target_invariant(case, beta):
    """The move on the observations padded with 3 rows of random clusters (outside every move's blocks)."""
    x, n_clusters, priors = CASES[case]
    result, acceptance = split_merge_of_exact_draws(x, n_clusters, priors, beta, padded_rows=len(x) + 3)
    assert result.passed(alpha=1e-3), result
    assert acceptance > 0.05


@pytest.mark.parametrize("beta", [1.0, 0.3], ids=["posterior", "tempered"])
@pytest.mark.parametrize("case", ["S2", "S3"])
def test_split_merge_without_the_proposal_ratio_fails(case, beta):
    result, _ = split_merge_of_exact_draws(*CASES[case], beta, hastings=False)
    assert not result.passed(alpha=1e-3), result


def test_untempered_split_merge_fails_on_the_tempered_target():
    """The move built for beta = 1 does not keep the target at beta = 0.3 invariant."""
    result, _ = split_merge_of_exact_draws(*CASES["S3"], 0.3, move_beta=1.0)
    assert not result.passed(alpha=1e-3), result


@partial(jax.jit, static_argnums=0)
def _parameters_redrawn(static, data, keys, betas, params):
    """The joint prototype-and-omega block on every draw (each a replica of its own)."""
    states = jax.vmap(lambda p: state_from_params(static, data, p["omega"], p["prototype"], p["z"]))(params)
    omega, prototype = jax.vmap(lambda key, beta, state: _prototypes_and_omega_block(static, data, key, beta, state.cell_counts))(
        keys, betas, states
    )
    return {"omega": omega, "prototype": prototype, "z": params["z"]}


@pytest.mark.parametrize("beta, block_beta, keeps", [(1.0, 1.0, True), (0.3, 0.3, True), (0.3, 1.0, False)],
                         ids=["posterior", "tempered", "untempered_block_on_tempered_target"])
def test_prototypes_and_omega_drawn_jointly_keep_the_target_invariant(beta, block_beta, keeps):
    """Exact draws of the (tempered) target at ``beta``, their prototypes and omega redrawn by the block at
    ``block_beta``: the same target when the two agree; the negative control (the block at beta = 1 on
    the target at 0.3) must fail."""
    x, n_clusters, priors = CASES["S3"]
    states, probs = exact_probabilities(priors, x, n_clusters, beta)
    key_draw, key_block = jax.random.split(jax.random.PRNGKey(3))
    params = exact_draws(states, probs, NUM_DRAWS, key_draw)
    static, data = make_target(x, n_clusters, priors)
    moved = _parameters_redrawn(static, data, jax.random.split(key_block, NUM_DRAWS), jnp.full(NUM_DRAWS, block_beta), params)
    changed = np.any(np.asarray(moved["prototype"]) != np.asarray(params["prototype"]), axis=1)
    assert changed.mean() > 0.05, changed.mean()  # the block does move the prototypes
    indices = state_index({k: np.asarray(v) for k, v in moved.items()}, states).reshape(8, -1)
    result = exact_gof_test(indices, probs, statistics=label_free_statistics(states))
    assert result.passed(alpha=1e-3) == keeps, result


@functools.cache
def tempered_draws():
    """Whole sweeps (split-merge on every fourth, the default) on X_TINY: chains 0-3 at beta = 0.4, chains
    4-7 at beta = 0."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS)
    return run_chains(static, data, jax.random.PRNGKey(2), jnp.array([0.4] * 4 + [0.0] * 4), 200, 2000)


@functools.cache
def power_table_tempered_draws():
    """As :func:`tempered_draws`, with the tempered z sweep reading w ** beta from its table of powers, which
    the fits use where it pays and X_TINY's target alone would not."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, power_table=True)
    assert static.power_table and not make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS)[0].power_table
    return run_chains(static, data, jax.random.PRNGKey(2), jnp.array([0.4] * 4 + [0.0] * 4), 200, 2000)


@functools.cache
def gated_tempered_draws():
    """As :func:`tempered_draws`, with the split-merge move kept to inverse temperatures up to 0.2 and run
    replica by replica, as a tempered fit runs it: the chains at beta = 0.4 run without it, those at
    beta = 0 with it."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, split_merge_in_turn=True)
    return run_chains(static, with_split_merge_rungs(static, data, SplitMergeRungs(0.2, True)), jax.random.PRNGKey(2),
                      jnp.array([0.4] * 4 + [0.0] * 4), 200, 2000)


@pytest.mark.parametrize("draws", [tempered_draws, gated_tempered_draws, power_table_tempered_draws],
                         ids=["split_merge_everywhere", "gated", "power_table"])
@pytest.mark.parametrize(
    "chains, exact_beta, passes",
    [(slice(0, 4), 0.4, True), (slice(0, 4), 0.8, False), (slice(4, 8), 0.0, True)],
    ids=["beta_0.4", "other_beta_must_fail", "beta_0_is_the_prior"],
)
def test_tempered_chains_match_the_enumerated_tempered_target(draws, chains, exact_beta, passes):
    states, probs = exact_probabilities(OTHER_PRIORS, beta=exact_beta)
    result = gof_of_draws({name: value[chains] for name, value in draws().items()}, states, probs)
    assert result.passed(alpha=1e-3) == passes, result


@pytest.mark.parametrize("posterior", [True, False], ids=["and_at_the_posterior", "not_at_the_posterior"])
def test_split_merge_runs_on_its_rungs_only(posterior):
    """With the move kept to beta <= 0.45 (and beta = 1 or not), a due sweep of a replica on those rungs
    draws exactly what it draws with the move everywhere, and one elsewhere exactly what a sweep without
    the move draws; the info reports NaN (not attempted) elsewhere. The move run replica by replica over
    the due ones draws exactly what one batch over all replicas, masked, draws."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS)
    in_turn, _ = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, split_merge_in_turn=True)
    gated = with_split_merge_rungs(static, data, SplitMergeRungs(0.45, posterior))
    states = jit_init(static, data, jax.random.split(jax.random.PRNGKey(12), 8))
    betas = jnp.tile(jnp.array([0.0, 0.45, 0.5, 1.0]), 2)
    on_rungs = (np.asarray(betas) <= 0.45) | (posterior & (np.asarray(betas) == 1.0))
    for i in range(6):
        keys = jax.random.split(jax.random.PRNGKey(20 + i), 8)
        due = states._replace(sweeps=jnp.zeros(8, jnp.int32))
        moved, info = jit_step(in_turn, gated, due, keys, betas)
        batched, batched_info = jit_step(static, gated, due, keys, betas)
        everywhere, _ = jit_step(static, data, due, keys, betas)
        not_due, _ = jit_step(static, data, states._replace(sweeps=jnp.ones(8, jnp.int32)), keys, betas)
        for name in ("z", "omega", "prototype", "row_counts", "cell_counts", "log_prior", "log_likelihood"):
            np.testing.assert_array_equal(getattr(moved, name), getattr(batched, name))
            np.testing.assert_array_equal(getattr(moved, name)[on_rungs], getattr(everywhere, name)[on_rungs])
            np.testing.assert_array_equal(getattr(moved, name)[~on_rungs], getattr(not_due, name)[~on_rungs])
        accepted = np.asarray(info.split_merge_accepted)
        np.testing.assert_array_equal(accepted, np.asarray(batched_info.split_merge_accepted))
        assert np.isnan(accepted[~on_rungs]).all() and not np.isnan(accepted[on_rungs]).any()
        states = moved


def test_under_vmap_over_data_sets_the_split_merge_move_stays_a_branch():
    """Vmapped over data sets (simulation-based calibration, a fit traced per data set), whose sweep counts
    are one value but whose rungs differ, the step branches on the sweep count: the move is skipped on the
    sweeps that do not run it, not computed for every replica and dropped. A branch on the rungs too would
    become a select under vmap."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS)
    states = jit_init(static, data, jax.random.split(jax.random.PRNGKey(13), 4))
    shared_sweeps = BCMTargetState(*[0] * 7, None)
    stacked = jax.tree.map(lambda x, axis: x if axis is None else jnp.stack([x, x]), states, shared_sweeps)

    def one_data_set(betas, states):
        return step(static, data, states, jax.random.split(jax.random.PRNGKey(14), 4), betas)

    jaxpr = jax.make_jaxpr(jax.vmap(one_data_set, in_axes=(0, shared_sweeps)))(jnp.ones((2, 4)), stacked)
    branches = [max(len(branch.jaxpr.eqns) for branch in eqn.params["branches"])
                for eqn in jaxpr.jaxpr.eqns if eqn.primitive.name == "cond"]
    assert max(branches, default=0) > 100, branches  # the move's branch, hundreds of operations


def _facts(rates, tuned=True):
    return RoundFacts(np.array([0.0, 0.1, 0.3, 0.6, 1.0]), {"split_merge_accepted": np.asarray(rates, float)}, tuned)


def test_split_merge_rungs_are_learned_once_tuning_ends_and_then_kept():
    """The move is kept to the hottest rungs whose acceptances exceed SPLIT_MERGE_MIN_ACCEPTANCE by the most
    in sum, and to the posterior's if it reaches it there (a rung that ran none counts as neutral); learned
    once tuning has ended, then fixed; a ladder of one rung keeps the move."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS)
    least = SPLIT_MERGE_MIN_ACCEPTANCE

    def learned(rates, before=None, tuned=True):
        return learn_split_merge_rungs(static, data, None, None, before, _facts(rates, tuned))

    assert learned([0.9, 0.3, least / 2, 0.0, 0.0]) == (np.float32(0.1), False)
    assert learned([0.9, 0.3, least / 2, 3 * least, least]) == (np.float32(0.6), True)  # a cold rung pays the gap
    assert learned([0.9, 0.3, 0.0, least + 0.01, 0.2]) == (np.float32(0.1), True)  # a lone acceptance does not
    assert learned([0.9, np.nan, 0.3, 0.0, np.nan]) == (np.float32(0.3), True)
    assert learned([0.0, 0.0, 0.0, 0.0, 0.0]) == (np.float32(-1.0), False)
    assert learned([0.9, 0.3, 0.0, 0.0, 0.0], tuned=False) is None  # still tuning: every rung measured
    kept = SplitMergeRungs(np.float32(0.1), False)
    assert learned([0.9, 0.9, 0.9, 0.9, 0.9], before=kept) == kept  # fixed after tuning
    one_rung = RoundFacts(np.array([1.0]), {"split_merge_accepted": np.array([0.0])}, True)
    assert learn_split_merge_rungs(static, data, None, None, None, one_rung) is None


def test_a_refit_of_the_same_shapes_compiles_nothing():
    """A jitted step with other data, other priors and another seed of the same shapes: no tracing, no
    lowering, no backend compile (the events JAX reports for each)."""
    def run(x, priors, seed):
        static, data = make_target(x, N_CLUSTERS, priors, n_values=np.array([2, 2]))
        keys = jax.random.split(jax.random.PRNGKey(seed), 8)
        states = jit_init(static, data, keys)
        events.clear()
        return jax.block_until_ready(jit_step(static, data, states, keys, BETAS)[0])

    with compile_pipeline_events() as events:
        run(X_TINY, bcm.Priors(), 0)
        jax.jit(lambda value: value * 3.0 - 1.0)(jnp.ones(7))  # a new program: the listener sees its tracing
        assert any("jaxpr_trace" in event for event in events), events
        result = run(1 - X_TINY, bcm.Priors(alpha=0.5, lam=2.0, c=10.0, q=0.3), 1)
        assert events == [], events
    assert np.all(np.isfinite(result.log_likelihood))


def test_numpyro_kernel_keeps_no_state_and_pickles():
    kernel = BCMGibbs()
    before = pickle.dumps(kernel)
    state = kernel.init(jax.random.PRNGKey(0), 0, None, (X_TINY, N_CLUSTERS), {})
    assert pickle.dumps(kernel) == before
    restored = pickle.loads(before)
    again = restored.init(jax.random.PRNGKey(0), 0, None, (X_TINY, N_CLUSTERS), {})
    for name in ("omega", "prototype", "z"):
        np.testing.assert_array_equal(again.params[name], state.params[name])


def test_summaries_are_sorted_cluster_sizes_and_subspace_size():
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS)
    states = jit_init(static, data, jax.random.split(jax.random.PRNGKey(0), 8))
    values = summaries(static, data, states)
    assert set(values) == {"cluster_size_0", "cluster_size_1", "n_subspace_features"}
    sizes = np.stack([values["cluster_size_0"], values["cluster_size_1"]], -1)
    np.testing.assert_array_equal(sizes, -np.sort(-np.asarray(states.row_counts).sum(1), -1))
    np.testing.assert_array_equal(values["n_subspace_features"], np.asarray(states.omega).sum((1, 2)))


@pytest.mark.parametrize(
    "arguments, name",
    [
        ((np.array([0, 1]), 2), "x"),
        ((np.array([[0, -1], [1, 1]]), 2), "x"),
        ((X_TINY, 0), "n_clusters"),
        ((X_TINY, 2, None, np.array([1, 2])), "n_values"),
        ((X_TINY, 2, {"alpha": 1.0}), "priors"),
    ],
)
def test_make_target_names_bad_arguments(arguments, name):
    with pytest.raises(ValueError, match=name):
        make_target(*arguments)


@pytest.mark.parametrize("name", ["split_merge_every", "split_merge_posterior_every"])
@pytest.mark.parametrize("every", [0, 1.5, True])
def test_make_target_names_a_bad_split_merge_period(name, every):
    with pytest.raises(ValueError, match=name):
        make_target(X_TINY, N_CLUSTERS, **{name: every})


def test_split_merge_runs_on_every_kth_sweep_only():
    """With split_merge_every=3, sweeps 0, 3, 6, ... of a replica run the move; the others report NaN (not
    attempted). At beta = 0 (the prior) most proposals are accepted, so the due sweeps show acceptances."""
    static, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, split_merge_every=3)
    states = jit_init(static, data, jax.random.split(jax.random.PRNGKey(11), 8))
    accepted = []
    for i in range(9):
        states, info = jit_step(static, data, states, jax.random.split(jax.random.PRNGKey(i), 8), jnp.zeros(8))
        accepted.append(np.asarray(info.split_merge_accepted))
    accepted = np.array(accepted)  # (sweep, replica)
    due = np.arange(9) % 3 == 0
    assert np.isnan(accepted[~due]).all() and not np.isnan(accepted[due]).any()
    assert accepted[due].mean() > 0.3
    np.testing.assert_array_equal(states.sweeps, np.full(8, 9))


def test_the_posterior_rung_runs_the_move_on_its_own_period():
    """With split_merge_every=3 and split_merge_posterior_every=1, a replica at beta = 1 runs the move on
    every sweep and one at beta < 1 on sweeps 0, 3, 6, ...; replica by replica and as one batch, the same
    draws."""
    options = dict(split_merge_every=3, split_merge_posterior_every=1)
    in_turn, data = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, split_merge_in_turn=True, **options)
    batch, _ = make_target(X_TINY, N_CLUSTERS, OTHER_PRIORS, **options)
    betas = jnp.tile(jnp.array([0.0, 0.5, 1.0, 1.0]), 2)
    states = jit_init(in_turn, data, jax.random.split(jax.random.PRNGKey(15), 8))
    attempted = []
    for i in range(6):
        keys = jax.random.split(jax.random.PRNGKey(30 + i), 8)
        moved, info = jit_step(in_turn, data, states, keys, betas)
        batched, batched_info = jit_step(batch, data, states, keys, betas)
        for name in ("z", "omega", "prototype", "row_counts", "cell_counts"):
            np.testing.assert_array_equal(getattr(moved, name), getattr(batched, name))
        np.testing.assert_array_equal(info.split_merge_accepted, batched_info.split_merge_accepted)
        attempted.append(~np.isnan(np.asarray(info.split_merge_accepted)))
        states = moved
    attempted = np.array(attempted)  # (sweep, replica)
    posterior = np.asarray(betas) == 1.0
    assert attempted[:, posterior].all()
    np.testing.assert_array_equal(attempted[:, ~posterior], np.broadcast_to((np.arange(6) % 3 == 0)[:, None], (6, 4)))


class _TargetBuilt(Exception):
    """Raised by the stand-in of ``make_target`` once the test has read the fit's options."""


@pytest.mark.parametrize(
    "platform, n_temperatures, in_turn",
    [("cpu", 4, True), ("gpu", 4, False), ("cpu", 1, None)],
    ids=["ladder_on_cpu_loops", "ladder_on_gpu_batches", "one_rung_keeps_the_defaults"],
)
def test_fit_bcm_runs_the_split_merge_move_in_turn_on_a_cpu_ladder_only(monkeypatch, platform, n_temperatures, in_turn):
    """A tempered fit loops over the due replicas on the CPU, where the rungs left out then cost nothing, and
    runs one masked batch on an accelerator, whose replicas run side by side (both draw the same: above)."""
    from interpretable_zoo.inference import bcm, bcm_gibbs, tempering

    options = []

    def built(*args, **kwargs):
        options.append(kwargs)
        raise _TargetBuilt

    monkeypatch.setattr(bcm_gibbs, "make_target", built)
    monkeypatch.setattr(tempering, "chain_devices", lambda num_chains, devices=None: [SimpleNamespace(platform=platform)])
    with pytest.raises(_TargetBuilt):
        bcm.fit_bcm(X_TINY, N_CLUSTERS, n_temperatures=n_temperatures, progress_bar=False)
    assert options[0].get("split_merge_in_turn") is in_turn
    assert options[0].get("split_merge_posterior_every") == (None if n_temperatures == 1 else 1)


def test_chain_devices_are_those_the_chain_mesh_is_laid_over():
    from interpretable_zoo.inference.tempering import chain_devices, chain_mesh

    assert chain_devices(4) == chain_devices(4, 1) == chain_devices(4, jax.devices()[:1]) == jax.devices()[:1]
    assert chain_mesh(4) is None
    with pytest.raises(ValueError, match="devices"):
        chain_devices(4, [object()])
