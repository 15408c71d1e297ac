"""Non-reversible parallel tempering shared by every MCMC kernel (Syed, Bouchard-Cote, Deligiannidis,
Doucet 2022, JRSS-B: "NRPT").

Each chain runs K replicas of a target kernel at inverse temperatures 0 = beta_0 < ... < beta_{K-1} = 1,
replica k targeting pi_k(x) proportional to p(x) L(x)^beta_k: the model file's prior kept whole and its
likelihood tempered, so rung 0 is the prior and rung K-1 the posterior, and a prior edit reaches every
rung. A kernel may instead start the path at a normalised reference distribution r of its own, as BRL's
does (Syed et al. sec. 2; :func:`path_log_likelihood`).

One *scan* is a local move of every replica (the kernel's ``step`` at the replica's beta) and one round
of swaps between neighbouring rungs, even or odd pairs in turn, which makes the index process
non-reversible (Syed et al. sec. 3; :func:`run_scans`). The schedule is tuned from the swap rejection
rates so that every neighbouring pair rejects equally often (Syed et al. sec. 5.1; :func:`tuned_schedule`),
with about 2 Lambda rungs for the global communication barrier Lambda (:func:`rungs_for_barrier`).
Stepping stone (Xie et al. 2011) gives the log marginal likelihood from the same scans (:func:`log_evidence`).

A *target kernel* (:class:`TargetKernel`) plugs in with module-level pure functions over a hashable
``static`` (shapes only) and a ``data`` pytree of arrays (the observations and the model file's prior and
likelihood tables), so one compiled program serves every fit of the same shapes. Every chain's random
stream comes from its own key (:func:`chain_keys`): chain c gets the same draws whatever the number of
chains run beside it, and on whichever device it runs (:func:`chain_mesh`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import time
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import random
from jax.sharding import Mesh, NamedSharding, PartitionSpec


def path_log_likelihood(states):
    """What the path tempers: log L, or log p + log L - log r for states with a ``log_reference``.

    A kernel may start the path at a normalised reference distribution r of its own (a state with a field
    ``log_reference``): pi_k(x) proportional to r(x)^(1 - beta_k) (p(x) L(x))^beta_k, the geometric path of
    Syed et al. sec. 2, which everywhere in the engine reads log L as log p + log L - log r; the posterior
    rung, and the evidence, are unchanged. The reference may be adapted from round to round, as the
    schedule is (Surjanovic et al. 2022, "variational reference"): BRL's follows its learned proposal
    (``inference.brl_mh``). A kernel whose reference it can draw from exactly may give the replica at
    beta = 0 an independent draw in its ``step`` (BRL's does, as Pigeons.jl does): a replica's round trip
    then regenerates the chain."""
    if hasattr(states, "log_reference"):
        return states.log_prior + states.log_likelihood - states.log_reference
    return states.log_likelihood


class TargetKernel(NamedTuple):
    """The four pure functions of a sampler that the engine runs, and optionally a proposal that the engine
    adapts between rounds (``inference.convergence``).

    ``init(static, data, key) -> state``: one replica, a dispersed start. ``step(static, data, states,
    keys, betas) -> (states, info)``: a batch of B replicas, each with its own key and inverse temperature,
    each leaving its pi_beta invariant; ``info`` holds what the moves did apart from the state, as in
    blackjax: an array (B,) or a NamedTuple of them, one value per replica and move, such as an acceptance
    probability, NaN where the step did not attempt the move (the runs report their means per rung,
    ``move_rates``). ``summaries(static, data, states)``: label-free scalars per replica.
    ``record(static, data, states)``: what a kept draw stores. A state has fields ``log_prior`` and
    ``log_likelihood`` (and ``log_reference`` on a path from a reference, :func:`path_log_likelihood`).
    ``static`` is hashable and holds shapes only; ``data`` is a pytree of arrays holding the observations
    and the model file's prior and likelihood tables, so one compiled program serves every fit of the same
    shapes.

    The proposal (whatever the kernel learns between rounds: BRL's rule weights, BCM's hottest rungs of
    the split-merge move): ``learn_proposal(static, data, records, states, proposal, facts) -> proposal``
    (small NumPy arrays) from a round's posterior-rung records (name -> (chain, draw, ...)), the final
    states of all replicas (on the device: a kernel copies the fields it reads with :func:`to_host`, so
    that no run holds a second copy of every state), the proposal the round ran with (None at first) and
    the round's :class:`RoundFacts`, and ``with_proposal(static, data, proposal) -> data``, the data (same shapes)
    whose ``step`` proposes with it. The proposal is fixed within a round, so each round is an MCMC run
    of a fixed kernel started where the one before stopped; the posterior rung's target never depends on it. Learned from all chains pooled, a proposal ties the chains together, and their
    agreement no longer shows a mode that all of them were led away from: BRL's learns in independent
    groups of chains (``inference.brl_mh.LEARNING_GROUPS``). A path's reference may follow it (BRL's, one
    for all chains, draws by the groups' weights averaged, so that a group's finds reach every chain; then
    ``step`` re-evaluates ``log_reference`` of the states it is given, which an earlier round's data
    evaluated).

    ``chain_rows(static, data)``: a pytree like ``data`` that is True at the leaves holding one row per
    chain (first axis, chain order; a ``step`` then reads chain c's row for the replicas of chain c, which
    come chain-major), such as BRL's per-chain proposal tables; None: every leaf serves every chain. A run
    over several devices gives each device the rows of its own chains (:func:`place_data`): each device
    steps its own chains only, so a ``step`` must treat its chains independently (:func:`ladder_scans`).

    ``scratch(static) -> (bytes, what, setting)``, optional: the memory one replica's ``step`` needs beyond
    its state, what it is, and the fit's setting that sizes it (or None), for the run's memory estimate
    (:func:`~interpretable_zoo.inference.convergence.check_run_memory`)."""

    init: Callable
    step: Callable
    summaries: Callable
    record: Callable
    learn_proposal: Callable | None = None
    with_proposal: Callable | None = None
    chain_rows: Callable | None = None
    scratch: Callable | None = None


class RoundFacts(NamedTuple):
    """What a round tells ``TargetKernel.learn_proposal`` beyond its draws: its ``schedule`` (K,), prior
    first; ``move_rates``, move name -> (K,) per rung (``RoundStatistics.move_rates``); ``tuned``: whether
    tuning has ended with this round, so that what is learned now is what the sampling rounds start with."""

    schedule: np.ndarray
    move_rates: dict
    tuned: bool


class Ladder(NamedTuple):
    """C chains of K replicas. ``states``: the kernel states, leading axis C * K (chain-major, replica
    slot within chain); ``rung_of_slot`` / ``slot_of_rung`` (C, K): the permutation between replica slots
    and rungs; ``phase`` (C, K): per slot, 0 before its first visit to the prior rung, 1 after leaving
    it, 2 after then reaching the posterior rung (a round trip ends at the next visit to the prior);
    ``rng_key`` (C,): one key per chain; ``scan`` (): scans run so far (its parity picks the swap pairs)."""

    states: Any
    rung_of_slot: jnp.ndarray
    slot_of_rung: jnp.ndarray
    phase: jnp.ndarray
    rng_key: jnp.ndarray
    scan: jnp.ndarray


class SwapStatistics(NamedTuple):
    """Sums over the scans of a chunk: ``rejection`` (C, K - 1) of 1 - alpha_k over each chain's attempted
    swaps (summed over chains on the host, in one order whatever the devices) and ``attempts`` (K - 1,)
    their number over all chains; ``log_stepping_stone`` (C, K - 1): per chain and rung
    k < K - 1, log sum over scans of exp((beta_{k+1} - beta_k) log L at rung k), over ``n_scans`` scans;
    ``round_trips`` (C,): prior -> posterior -> prior trips completed; ``moves``: what the kernel's steps
    reported (:class:`MoveTallies`)."""

    rejection: jnp.ndarray
    attempts: jnp.ndarray
    log_stepping_stone: jnp.ndarray
    n_scans: jnp.ndarray
    round_trips: jnp.ndarray
    moves: MoveTallies


@partial(jax.tree_util.register_dataclass, data_fields=("sums", "attempts"), meta_fields=("names",))
@dataclasses.dataclass(frozen=True)
class MoveTallies:
    """Per chain, rung and move (C, K, M), the ``sums`` of what the kernel's steps reported for the moves
    ``names`` (:func:`move_info`) and the ``attempts``, the steps that reported a value (not NaN). The moves
    share two arrays, so that a scan adds to them in a few operations whatever the number of moves a kernel
    reports (docs/decisions/brl-sampler.md)."""

    sums: jnp.ndarray
    attempts: jnp.ndarray
    names: tuple[str, ...]


def move_info(info) -> dict:
    """A step's ``info`` as move name -> (B,) float32: a NamedTuple's fields by name, a single array as
    "move"."""
    if isinstance(info, tuple) and hasattr(info, "_fields"):
        return {name: jnp.asarray(value, jnp.float32) for name, value in info._asdict().items()}
    return {"move": jnp.asarray(info, jnp.float32)}


def chain_keys(seed: int, num_chains: int):
    """One key per chain, ``fold_in(PRNGKey(seed), c)``: independent of how many chains run."""
    return _fold_in_chains(random.PRNGKey(seed), num_chains)


@partial(jax.jit, static_argnums=1)
def _fold_in_chains(base, num_chains: int):
    return jax.vmap(lambda c: random.fold_in(base, c))(jnp.arange(num_chains))


def chain_devices(num_chains: int, devices=None) -> list:
    """The devices that ``num_chains`` chains are split over (:func:`chain_mesh`). ``devices``: None takes
    the most of ``jax.devices()`` that divide the chains evenly; an integer, the first that many; a
    sequence of devices, those (its length dividing the chains)."""
    available = jax.devices()
    if devices is None:
        count = max(d for d in range(1, len(available) + 1) if num_chains % d == 0)
        chosen = available[:count]
    elif isinstance(devices, numbers.Integral) and not isinstance(devices, bool):
        if not 1 <= devices <= len(available):
            raise ValueError(f"devices: expected 1..{len(available)} (the devices JAX sees), got {devices}")
        chosen = available[:devices]
    else:
        chosen = list(devices)
        if not chosen or not all(isinstance(d, jax.Device) for d in chosen):
            raise ValueError(f"devices: expected None, an integer or a sequence of jax devices, got {devices!r}")
    if num_chains % len(chosen):
        raise ValueError(f"devices: {len(chosen)} devices do not divide num_chains={num_chains} evenly")
    return chosen


def chain_mesh(num_chains: int, devices=None) -> Mesh | None:
    """The one-axis device mesh (axis ``"chains"``) that ``num_chains`` chains are split over, or None
    for a single device; ``devices`` as in :func:`chain_devices`. A chain's draws do not depend on its
    device: its key is its own (:func:`chain_keys`) and every cross-chain sum is taken on the host.

    With several devices the chains, and each chain's replicas with them, are split over the mesh, the
    data are copied to every device (rows per chain go with their chains, :func:`place_data`), each device
    scans its own chains (:func:`ladder_scans`), and every sum over chains is taken on the host in one
    order, so 1, 2 or 4 devices give the same draws. With ``jax.distributed`` the mesh spans the devices of every host
    (one process per host) and the draws are gathered on each host (:func:`to_host`)."""
    chosen = chain_devices(num_chains, devices)
    return None if len(chosen) == 1 else Mesh(np.array(chosen), ("chains",))


def shard_ladder(ladder: Ladder, mesh: Mesh | None) -> Ladder:
    """``ladder`` with its chains (and each chain's replicas) split over ``mesh``; unchanged for None."""
    if mesh is None:
        return ladder
    by_chain, whole = NamedSharding(mesh, PartitionSpec("chains")), NamedSharding(mesh, PartitionSpec())
    split = lambda tree: jax.tree.map(lambda x: jax.device_put(x, by_chain), tree)  # noqa: E731
    return Ladder(split(ladder.states), split(ladder.rung_of_slot), split(ladder.slot_of_rung),
                  split(ladder.phase), split(ladder.rng_key), jax.device_put(ladder.scan, whole))


def data_specs(kernel: TargetKernel, static, data):
    """How the kernel's data lie over a chain mesh: a pytree of ``PartitionSpec``, ``("chains")`` for the
    leaves with a row per chain (``kernel.chain_rows``), ``()`` (a copy on every device) for the others."""
    if kernel.chain_rows is None:
        return PartitionSpec()
    return jax.tree.map(lambda by_chain: PartitionSpec("chains") if by_chain else PartitionSpec(),
                        kernel.chain_rows(static, data))


def place_data(kernel: TargetKernel, static, data, mesh: Mesh | None):
    """The kernel's data on the devices of ``mesh`` (:func:`data_specs`: the rows of each device's chains
    there, every other leaf copied to every device); unchanged for None."""
    if mesh is None:
        return data
    specs = data_specs(kernel, static, data)
    return jax.device_put(data, jax.tree.map(lambda spec: NamedSharding(mesh, spec), specs))


def to_host(x) -> np.ndarray:
    """``x`` as a NumPy array on this host; an array split over several hosts (``jax.distributed``) is
    gathered from all of them first."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


_CLOCK_ORIGIN = time.perf_counter()


def now() -> float:
    """Seconds on a clock that every process reads alike: ``time.perf_counter()`` in a single process; with
    several (``jax.distributed``), process 0's seconds since it imported this module, sent to all.

    Every decision a run takes from the clock (the ``max_seconds`` cut, a chunk shortened to fit it, when
    to write a checkpoint) reads it here, so every process takes it alike: the processes run the same
    compiled programs and gathers, and one that stopped or checkpointed alone would leave the others
    waiting in a collective that never comes, or pair their collectives wrongly."""
    if jax.process_count() == 1:
        return time.perf_counter()
    from jax.experimental import multihost_utils

    # float32 (JAX's default precision) keeps the seconds to a few milliseconds within a day
    return float(multihost_utils.broadcast_one_to_all(np.float32(time.perf_counter() - _CLOCK_ORIGIN)))


def initial_ladder(kernel: TargetKernel, static, data, rng_keys, n_rungs: int, initial_states=None) -> Ladder:
    """K independently initialised replicas per chain (``rng_keys`` (C,)), slot k at rung k; or, with
    ``initial_states`` (a state with leading axis C), every replica of chain c starting there."""
    ladder = _initial_ladder(kernel, static, data, rng_keys, n_rungs)
    if initial_states is None:
        return ladder
    return ladder._replace(states=jax.tree.map(lambda x: jnp.repeat(jnp.asarray(x), n_rungs, axis=0), initial_states))


def posterior_states(ladder: Ladder):
    """The state of each chain's posterior rung (leading axis C), as NumPy arrays (indexed on the host: on
    the device every operation would compile a program of its own)."""
    slot_of_rung, states = jax.tree.map(to_host, (ladder.slot_of_rung, ladder.states))
    n_chains, n_rungs = slot_of_rung.shape
    slots = slot_of_rung[:, -1] + np.arange(n_chains) * n_rungs
    return jax.tree.map(lambda x: np.asarray(x)[slots], states)


@partial(jax.jit, static_argnames=("kernel", "static", "n_rungs"))
def _initial_ladder(kernel, static, data, rng_keys, n_rungs):
    keys = jax.vmap(lambda key: random.split(key, n_rungs + 1))(rng_keys)  # (C, K + 1)
    replica_keys = keys[:, 1:].reshape(-1, *keys.shape[2:])
    # one replica after the other: a batched init holds every replica's temporaries at once (a BCM replica's
    # random draws over observations x features x clusters weigh up to 37 of its states)
    states = jax.lax.map(lambda key: kernel.init(static, data, key), replica_keys)
    n_chains = rng_keys.shape[0]
    order = jnp.broadcast_to(jnp.arange(n_rungs, dtype=jnp.int32), (n_chains, n_rungs))
    return Ladder(states, order, order, jnp.zeros((n_chains, n_rungs), jnp.int8), keys[:, 0], jnp.zeros((), jnp.int32))


def run_scans(kernel: TargetKernel, static, data, ladder: Ladder, schedule, n_scans: int, *, capacity: int | None = None,
              statistics: SwapStatistics | None = None):
    """``n_scans`` scans (local moves, then one even or odd swap round). Returns the new ladder, the
    chunk's :class:`SwapStatistics` and, per scan, the posterior rung's record, its summaries with
    ``log_joint`` added, and ``swap_accept`` (C,): the mean alpha of the swaps attempted in that scan
    (NumPy arrays, scan first). ``statistics``: those of the scans run before in the same chunk, which
    the new scans add to one by one (a chunk run in parts sums exactly as one run whole).

    A swap round tries the pairs (k, k + 1) with k even on even scans and k odd on odd scans (the
    deterministic even-odd scheme that makes the index process non-reversible, Syed et al. sec. 3). A
    swap is accepted with probability::

        alpha_k = min(1, exp((beta_{k+1} - beta_k) (log L(x_k) - log L(x_{k+1})))),

    and exchanges the replicas' rungs, not their states (a replica's state never moves in memory).

    The compiled program's outputs have ``capacity`` (default ``n_scans``) rows, of which the first
    ``n_scans`` are written, so one program serves every ``n_scans <= capacity``."""
    capacity = n_scans if capacity is None else capacity
    if not 0 < n_scans <= capacity:
        raise ValueError(f"n_scans: expected 1..{capacity}, got {n_scans}")
    schedule, n_scans_array = jax.device_put((np.asarray(schedule), np.int32(n_scans)))
    sharding = getattr(ladder.rng_key, "sharding", None)  # a ladder restored from a checkpoint holds NumPy arrays
    mesh = sharding.mesh if isinstance(sharding, NamedSharding) and sharding.mesh.size > 1 else None
    if statistics is None:
        statistics = no_statistics(kernel, static, data, ladder)
    ladder, statistics, outputs = ladder_scans(kernel, static, data, ladder, schedule, n_scans_array, capacity,
                                               statistics, mesh)
    return ladder, statistics, jax.tree.map(lambda x: to_host(x)[:n_scans], outputs)


def _move_shapes(kernel, static, data, ladder):
    """The shapes of ``move_info`` of a step of the ladder's replicas (traced, not run; through the jitted
    step that :func:`ladder_scans` runs, whose trace serves both)."""
    n_replicas = ladder.rung_of_slot.size
    keys = jax.vmap(lambda key: random.split(key, n_replicas // len(ladder.rng_key)))(ladder.rng_key)
    betas = jnp.zeros(n_replicas)
    step = jax.jit(kernel.step, static_argnums=0)
    return jax.eval_shape(lambda states, keys: move_info(step(static, data, states, keys, betas)[1]),
                          ladder.states, keys.reshape(-1, *keys.shape[2:]))


@partial(jax.jit, static_argnames=("kernel", "static"))
def no_statistics(kernel, static, data, ladder) -> SwapStatistics:
    """The :class:`SwapStatistics` of no scan, the start of a chunk's sums."""
    n_chains, n_rungs = ladder.slot_of_rung.shape
    moves = _move_shapes(kernel, static, data, ladder)
    return SwapStatistics(
        rejection=jnp.zeros((n_chains, n_rungs - 1)),
        attempts=jnp.zeros(n_rungs - 1),
        log_stepping_stone=jnp.full((n_chains, n_rungs - 1), -jnp.inf, dtype=float),  # not weakly typed, as the sums it starts
        n_scans=jnp.zeros(()),
        round_trips=jnp.zeros(n_chains, jnp.int32),
        moves=MoveTallies(jnp.zeros((n_chains, n_rungs, len(moves))), jnp.zeros((n_chains, n_rungs, len(moves))),
                          tuple(moves)),
    )


@partial(jax.jit, static_argnames=("kernel", "static", "capacity", "mesh"))
def ladder_scans(kernel, static, data, ladder, schedule, n_scans, capacity, statistics=None, mesh=None):
    """:func:`run_scans` as a traceable function (e.g. under ``jax.vmap`` over data sets): ``n_scans`` a
    traced count <= the static ``capacity``; the outputs keep all ``capacity`` rows (rows from
    ``n_scans`` on are zeros); ``statistics`` the sums the scans add to (None: :func:`no_statistics`).

    ``mesh``: the chain mesh that the ladder (:func:`shard_ladder`) and the data (:func:`place_data`) are
    split over, or None. Each device then runs the scans of its own chains as a program of its own
    (``jax.shard_map``), with no communication between devices until the chunk ends: a swap involves
    the replicas of one chain only, and compiled as one program over all chains, the kernel's indexing
    would exchange data between the devices at every step (between hosts too, with ``jax.distributed``)."""
    if statistics is None:
        statistics = no_statistics(kernel, static, data, ladder)
    if mesh is None:
        return _ladder_scans(kernel, static, data, ladder, schedule, n_scans, statistics, capacity=capacity,
                             n_devices=1)
    chains, copied = PartitionSpec("chains"), PartitionSpec()
    ladder_specs = Ladder(chains, chains, chains, chains, chains, copied)
    statistics_specs = SwapStatistics(chains, copied, chains, copied, chains, chains)
    per_device = jax.shard_map(
        partial(_ladder_scans, kernel, static, capacity=capacity, n_devices=mesh.size),
        mesh=mesh,
        in_specs=(data_specs(kernel, static, data), ladder_specs, copied, copied, statistics_specs),
        out_specs=(ladder_specs, statistics_specs, PartitionSpec(None, "chains")),
        check_vma=False,  # the kernels' loops carry constants that become per-device values; the copied outputs
        # (the scan count, the swap attempts) are computed from copied inputs alone
    )
    return per_device(data, ladder, schedule, n_scans, statistics)


def _ladder_scans(kernel, static, data, ladder, schedule, n_scans, statistics, capacity, n_devices):
    """:func:`ladder_scans` of the chains of one device, one of ``n_devices`` that hold as many chains each,
    adding to ``statistics`` (those chains' rows)."""
    n_chains, n_rungs = ladder.slot_of_rung.shape
    chain_offset = (jnp.arange(n_chains) * n_rungs)[:, None]
    pairs = jnp.arange(n_rungs - 1)
    gap = schedule[1:] - schedule[:-1]
    # traced once: for the shapes of its info here, then in the scan
    kernel_step = jax.jit(kernel.step, static_argnums=0)

    def scan_keys(ladder):
        """(keys (C, 2): the next key and the swaps'; the replicas' keys of the local moves (C * K,)), all
        from one split of each chain's key (a split's cost on a CPU is mostly per call, not per key)."""
        keys = jax.vmap(lambda key: random.split(key, n_rungs + 2))(ladder.rng_key)
        return keys[:, :2], keys[:, 2:].reshape(-1, *keys.shape[2:])

    def local_moves(ladder):
        keys, replica_keys = scan_keys(ladder)
        betas = schedule[ladder.rung_of_slot].reshape(-1)
        states, info = kernel_step(static, data, ladder.states, replica_keys, betas)
        return keys, states, move_info(info)

    moves = _move_shapes(kernel, static, data, ladder)

    def swap_round(ladder, states, keys):
        """Swaps between rungs k and k + 1 for k of this scan's parity: (log L at each rung (C, K), alpha
        (C, K - 1), attempted (K - 1,), the new slot_of_rung and rung_of_slot). With one rung there is no
        pair, and no round in the program (at one step a scan, it would cost a tenth of the scan)."""
        if n_rungs == 1:
            no_pairs = jnp.zeros((n_chains, 0))
            return jnp.zeros((n_chains, 1)), no_pairs, jnp.zeros(0, bool), ladder.slot_of_rung, ladder.rung_of_slot
        log_likelihood = path_log_likelihood(states).reshape(n_chains, n_rungs)
        at_rung = jnp.take_along_axis(log_likelihood, ladder.slot_of_rung, axis=1)  # (C, K)
        alpha = jnp.exp(jnp.minimum(0.0, gap * (at_rung[:, :-1] - at_rung[:, 1:])))  # (C, K - 1)
        attempted = pairs % 2 == ladder.scan % 2
        uniforms = jax.vmap(lambda key: random.uniform(key, (n_rungs - 1,)))(keys[:, 1])
        accept = attempted & (uniforms < alpha)
        no_pair = jnp.zeros((n_chains, 1), bool)
        source = jnp.arange(n_rungs) + jnp.concatenate([accept, no_pair], 1) - jnp.concatenate([no_pair, accept], 1)
        slot_of_rung = jnp.take_along_axis(ladder.slot_of_rung, source, axis=1)
        # a scatter, which keeps XLA's CPU backend from compiling a ladder's loop over scans as one function:
        # compiled whole, it compiles about twice as long for scans hardly faster, while the steps' loop within
        # is compiled whole anyway (interpretable_zoo.xla_flags, docs/decisions/brl-sampler.md)
        rung_of_slot = jnp.zeros_like(slot_of_rung).at[jnp.arange(n_chains)[:, None], slot_of_rung].set(
            jnp.arange(n_rungs, dtype=slot_of_rung.dtype)
        )
        return at_rung, alpha, attempted, slot_of_rung, rung_of_slot

    def after_step(ladder, statistics, keys, states, moves):
        """The scan's work after the local moves (``states``, and ``moves`` what they did per replica):
        swap round, statistics, posterior record."""
        # each move's value per chain, rung and move (C, K, M)
        reported = jnp.stack([moves[name] for name in statistics.moves.names], axis=-1)
        at_rungs = jnp.take_along_axis(reported.reshape(n_chains, n_rungs, -1), ladder.slot_of_rung[..., None], axis=1)
        attempted_move = ~jnp.isnan(at_rungs)
        at_rung, alpha, attempted, slot_of_rung, rung_of_slot = swap_round(ladder, states, keys)

        # round trips of the replicas' rung (index) processes
        at_prior, at_posterior = rung_of_slot == 0, rung_of_slot == n_rungs - 1
        completed = at_prior & (ladder.phase == 2)
        phase = jnp.where(at_prior, 1, jnp.where(at_posterior & (ladder.phase == 1), 2, ladder.phase)).astype(jnp.int8)

        statistics = SwapStatistics(
            rejection=statistics.rejection + jnp.where(attempted, 1.0 - alpha, 0.0),
            attempts=statistics.attempts + n_devices * n_chains * attempted,
            log_stepping_stone=jnp.logaddexp(statistics.log_stepping_stone, gap * at_rung[:, :-1]),
            n_scans=statistics.n_scans + 1,
            round_trips=statistics.round_trips + completed.sum(1),
            moves=MoveTallies(statistics.moves.sums + jnp.where(attempted_move, at_rungs, 0.0),
                              statistics.moves.attempts + attempted_move, statistics.moves.names),
        )  # fmt: skip
        ladder = Ladder(states, rung_of_slot, slot_of_rung, phase, keys[:, 0], ladder.scan + 1)

        # the posterior rung's states first, so that summaries and records cost C replicas, not C * K
        posterior_slot = (slot_of_rung[:, -1:] + chain_offset)[:, 0]
        posterior = jax.tree.map(lambda x: x[posterior_slot], states)
        summaries = dict(kernel.summaries(static, data, posterior))
        summaries["log_joint"] = posterior.log_prior + posterior.log_likelihood
        swap_accept = jnp.where(attempted, alpha, 0.0).sum(1) / jnp.maximum(attempted.sum(), 1)
        return (ladder, statistics), (kernel.record(static, data, posterior), summaries, swap_accept)

    def one_scan(carry):
        ladder, statistics = carry
        return after_step(ladder, statistics, *local_moves(ladder))

    carry = (ladder, statistics)
    # a step keeps the states' shapes: the outputs' shapes from the work after it, with the states before it
    output_shapes = jax.eval_shape(
        lambda ladder, statistics: after_step(
            ladder, statistics, scan_keys(ladder)[0], ladder.states, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), moves)
        )[1],
        *carry,
    )
    outputs = jax.tree.map(lambda x: jnp.zeros((capacity, *x.shape), x.dtype), output_shapes)

    def scan_into_row(index, carry_outputs):
        carry, outputs = carry_outputs
        carry, row = one_scan(carry)
        return carry, jax.tree.map(lambda rows, value: rows.at[index].set(value), outputs, row)

    # a loop of n_scans (traced) iterations writing into rows of buffers preallocated for all capacity rows:
    # one program for every n_scans <= capacity, with no work for the rows left zero
    (ladder, statistics), outputs = jax.lax.fori_loop(0, n_scans, scan_into_row, (carry, outputs))
    return ladder, statistics, outputs


class RoundStatistics(NamedTuple):
    """The swap statistics of a round of chunks, on the host: ``rejection``, ``attempts`` (K - 1,) summed;
    ``log_stepping_stone`` (B, K - 1) and ``batch_scans`` (B,): one batch per chain and chunk (for the
    batch-means standard error); ``round_trips`` and ``n_scans`` in total (per chain for scans);
    ``move_rates``: move name -> (K,), the mean per rung of what the kernel reported for the move over the
    steps that attempted it (NaN at a rung where none did)."""

    rejection: np.ndarray
    attempts: np.ndarray
    log_stepping_stone: np.ndarray
    batch_scans: np.ndarray
    round_trips: int
    n_scans: int
    move_rates: dict


def combine(chunks) -> RoundStatistics:
    """The :class:`RoundStatistics` of consecutive chunks' :class:`SwapStatistics`."""
    chunks = [jax.tree.map(to_host, chunk) for chunk in chunks]
    n_chains = chunks[0].log_stepping_stone.shape[0]
    return RoundStatistics(
        rejection=sum(chunk.rejection.sum(0) for chunk in chunks),
        attempts=sum(chunk.attempts for chunk in chunks),
        log_stepping_stone=np.concatenate([chunk.log_stepping_stone for chunk in chunks]),
        batch_scans=np.concatenate([np.full(n_chains, float(chunk.n_scans)) for chunk in chunks]),
        round_trips=int(sum(chunk.round_trips.sum() for chunk in chunks)),
        n_scans=int(sum(float(chunk.n_scans) for chunk in chunks)),
        move_rates=dict(zip(chunks[0].moves.names,
                            _ratio(sum(chunk.moves.sums.sum(0) for chunk in chunks),
                                   sum(chunk.moves.attempts.sum(0) for chunk in chunks)).T)),
    )  # fmt: skip


def _ratio(sums, counts) -> np.ndarray:
    """sums / counts, NaN where counts is 0."""
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def rejection_rates(statistics: RoundStatistics) -> np.ndarray:
    """r_k: the mean rejection probability 1 - alpha_k of each neighbouring pair over the round."""
    return statistics.rejection / np.maximum(statistics.attempts, 1)


def communication_barrier(statistics: RoundStatistics) -> float:
    """Lambda = sum_k r_k = Lambda(1), the global communication barrier estimated from a round (Syed et al.
    Thm. 3)."""
    return float(rejection_rates(statistics).sum())


def rungs_for_barrier(barrier: float, *, minimum: int = 2, maximum: int = 32) -> int:
    """About 2 Lambda rungs, rounded to the nearest power of two (fewer distinct compiled shapes),
    within [minimum, maximum]: the number that keeps the round-trip rate near its optimum
    1 / (2 + 2 Lambda) at the least cost. With N rungs each pair rejects about Lambda / N of its swaps,
    and the cost of a round trip, N (1 + sum_k r_k / (1 - r_k)) scans of one replica (Syed et al. sec.
    5.3), is smallest near N = 2 Lambda."""
    wanted = max(float(minimum), 2.0 * barrier)
    return int(min(maximum, max(minimum, 2 ** round(math.log2(wanted)))))


def cumulative_barrier(statistics: RoundStatistics) -> np.ndarray:
    """Lambda(beta_k) = sum_{j<k} r_j at each rung k of the round's schedule (K,), from 0 to Lambda."""
    return np.concatenate([[0.0], np.cumsum(rejection_rates(statistics))])


def tuned_schedule(schedule, statistics: RoundStatistics, n_rungs: int) -> np.ndarray:
    """``n_rungs`` inverse temperatures from 0 to 1 at equal steps of the cumulative barrier Lambda(beta)
    estimated from the round's rejection rates (Syed et al. Algorithm 4, piecewise-linear Lambda).

    The rejection rates r_k = E[1 - alpha_k] give the cumulative communication barrier Lambda(beta_k) =
    sum_{j<k} r_j (Syed et al. sec. 5.1), interpolated piecewise linearly and inverted at equally spaced
    levels, so that every neighbouring pair rejects equally often."""
    schedule = np.asarray(schedule, dtype=np.float64)
    cumulative = cumulative_barrier(statistics)
    # a flat stretch (no rejection) carries no barrier; a tiny floor keeps Lambda strictly increasing
    cumulative = cumulative + 1e-9 * np.arange(cumulative.size)
    levels = np.linspace(0.0, cumulative[-1], n_rungs)
    new = np.interp(levels, cumulative, schedule)
    new[0], new[-1] = 0.0, 1.0
    return new


def default_schedule(n_rungs: int) -> np.ndarray:
    """The starting schedule before any tuning: beta_k = (k / (K - 1))^3, dense near the prior where
    log-likelihood tempering changes the target fastest; (1,) for a single rung (no tempering)."""
    if n_rungs == 1:
        return np.ones(1)
    return np.linspace(0.0, 1.0, n_rungs) ** 3


def resized_ladder(ladder: Ladder, schedule, new_schedule) -> Ladder:
    """A ladder with ``len(new_schedule)`` rungs whose rung i starts from the current replica nearest in
    beta (the states are copied; the rung processes restart)."""
    schedule, new_schedule = np.asarray(schedule), np.asarray(new_schedule)
    n_chains, n_rungs = ladder.slot_of_rung.shape
    nearest = np.abs(new_schedule[:, None] - schedule[None, :]).argmin(1)  # old rung per new rung
    source = (to_host(ladder.slot_of_rung)[:, nearest] + np.arange(n_chains)[:, None] * n_rungs).reshape(-1)
    return _ladder_of_replicas(ladder.states, source, ladder.rng_key, ladder.scan)


@jax.jit
def _ladder_of_replicas(states, source, rng_key, scan) -> Ladder:
    """A ladder of the replicas ``source`` (chain-major, C * K) of ``states``, each chain's at its rungs
    in order; one program (run op by op, a resize compiled a program per state leaf)."""
    n_chains = rng_key.shape[0]
    n_rungs = source.shape[0] // n_chains
    order = jnp.broadcast_to(jnp.arange(n_rungs, dtype=jnp.int32), (n_chains, n_rungs))
    return Ladder(jax.tree.map(lambda x: x[source], states), order, order, jnp.zeros(order.shape, jnp.int8), rng_key, scan)


def log_evidence(statistics: RoundStatistics) -> tuple[float, float]:
    """Stepping-stone log Z over the round's scans pooled over chains, and its batch-means standard
    error (one batch per chain and chunk). NaN without tempering (one rung) or with a single batch.

    Stepping stone (Xie et al. 2011): log Z = sum_k log E_{pi_k}[exp((beta_{k+1} - beta_k) log L)], each
    expectation a running mean over the scans at rung k."""
    log_sums, scans = statistics.log_stepping_stone, statistics.batch_scans
    n_batches, pairs = log_sums.shape
    if pairs == 0 or statistics.n_scans == 0:
        return float("nan"), float("nan")
    pooled = float((np.logaddexp.reduce(log_sums, axis=0) - np.log(scans.sum())).sum())
    if n_batches < 2:
        return pooled, float("nan")
    per_batch = (log_sums - np.log(scans)[:, None]).sum(1)
    return pooled, float(per_batch.std(ddof=1) / np.sqrt(n_batches))
