"""Metropolis-Hastings over rule lists with bit-vector captures (Letham et al. 2015; Yang et al. 2017).

Proposals (Letham sec. 3, plus replace and neighbour): insert a rule not in the list at one of the m + 1
positions, delete one of the m rules, swap two of them, replace one of them by a rule not in the list
(same position), or exchange one of them for one of its neighbours N(a), antecedents that differ from it
in one item (:func:`neighbour_tables`). Every choice is drawn exactly, so the Hastings ratio is exact
(:func:`propose`, :func:`log_hastings_table`); the rule an insert or replace puts in is drawn by weights
learned from round to round (:func:`learn_proposal`). A rule's captures and label counts are bit
operations and population counts (:func:`label_counts`, Yang et al.'s speed trick), and the log target
is :func:`~interpretable_zoo.models.brl.log_prior_from_tables` +
:func:`~interpretable_zoo.models.brl.log_marginal_likelihood_from_tables` on the model file's tables, so a
step gathers and adds instead of evaluating log Gamma.

Tempered, a replica at inverse temperature beta targets r(d)^(1 - beta) (p(d) p(y | d))^beta, the path
from a reference r (:func:`log_reference_density`) to the posterior (``interpretable_zoo.inference.tempering``):
lists of different lengths are separated by the prior as much as by the likelihood, and the reference's
long lists of the rules that the chains use join them. The reference is drawn from exactly
(:func:`reference_draw`), and :func:`step` gives the replica at beta = 0 a fresh draw before its
Metropolis-Hastings steps, so that a round trip to the reference regenerates a chain.

The kernel is four pure functions (:func:`make_target`, :func:`init`, :func:`step`, :func:`summaries`)
over a hashable :class:`BRLStatic` (sizes, in buckets so that fits of close sizes share one compiled
program, and switches) and a :class:`BRLData` of arrays (the data and every table); :func:`step` runs
``static.steps_per_call`` iterations of every replica of a batch, each at its own inverse temperature.
:class:`BRLMetropolisHastings` runs the same functions at inverse temperature 1 as a NumPyro kernel.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, random
from numpyro.infer.mcmc import MCMCKernel
from scipy.special import gammaln, logsumexp

from interpretable_zoo.inference import hyperpriors, memory, tempering
from interpretable_zoo.inference.shapes import size_bucket
from interpretable_zoo.inference.validation import check_positive_int
from interpretable_zoo.models import brl

INSERT, DELETE, SWAP, REPLACE, NEIGHBOUR, STAY = 0, 1, 2, 3, 4, 5
MOVES = (INSERT, DELETE, SWAP, REPLACE, NEIGHBOUR)
"""The move types drawn; STAY is a null move (a ticket past the last whole multiple, :func:`propose`)."""
REVERSE_MOVE = (DELETE, INSERT, SWAP, REPLACE, NEIGHBOUR, STAY)
LENGTH_CHANGE = (1, -1, 0, 0, 0, 0)

TICKET_BITS = 23
"""A float32 uniform is a multiple of 2^-23, so floor(2^23 u) is an exactly uniform integer below 2^23."""

UNIFORMS_PER_STEP = 5
"""Uniforms one Metropolis-Hastings step consumes. Four are for :func:`propose`, one for the acceptance."""

WORD_BUCKETS_PER_DOUBLING = 8
"""Word counts are rounded up to m 2^e with WORD_BUCKETS_PER_DOUBLING <= m < 2 WORD_BUCKETS_PER_DOUBLING."""

PLANE_MULTIPLE = 2
"""Bit planes of merged samples' multiplicities are rounded up to a multiple of this (:func:`bit_planes`):
resampled rows move the largest multiplicity across a power of two (Titanic's lies around 512), and an
even plane count keeps such refits on one compiled program."""

NEIGHBOUR_BUCKETS_PER_DOUBLING = 1
"""The flat neighbour list's length is rounded up to a power of two (:func:`neighbour_list_size`): the
relation's size varies more between fits of close data (bootstrap rows, folds) than the antecedent
count does, and one bucket per doubling keeps such refits on one compiled program."""


class BRLStatic(NamedTuple):
    """The shapes and switches of a target (hashable; equal for fits of sizes in the same buckets).

    Sizes are padded to buckets so that fits of close sizes share one compiled program: the antecedents to
    the next power of two (padded antecedents are never proposed and hold for no sample) and the 32-bit
    words of a bit vector to the next m 2^e with 8 <= m < 16 (at most 12.5% more words; padded samples
    carry no label bit).

    antecedent_slots: antecedents represented (``|A|`` rounded up to a power of two); n_words: 32-bit
    words per bit vector (bucketed); n_classes; capacity: the longest list; max_cardinality: C;
    cardinalities_can_run_out: :func:`~interpretable_zoo.models.brl.cardinalities_can_run_out` (when False the log prior
    sums over cardinality counts instead of position by position); steps_per_call: Metropolis-Hastings
    iterations per call of :func:`step`; neighbour_moves: whether the neighbour move is drawn (the
    antecedents have neighbours, :func:`neighbour_tables`); tempered: whether replicas may run below beta = 1
    (False: every replica targets the posterior, so the tempering reference is never evaluated and a
    state's ``log_reference`` stays 0; an untempered step is then about a tenth cheaper).
    """

    antecedent_slots: int
    n_words: int
    n_classes: int
    capacity: int
    max_cardinality: int
    cardinalities_can_run_out: bool
    steps_per_call: int = 1
    neighbour_moves: bool = False
    tempered: bool = True


class BRLData(NamedTuple):
    """Everything that differs between fits of one :class:`BRLStatic`, as arrays.

    truth_bits (antecedent_slots + 1, n_words) uint32: the samples each antecedent holds for (rows
    from n_antecedents on are empty; the last is read for the padding -1); label_bits (L, P, n_words):
    classes 0..L-2, then all samples (the last class is counted as the rest), in P bit planes of the
    samples' multiplicities (P = 1 when no samples are merged; :func:`distinct_samples`); cardinality_index
    (antecedent_slots,): c - 1 of each antecedent; n_antecedents: ``|A|`` (int scalar); prior: the model
    file's :class:`~interpretable_zoo.models.brl.PriorTables`; likelihood: its :class:`~interpretable_zoo.models.brl.LikelihoodTables`
    for the samples' count rounded up to a word bucket; log_hastings (5, capacity + 1):
    :func:`log_hastings_table`; reference_length (capacity + 1,) and reference_ticket_bounds
    (antecedent_slots,) int32: the tempering reference's log length probabilities
    (:func:`reference_length_table`) and its rule weights as tickets (:func:`reference_rule_tables`); ticket_bounds
    (antecedent_slots,) int32 and log_rule_choice (antecedent_slots + 1,): the proposal's rule tickets
    (:func:`rule_choice_tables`); neighbour_starts (antecedent_slots + 1,), neighbour_list and
    log_neighbour_choice (antecedent_slots + 1,): the neighbour relation in compressed rows
    (:func:`neighbour_tables`).
    """

    truth_bits: jnp.ndarray
    label_bits: jnp.ndarray
    cardinality_index: jnp.ndarray
    n_antecedents: jnp.ndarray
    prior: brl.PriorTables
    likelihood: brl.LikelihoodTables
    log_hastings: jnp.ndarray
    reference_length: jnp.ndarray
    reference_ticket_bounds: jnp.ndarray
    ticket_bounds: jnp.ndarray
    log_rule_choice: jnp.ndarray
    neighbour_starts: jnp.ndarray
    neighbour_list: jnp.ndarray
    log_neighbour_choice: jnp.ndarray


class BRLState(NamedTuple):
    """One replica: the padded list (``rules`` (capacity,) with -1 after ``length``), its log prior, log
    likelihood and log reference density (:func:`log_reference_density`, re-evaluated at every
    :func:`step`, since the reference follows the learned weights)."""

    rules: jnp.ndarray
    length: jnp.ndarray
    log_prior: jnp.ndarray
    log_likelihood: jnp.ndarray
    log_reference: jnp.ndarray


class BRLInfo(NamedTuple):
    """What a :func:`step` did, per replica: ``accept_prob``, the mean Metropolis-Hastings acceptance
    probability of its iterations (a null move, STAY, counts as accepted); ``null_share``, the share of
    iterations whose proposal was a null move (:func:`propose`); ``<move>_accept_prob`` for each move type
    of :data:`MOVES`, the mean acceptance probability of the iterations that proposed that move, NaN where
    none did, so that the engine reports it per rung over the scans that tried it."""

    accept_prob: jnp.ndarray
    null_share: jnp.ndarray
    insert_accept_prob: jnp.ndarray
    delete_accept_prob: jnp.ndarray
    swap_accept_prob: jnp.ndarray
    replace_accept_prob: jnp.ndarray
    neighbour_accept_prob: jnp.ndarray

    @classmethod
    def of_iterations(cls, moves, accept_probs) -> "BRLInfo":
        """The info of iterations along axis 0: ``moves`` and ``accept_probs`` (steps, ...)."""
        per_move = []
        for move in MOVES:
            proposed = moves == move
            attempts = proposed.sum(axis=0)
            total = jnp.where(proposed, accept_probs, 0.0).sum(axis=0)
            per_move.append(jnp.where(attempts > 0, total / jnp.maximum(attempts, 1), jnp.nan))
        return cls(accept_probs.mean(axis=0), (moves == STAY).mean(axis=0, dtype=accept_probs.dtype), *per_move)


def pack_bits(bits, n_words: int):
    """Pack the last axis of a boolean array into ``n_words`` uint32 words (bit k of word w is element
    32 w + k, zeros beyond the array); with NumPy for concrete input, with JAX for traced input."""
    if not isinstance(bits, jax.core.Tracer):  # one bit per element: no wider copy of a large truth table
        bits = np.asarray(bits, dtype=bool)
        padded = np.zeros((*bits.shape[:-1], n_words * 32), bool)  # C order, whatever the layout of bits
        padded[..., : bits.shape[-1]] = bits
        return np.packbits(padded, axis=-1, bitorder="little").view("<u4").astype(np.uint32)
    padded = jnp.pad(bits.astype(bool), [(0, 0)] * (bits.ndim - 1) + [(0, n_words * 32 - bits.shape[-1])])
    words = padded.reshape(*bits.shape[:-1], n_words, 32).astype(jnp.uint32)
    return (words << jnp.arange(32, dtype=jnp.uint32)).sum(axis=-1, dtype=jnp.uint32)


def pack_labels(y, n_classes: int, n_words: int, multiplicity=None):
    """``label_bits`` of :class:`BRLData` (L, P, n_words) for labels 0..n_classes-1 (``y`` may be
    traced) of samples of the given ``multiplicity`` (NumPy integers; None: one plane, each sample once)."""
    xp = jnp if isinstance(y, jax.core.Tracer) else np
    y = xp.asarray(y)
    classes = y[None, :] == xp.arange(n_classes - 1)[:, None]
    labels = xp.concatenate([classes, xp.ones((1, y.shape[0]), bool)])[:, None, :]
    if multiplicity is not None:
        multiplicity = np.asarray(multiplicity)
        planes = np.arange(bit_planes(int(multiplicity.max())))
        labels = labels & ((multiplicity[None, :] >> planes[:, None]) & 1).astype(bool)[None]
    words = pack_bits(labels, n_words)
    return words if xp is jnp else jax.device_put(words)


def bit_planes(largest_multiplicity: int) -> int:
    """Bit planes that hold multiplicities up to ``largest_multiplicity``, rounded up to a multiple of
    PLANE_MULTIPLE (the planes above the largest's bits are zero and count nothing)."""
    return -(-int(largest_multiplicity).bit_length() // PLANE_MULTIPLE) * PLANE_MULTIPLE


def distinct_samples(table, y):
    """(first, multiplicity): the index of the first sample of each distinct (truth-table row, label) pair
    and the pair's count. Rows are compared as bytes packed from ``table.T``, contiguous for
    :func:`~interpretable_zoo.inference.rule_mining.truth_table`'s tables, without transposing the booleans.

    Samples with the same truth-table row and label are interchangeable (eq. 5 depends on the captures only
    through their label counts), so where that is cheaper (:func:`make_target`) they are merged into one bit
    each, a merged sample's multiplicity written in binary across bit planes of the label sets: a count is
    sum_k 2^k popcount(captures AND label plane k). The counts, and so the log targets and the draws, are
    the same as without merging."""
    by_antecedent = np.asarray(table, dtype=bool).T
    n_antecedents, n_samples = by_antecedent.shape
    packed = np.zeros((-(-n_antecedents // 8), n_samples), np.uint8)  # byte j of a sample: antecedents 8j..8j+7
    for bit in range(8):
        antecedents_at_bit = by_antecedent[bit::8]
        packed[: len(antecedents_at_bit)] |= antecedents_at_bit.view(np.uint8) << np.uint8(7 - bit)
    label_bytes = np.ascontiguousarray(y, dtype="<i4").view(np.uint8).reshape(len(y), 4)
    rows = np.ascontiguousarray(np.concatenate([packed.T, label_bytes], axis=1))
    keys = rows.view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first, multiplicity = np.unique(keys, return_index=True, return_counts=True)
    return first, multiplicity


def log_choice_probability(n) -> np.ndarray:
    """log f(n): the probability that the exact draw among ``n`` items (:func:`propose`) picks a given
    one; -inf for n < 1."""
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n >= 1, np.log(np.floor(2**TICKET_BITS / np.maximum(n, 1))) - TICKET_BITS * np.log(2), -np.inf)


def move_log_probabilities(length, n_antecedents: int, capacity: int, neighbour_moves: bool = False) -> np.ndarray:
    """log P_m(insert, delete, swap, replace, neighbour) (5, ...): an exact uniform draw among the moves
    possible at length m (neighbour only with ``neighbour_moves``)."""
    m = np.asarray(length)
    feasible = np.stack([m < capacity, m >= 1, m >= 2, (m >= 1) & (m < n_antecedents), (m >= 1) & neighbour_moves])
    return np.where(feasible, log_choice_probability(feasible.sum(axis=0)), -np.inf)


def log_proposal_probability(move: int, length, n_antecedents: int, capacity: int,
                             neighbour_moves: bool = False) -> np.ndarray:
    """log Q(d* | d) of one particular proposal of type ``move`` from lists of ``length`` rules
    (:func:`propose`), without the factor q(a) of the rule an insert or replace puts in, nor f(``|N(a)|``) of a
    neighbour move's (:func:`mh_update` adds them); -inf where the move is impossible."""
    m = np.asarray(length, dtype=np.float64)
    f = log_choice_probability
    choice = [f(m + 1), f(m), np.log(2) + f(m) + f(m - 1), f(m), f(m)][move]
    with np.errstate(invalid="ignore"):
        log_q = move_log_probabilities(length, n_antecedents, capacity, neighbour_moves)[move] + choice
    return np.where(np.isnan(log_q), -np.inf, log_q)


def log_hastings_table(n_antecedents: int, capacity: int, neighbour_moves: bool = False) -> np.ndarray:
    """(6, capacity + 1): log Q(d | d*) - log Q(d* | d) of each move type from each length, the rules'
    factors left out (:func:`log_proposal_probability`); 0 where the move is impossible (it is never
    drawn) and for STAY."""
    lengths = np.arange(capacity + 1)
    table = np.zeros((len(MOVES) + 1, capacity + 1))
    for move in MOVES:
        forward = log_proposal_probability(move, lengths, n_antecedents, capacity, neighbour_moves)
        new_lengths = np.clip(lengths + LENGTH_CHANGE[move], 0, capacity)
        reverse = log_proposal_probability(REVERSE_MOVE[move], new_lengths, n_antecedents, capacity, neighbour_moves)
        with np.errstate(invalid="ignore"):
            table[move] = np.where(np.isfinite(forward), reverse - forward, 0.0)
    return table


UNIFORM_TICKET_SHARE = 0.5
"""The share of the tickets that :func:`rule_choice_tables` spreads evenly over all antecedents whatever
the weights, so that every rule stays reachable at a rate of at least half the uniform proposal's."""


def _mixed_shares(weights, n_antecedents: int, uniform_share: float) -> np.ndarray:
    """(``|A|``,) probabilities summing to 1: uniform for ``weights`` None, else ``uniform_share`` / ``|A|`` +
    (1 - ``uniform_share``) weights_a / sum(weights) of nonnegative ``weights`` (``|A|``,)."""
    if weights is None:
        return np.full(n_antecedents, 1.0 / n_antecedents)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (n_antecedents,) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError(f"rule weights: expected {n_antecedents} finite nonnegative numbers, got {weights!r}")
    spread = weights / weights.sum() if weights.sum() > 0 else np.full(n_antecedents, 1.0 / n_antecedents)
    return uniform_share / n_antecedents + (1.0 - uniform_share) * spread


def rule_choice_tables(weights, n_antecedents: int, antecedent_slots: int) -> tuple[np.ndarray, np.ndarray]:
    """(ticket_bounds, log_rule_choice) of :class:`BRLData`: antecedent a holds T_a = floor(2^23 w_a)
    tickets, w_a = 1 / ``|A|`` for ``weights`` None (the uniform choice), else the mixture
    UNIFORM_TICKET_SHARE / ``|A|`` + (1 - UNIFORM_TICKET_SHARE) weights_a / sum(weights) of nonnegative
    ``weights`` (``|A|``,); ticket_bounds[a] = T_0 + ... + T_a (padded antecedents hold none) and
    log_rule_choice[a] = log q(a) = log(T_a / 2^23), with a last entry 0 read for "no rule" (index -1)."""
    if n_antecedents > 2 ** (TICKET_BITS - 1):
        raise ValueError(f"antecedents: at most {2 ** (TICKET_BITS - 1)} can be proposed exactly, got {n_antecedents}")
    share = _mixed_shares(weights, n_antecedents, UNIFORM_TICKET_SHARE)
    tickets = np.pad(np.floor(share * 2**TICKET_BITS).astype(np.int64), (0, antecedent_slots - n_antecedents))
    log_choice = np.log(np.maximum(tickets, 1)) - TICKET_BITS * np.log(2)  # padded antecedents: never drawn
    return np.cumsum(tickets).astype(np.int32), np.append(log_choice, 0.0).astype(np.float32)


WEIGHT_MEMORY = 0.5
"""The factor by which :func:`learn_proposal` carries the weights of the rounds before into the next, so
that the rules of the early rounds, used before the chains found the posterior, fade; it converged more
mushroom seeds than counting every round alike (docs/decisions/brl-sampler.md)."""


LEARNING_GROUPS = 2
"""The chains learn the rule weights of their moves in this many groups (contiguous, of equal size as far
as the chains divide), each group from its own chains' draws, so that each group explores by its own
proposal and the chains' agreement (R-hat) can show a mode that one group's moves led it away from.
Move weights pooled over all chains lead every chain to the modes that the first rounds happened to find;
with each chain learning alone, tic-tac-toe's two kinds of lists no longer meet. The tempering reference,
in turn, draws by the weights' mean over all chains (:func:`with_proposal`), so that the rules one group
found reach the other group's chains through their rungs; a reference per group held only its own modes
(the trials: docs/decisions/brl-sampler.md). A fit's default of 8 chains makes two groups of four
(``inference.brl.DEFAULT_CHAINS``)."""


def learn_proposal(static: BRLStatic, data: BRLData, records: dict, states: BRLState, weights, facts=None) -> np.ndarray:
    """Rule weights (chain, ``|A|``) after a round (``inference.tempering.TargetKernel``), the same for the
    chains of a group (:data:`LEARNING_GROUPS`) and learned from that group's draws alone: WEIGHT_MEMORY
    times the round's ``weights`` (None at first) plus the mean over the group's chains of each
    antecedent's share of the rules in the chain's posterior-rung lists kept (``records["rules"]``, (chain,
    draw, capacity)) and of its share of the rules in the final lists of the chain's replicas (``states``,
    all rungs, chain-major), so that the proposal and the reference (which draws by the weights' mean
    over the chains) put in the rules that the posterior and the rungs on the way to it use now. A
    uniform choice rarely finds one of the few rules of a good list among thousands of antecedents; half
    of the tickets stay uniform (:data:`UNIFORM_TICKET_SHARE`). The round's ``facts``
    (``tempering.RoundFacts``) teach the weights nothing."""
    n_antecedents = int(data.n_antecedents)
    recorded = np.asarray(records["rules"])
    n_chains = recorded.shape[0]
    final = tempering.to_host(states.rules).reshape(n_chains, -1, static.capacity)
    if weights is None:
        weights = np.zeros((n_chains, n_antecedents))
    else:
        weights = WEIGHT_MEMORY * np.array(weights, dtype=np.float64)
    shares = np.zeros((n_chains, n_antecedents))
    for chain in range(n_chains):
        for rules in (recorded[chain], final[chain]):
            listed = rules[rules >= 0]
            if listed.size:
                shares[chain] += np.bincount(listed, minlength=n_antecedents)[:n_antecedents] / listed.size
    group = np.arange(n_chains) * min(LEARNING_GROUPS, n_chains) // n_chains
    for g in np.unique(group):
        weights[group == g] += shares[group == g].mean(axis=0)
    return weights


PER_CHAIN_FIELDS = ("ticket_bounds", "log_rule_choice")
"""The :class:`BRLData` fields that may hold one row per chain (:func:`with_proposal`); the others, the
tempering reference's among them, are shared."""


def with_proposal(static: BRLStatic, data: BRLData, weights) -> BRLData:
    """``data`` whose proposal draws the rule of an insert or replace by ``weights`` mixed with the uniform
    choice (:func:`rule_choice_tables`), and whose tempering reference draws its rules by the mean of the
    weights over the chains (:func:`reference_rule_tables`, :data:`LEARNING_GROUPS`); the posterior is
    unchanged. ``weights`` (``|A|``,) or None (uniform) serve every replica; (chain, ``|A|``) give each chain its
    own proposal tables (its replicas chain-major in :func:`step`)."""
    n_antecedents, slots = int(data.n_antecedents), static.antecedent_slots
    by_chain = weights is not None and np.ndim(weights) == 2
    rows = weights if by_chain else [weights]
    tables = [rule_choice_tables(row, n_antecedents, slots) for row in rows]
    stacked = [np.stack(column) if by_chain else column[0] for column in zip(*tables)]
    pooled = None if weights is None else np.mean(np.atleast_2d(weights), axis=0)
    return data._replace(**dict(zip(PER_CHAIN_FIELDS, jax.device_put(stacked))),
                         reference_ticket_bounds=jax.device_put(reference_rule_tables(pooled, n_antecedents, slots)))


def chain_rows(static: BRLStatic, data: BRLData) -> BRLData:
    """True at the fields of ``data`` that hold a row per chain (:data:`PER_CHAIN_FIELDS`, after
    :func:`per_chain` or a per-chain :func:`with_proposal`): ``inference.tempering.TargetKernel.chain_rows``."""
    return BRLData(*(name in PER_CHAIN_FIELDS and data.ticket_bounds.ndim == 2 for name in BRLData._fields))


def per_chain(data: BRLData, n_chains: int) -> BRLData:
    """``data`` with the shared proposal and reference tables repeated for each of ``n_chains`` chains, the
    shapes that :func:`with_proposal` gives learned per-chain weights (so every round of a run shares one
    compiled program)."""
    shared = {name: np.asarray(getattr(data, name)) for name in PER_CHAIN_FIELDS}
    memory.check_memory(
        2 * n_chains * sum(table.nbytes for table in shared.values()),  # on the host, then on the device
        f"num_chains: the proposal tables of {n_chains} chains (each chain learns its own)",
        "lower num_chains",
    )
    tables = {name: np.repeat(table[None], n_chains, axis=0) for name, table in shared.items()}
    return data._replace(**jax.device_put(tables))


REFERENCE_LENGTH_SHARE = 0.5
"""The tempering reference's mean list length, as a share of the capacity (:func:`reference_length_table`)."""

REFERENCE_UNIFORM_SHARE = 0.1
"""The share of the reference's rule weights spread evenly over all antecedents (:func:`reference_rule_tables`);
on mushroom it mixed better than 0.5 or 0.02 (docs/decisions/brl-sampler.md)."""


def reference_mean_length(capacity: int) -> float:
    """The mean of the reference's Poisson length prior before truncation (:func:`reference_length_table`)."""
    return REFERENCE_LENGTH_SHARE * capacity


def reference_length_table(capacity: int) -> np.ndarray:
    """(capacity + 1,) float32: log Poisson(:func:`reference_mean_length`) probabilities truncated to
    0..capacity and normalised. The reference's own Poisson, not the model file's length hook: an edited
    hook moves the posterior, never the reference."""
    lengths = np.arange(capacity + 1)
    weights = lengths * np.log(reference_mean_length(capacity)) - gammaln(lengths + 1.0)
    return (weights - logsumexp(weights)).astype(np.float32)


def reference_rule_tables(weights, n_antecedents: int, antecedent_slots: int) -> np.ndarray:
    """(antecedent_slots,) int32 ticket bounds of the reference's rule weights w (:func:`log_reference_density`):
    antecedent a holds T_a = max(1, floor(2^23 s_a)) tickets, s_a = 1 / ``|A|`` for ``weights`` None, else
    REFERENCE_UNIFORM_SHARE / ``|A|`` + (1 - REFERENCE_UNIFORM_SHARE) weights_a / sum(weights); bounds[a] =
    T_0 + ... + T_a, padded antecedents none. The reference's weights are w_a = T_a / bounds[-1] exactly:
    :func:`reference_draw` draws by whole tickets and :func:`log_reference_density` weighs by them.

    The weights start uniform and then follow the learned proposal's weights averaged over all chains, with
    a smaller uniform share: among thousands of antecedents, lists of uniformly drawn rules explain the
    labels so much worse than the posterior's few rules that the path crosses a sharp transition (on
    mushroom the path log-likelihood jumps from -295 to -85 between two rungs), which a reference that
    already favours the rules the chains use removes. Only the path depends on w: every rung's target is
    normalised whatever w, and the posterior rung is exact."""
    share = _mixed_shares(weights, n_antecedents, REFERENCE_UNIFORM_SHARE)
    tickets = np.maximum(np.floor(share * 2**TICKET_BITS), 1).astype(np.int64)  # at most 2^23 + 2^22 in all
    return np.cumsum(np.pad(tickets, (0, antecedent_slots - n_antecedents))).astype(np.int32)


def _reference_tickets(data: BRLData, rules):
    """T_a of each rule of ``rules`` (0 for -1, "no rule") from the reference's ticket bounds."""
    bounds = data.reference_ticket_bounds
    before = jnp.where(rules > 0, bounds[jnp.maximum(rules - 1, 0)], 0)
    return jnp.where(rules >= 0, bounds[jnp.maximum(rules, 0)] - before, 0)


def log_reference_density(static: BRLStatic, data: BRLData, rules, length):
    """log r(d) of a padded list: the length's log probability plus, rule after rule, log T_a - log(the
    tickets of the rules not drawn before it), in whole tickets.

    The tempering reference r draws a length from a Poisson of mean capacity / 2 truncated to
    0..capacity (:func:`reference_length_table`), then the rules one after the other without replacement,
    antecedent a with probability proportional to w_a (:func:`reference_rule_tables`)::

        r(d) = Pois(m) prod_{j<m} w_{a_j} / (1 - w_{a_0} - ... - w_{a_{j-1}}),    sum_a w_a = 1

    Lists of different lengths are separated by the prior as much as by the likelihood: on tic-tac-toe the
    lists of the eight lines of three o's (predicting the loss) and of the eight lines of x's (the win)
    hold different chains, and moving between them passes through lists of some 16 rules, which the length
    prior (mean 3) alone makes e^-15 times less likely than 8 rules at every rung when only the likelihood
    is tempered. The rungs near the reference hold long lists, where both kinds meet. 0 for an untempered
    target (``static.tempered`` False), whose replicas all run at beta = 1, where r has no weight."""
    if not static.tempered:
        return jnp.zeros((), jnp.float32)
    listed = jnp.arange(static.capacity) < length
    tickets = jnp.where(listed, _reference_tickets(data, rules), 0)
    left = data.reference_ticket_bounds[-1] - (jnp.cumsum(tickets) - tickets)  # exact in int32
    log_w = jnp.log(jnp.maximum(tickets, 1).astype(jnp.float32)) - jnp.log(left.astype(jnp.float32))
    return data.reference_length[length] + jnp.where(listed, log_w, 0.0).sum()


def _check_target(truth_table, cardinalities, n_classes, y, capacity):
    cardinalities = np.asarray(cardinalities)
    if cardinalities.ndim != 1 or cardinalities.size == 0 or not np.issubdtype(cardinalities.dtype, np.integer):
        raise ValueError(f"cardinalities must be a non-empty 1-D integer array, got {cardinalities!r}")
    table = np.asarray(truth_table)
    if table.ndim != 2 or table.shape[1] != cardinalities.size or table.shape[0] == 0:
        raise ValueError(f"truth_table must be (n_samples, n_antecedents = {cardinalities.size}), got {table.shape}")
    n_classes = check_positive_int(n_classes, "n_classes", minimum=2)
    y = np.asarray(y)
    if y.shape != (table.shape[0],) or not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"y must be {table.shape[0]} integer labels in 0..{n_classes - 1}")
    capacity = check_positive_int(capacity, "capacity")
    if capacity > cardinalities.size:
        raise ValueError(f"capacity: at most the {cardinalities.size} antecedents, got {capacity}")
    return table.astype(bool, copy=False), cardinalities, n_classes, y, capacity


def padded_antecedent_count(n_antecedents: int) -> int:
    """Antecedents a target represents: ``|A|`` rounded up to a power of two (:class:`BRLStatic`)."""
    return 1 << (n_antecedents - 1).bit_length()


def _words(n_samples: int) -> int:
    return size_bucket(-(-n_samples // 32), WORD_BUCKETS_PER_DOUBLING)


def make_target(
    truth_table,
    cardinalities,
    n_classes: int,
    y,
    priors: brl.Priors,
    capacity: int,
    *,
    steps_per_call: int = 1,
    merge_duplicates: bool = True,
    neighbours=None,
    tempered: bool = True,
):
    """(static, data) of the BRL posterior (:func:`~interpretable_zoo.models.brl.collapsed_model` with ``max_length =
    capacity``) for a (n, ``|A|``) truth table, antecedent cardinalities, labels 0..n_classes-1 and
    ``priors``; all tables come from the model file's functions, evaluated here (never traced).
    ``merge_duplicates``: merge equal samples (:func:`distinct_samples`) when P planes of the merged words are
    fewer words than the samples'; False keeps one bit per sample. ``neighbours``: for each antecedent the
    indices of its neighbours, a symmetric relation (for itemsets, those that differ in one item:
    ``rule_mining.antecedent_neighbours``), which the neighbour move draws from; None: no neighbour move.
    ``tempered``: False for a target whose replicas all run at beta = 1 (:class:`BRLStatic`)."""
    table, cardinalities, n_classes, y, capacity = _check_target(truth_table, cardinalities, n_classes, y, capacity)
    n_samples, n_antecedents = table.shape
    if neighbours is not None and len(neighbours) != n_antecedents:
        raise ValueError(f"neighbours: expected one list per antecedent ({n_antecedents}), got {len(neighbours)}")
    multiplicity = None
    if merge_duplicates and _words(n_samples) > 1:
        first, counts = distinct_samples(table, y)
        if bit_planes(counts.max()) * _words(len(counts)) < _words(n_samples):
            table, y, multiplicity = table.T[:, first].T, y[first], counts  # stored antecedent by antecedent
    static = BRLStatic(
        antecedent_slots=padded_antecedent_count(n_antecedents),
        n_words=_words(table.shape[0]),
        n_classes=n_classes,
        capacity=capacity,
        max_cardinality=int(cardinalities.max()),
        cardinalities_can_run_out=brl.cardinalities_can_run_out(cardinalities, capacity),
        steps_per_call=check_positive_int(steps_per_call, "steps_per_call"),
        tempered=bool(tempered),
    )
    slots, n_words = static.antecedent_slots, static.n_words
    neighbour_starts, neighbour_list, log_neighbour_choice = neighbour_tables(neighbours or [[]] * n_antecedents, slots)
    static = static._replace(neighbour_moves=bool(neighbour_starts[-1] > 0))
    truth = np.pad(pack_bits(table.T, n_words), ((0, slots + 1 - n_antecedents), (0, 0)))
    prior = brl.prior_tables(cardinalities, priors, capacity)
    ticket_bounds, log_rule_choice = rule_choice_tables(None, n_antecedents, slots)
    with jax.ensure_compile_time_eval():  # concrete tables even when called under a trace (e.g. pmap)
        data = BRLData(
            truth_bits=jax.device_put(truth),
            label_bits=pack_labels(y, n_classes, n_words, multiplicity),
            cardinality_index=jax.device_put(np.pad(cardinalities - 1, (0, slots - n_antecedents)).astype(np.int32)),
            n_antecedents=jax.device_put(np.int32(n_antecedents)),
            prior=prior,
            likelihood=brl.likelihood_tables(priors.alpha_vector(n_classes), 32 * _words(n_samples)),
            log_hastings=jax.device_put(log_hastings_table(n_antecedents, capacity, static.neighbour_moves)),
            reference_length=jax.device_put(reference_length_table(capacity)),
            reference_ticket_bounds=jax.device_put(reference_rule_tables(None, n_antecedents, slots)),
            ticket_bounds=jax.device_put(ticket_bounds),
            log_rule_choice=jax.device_put(log_rule_choice),
            neighbour_starts=jax.device_put(neighbour_starts),
            neighbour_list=jax.device_put(neighbour_list),
            log_neighbour_choice=jax.device_put(log_neighbour_choice),
        )
    return static, data


def _neighbour_pairs(neighbours) -> tuple[np.ndarray, np.ndarray]:
    """(source, target) int64 arrays of every pair of the relation ``neighbours`` (one list of indices per
    antecedent), sorted and without repeats; ValueError naming the argument unless it is a symmetric
    relation over the antecedents without self-neighbours. Vectorised: a mined relation holds millions of
    pairs, and this runs before every fit."""
    n_antecedents = len(neighbours)
    source = np.repeat(np.arange(n_antecedents, dtype=np.int64), [len(row) for row in neighbours])
    target = np.concatenate([np.asarray(row, np.int64).reshape(-1) for row in neighbours] + [np.zeros(0, np.int64)])
    wrong = (target < 0) | (target >= n_antecedents) | (target == source)
    if wrong.any():
        a = int(source[wrong.argmax()])
        raise ValueError(f"neighbours: antecedent {a}'s neighbours must be other antecedents' indices, got "
                         f"{sorted(int(b) for b in neighbours[a])}")
    pairs = np.sort(source * n_antecedents + target)
    repeated = np.zeros(pairs.size, bool)
    repeated[1:] = pairs[1:] == pairs[:-1]
    pairs = pairs[~repeated]
    reversed_pairs = np.sort((pairs % n_antecedents) * n_antecedents + pairs // n_antecedents)
    if not np.array_equal(pairs, reversed_pairs):  # symmetric: the same set of pairs read both ways
        found = np.minimum(np.searchsorted(reversed_pairs, pairs), pairs.size - 1)
        a = int(pairs[(reversed_pairs[found] != pairs).argmax()] // n_antecedents)
        raise ValueError(f"neighbours: not symmetric (antecedent {a} lists one that does not list it)")
    return pairs // n_antecedents, pairs % n_antecedents


def neighbour_list_size(n_pairs: int) -> int:
    """Entries of the flat neighbour list: the relation's pairs (at least 1) rounded up to a bucket
    (``shapes.size_bucket``, NEIGHBOUR_BUCKETS_PER_DOUBLING per doubling: a power of two, at most twice the
    pairs), so that relations of close sizes share a compiled program."""
    return size_bucket(max(int(n_pairs), 1), NEIGHBOUR_BUCKETS_PER_DOUBLING)


def neighbour_table_bytes(neighbour_counts) -> int:
    """Bytes of the relation's compressed rows (neighbour_starts and neighbour_list of :func:`neighbour_tables`)
    for antecedents with ``neighbour_counts``; log_neighbour_choice adds 4 bytes per antecedent slot."""
    slots = padded_antecedent_count(len(neighbour_counts))
    return 4 * (slots + 1 + neighbour_list_size(int(np.sum(neighbour_counts))))


def neighbour_tables(neighbours, antecedent_slots: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(neighbour_starts, neighbour_list, log_neighbour_choice) of :class:`BRLData` for the relation
    ``neighbours`` (one list of indices per antecedent, checked by ``_neighbour_pairs``), in compressed
    rows: N(a), antecedent a's neighbours in increasing order, is neighbour_list[neighbour_starts[a] :
    neighbour_starts[a + 1]] (starts (antecedent_slots + 1,); the list padded with -1 to
    :func:`neighbour_list_size`), and log_neighbour_choice[a] = log f(``|N(a)|``) (0 for none, and a last entry
    0 read for "no rule"). Memory grows with the pairs, not with the antecedents times the most neighbours.

    The neighbour move exchanges a rule for one of its neighbours (for mined itemsets, the antecedents of as
    many items that share all but one of its items): among thousands of antecedents the best lists often
    differ from the current one by an item of one rule (``a=x & b=x & c=x`` against ``a=x & b=x & c!=o`` on
    tic-tac-toe), which a draw over all antecedents seldom offers."""
    source, target = _neighbour_pairs(neighbours)
    counts = np.bincount(source, minlength=antecedent_slots + 1)
    starts = np.concatenate([[0], np.cumsum(counts[:antecedent_slots])]).astype(np.int32)
    flat = np.full(neighbour_list_size(source.size), -1, np.int32)
    flat[: source.size] = target  # the pairs are sorted by source, then target
    log_choice = np.where(counts > 0, log_choice_probability(np.maximum(counts, 1)), 0.0)
    return starts, flat, log_choice.astype(np.float32)


def _popcount(words) -> jnp.ndarray:
    """Set bits summed over the last axis."""
    return lax.population_count(words).astype(jnp.int32).sum(axis=-1)


def _exact_index(u, count):
    """(index, drawn): from a float32 uniform ``u``, an index exactly uniform over 0..count-1 when
    ``drawn`` (:func:`propose`); not drawn, the proposal is a null move."""
    count = jnp.maximum(count, 1)
    ticket = (u * 2**TICKET_BITS).astype(jnp.int32)  # exact: u is a multiple of 2^-23
    return ticket % count, ticket < count * (2**TICKET_BITS // count)


def propose(uniforms, rules, length, n_antecedents, ticket_bounds, neighbours=None):
    """Draw a move for one padded list from four float32 uniforms in [0, 1); returns (move, new_rules,
    new_length, added, removed): the rule an insert, replace or neighbour move puts in and the rule a
    delete, replace or neighbour move takes out (-1 for none).

    The move type is the k-th of the feasible ones (insert, delete, swap, replace, neighbour in that order;
    capacity ``rules.shape[0]``; neighbour only with ``neighbours``, the pair (neighbour_starts,
    neighbour_list) of :func:`neighbour_tables`), then the positions uniformly and, for insert and replace,
    the rule by its tickets (``ticket_bounds``, :func:`rule_choice_tables`), for neighbour one of the
    replaced rule's neighbours uniformly; a drawn rule that is already in the list, a rule without
    neighbours, or a draw that falls past its last whole multiple of tickets, makes the move STAY (the list
    unchanged).

    The move type is uniform over the moves possible at the current length m (insert needs m < capacity,
    delete m >= 1, swap m >= 2, replace 1 <= m < ``|A|``, neighbour m >= 1 when some antecedent has
    neighbours), so the move probabilities P_m change at the edges and enter the Hastings ratio. Every
    choice among n positions is drawn exactly: the ticket t = floor(2^23 u) of a float32 uniform u (a
    multiple of 2^-23) picks item t mod n when t < n floor(2^23 / n), and otherwise the proposal is the list
    itself (a null move, probability below n / 2^23), so each item has probability f(n) = floor(2^23 / n) /
    2^23 (about 1 / n). The rule that an insert or replace puts in is drawn by tickets too: antecedent a
    holds T_a of the 2^23 tickets, so q(a) = T_a / 2^23, and a ticket past the last antecedent's, or one of a
    rule already in the list, is a null move. By default every antecedent holds floor(2^23 / ``|A|``)
    tickets (a uniform choice); a fit may give the rules that its chains use more of them
    (:func:`learn_proposal`, from round to round of the run, each group of chains from its own draws,
    :data:`LEARNING_GROUPS`; the proposal is fixed within a round). Then::

        Q(insert a at p | m)  = P_m(insert) q(a) f(m + 1)
        Q(delete p | m)       = P_m(delete) f(m)
        Q(swap {i, j} | m)    = P_m(swap) 2 f(m) f(m - 1)
        Q(replace p by a | m) = P_m(replace) f(m) q(a)
        Q(exchange p's rule b for a in N(b) | m) = P_m(neighbour) f(m) f(|N(b)|)

    with P_m = f(the number of moves possible at m) (a neighbour already in the list, or a rule without
    neighbours, is a null move); the ratio Q(d | d*) / Q(d* | d) is a table over (move, m)
    (:func:`log_hastings_table`) times q(removed rule) / q(added rule), or for a neighbour move
    f(``|N(added rule)|``) / f(``|N(removed rule)|``).
    """
    capacity = rules.shape[0]
    positions = jnp.arange(capacity)
    length = jnp.asarray(length, jnp.int32)
    feasible = jnp.stack([length < capacity, length >= 1, length >= 2, (length >= 1) & (length < n_antecedents),
                          (length >= 1) & (neighbours is not None)])
    k, move_drawn = _exact_index(uniforms[0], feasible.sum())
    move = jnp.sum(jnp.cumsum(feasible) <= k)

    rule_ticket = (uniforms[1] * 2**TICKET_BITS).astype(jnp.int32)  # exact: u is a multiple of 2^-23
    new_rule = jnp.searchsorted(ticket_bounds, rule_ticket, side="right").astype(rules.dtype)
    listed = positions < length
    rule_drawn = (rule_ticket < ticket_bounds[-1]) & ~jnp.any(listed & (rules == new_rule))

    insert_at, insert_drawn = _exact_index(uniforms[2], length + 1)
    chosen, chosen_drawn = _exact_index(uniforms[2], length)  # the rule deleted or replaced, or a swap's first
    other, other_drawn = _exact_index(uniforms[3], length - 1)
    other = other + (other >= chosen)
    old_rule = jnp.append(rules, -1)[chosen]
    if neighbours is None:
        neighbour, neighbour_drawn = new_rule, False
    else:  # N(old rule): its compressed row
        starts, flat = neighbours
        first = starts[jnp.maximum(old_rule, 0)]
        count = starts[jnp.maximum(old_rule, 0) + 1] - first
        index, index_drawn = _exact_index(uniforms[1], count)
        neighbour = flat[first + index].astype(rules.dtype)
        neighbour_drawn = index_drawn & (count > 0) & ~jnp.any(listed & (rules == neighbour))
    drawn = move_drawn & jnp.select(
        [move == INSERT, move == DELETE, move == SWAP, move == NEIGHBOUR],
        [rule_drawn & insert_drawn, chosen_drawn, chosen_drawn & other_drawn, chosen_drawn & neighbour_drawn],
        rule_drawn & chosen_drawn,
    )
    new_rule = jnp.where(move == NEIGHBOUR, neighbour, new_rule)
    move = jnp.where(drawn, move, STAY)
    # every position reads one position of the old list (the capacity-th is the padding -1)
    swapped = jnp.where(positions == chosen, other, jnp.where(positions == other, chosen, positions))
    inserted, deleted = positions - (positions > insert_at), positions + (positions >= chosen)
    source = jnp.select([move == INSERT, move == DELETE, move == SWAP], [inserted, deleted, swapped], positions)
    exchanged = (move == REPLACE) | (move == NEIGHBOUR)
    gets_new_rule = ((move == INSERT) & (positions == insert_at)) | (exchanged & (positions == chosen))
    new_rules = jnp.where(gets_new_rule, new_rule, jnp.append(rules, -1)[source]).astype(rules.dtype)
    added = jnp.where((move == INSERT) | exchanged, new_rule, -1)
    removed = jnp.where((move == DELETE) | exchanged, old_rule, -1)
    return move, new_rules, length + jnp.asarray(LENGTH_CHANGE, jnp.int32)[move], added, removed


def _exclusive_prefix_or(words):
    """(B + 1, W): row j is the OR of rows 0..j-1 of ``words`` (B, W), one row after the other."""
    rows = [jnp.zeros_like(words[0])]
    for row in words:
        rows.append(rows[-1] | row)
    return jnp.stack(rows)


ROWS_PER_BLOCK = 8
"""Rows of a list whose label counts :func:`label_counts` forms at once, for bit vectors shorter than
:data:`ROW_BY_ROW_WORDS`: a loop over blocks up to the list's length skips the padding of the long lists
of a capacity of 30 (tic-tac-toe's posterior lists hold about 10 rules), at the cost of a loop step per
block (benchmarks/RESULTS.md, brl_mh_speed)."""

ROW_BY_ROW_WORDS = 256
"""Bit vectors of at least this many words get their label counts one rule after the other (blocks of one
row): a row then costs more than the loop step, and its words stay in cache (benchmarks/RESULTS.md,
brl_label_counts)."""


def label_counts(data: BRLData, rules, length):
    """(capacity + 1, L + 1): the label counts N_j of a padded list's rules in rows j < ``length``, the
    default rule's (all samples still uncaught) in row ``length``, zeros after it, and each row's
    total in the last column; population counts of ``truth(rule j) AND uncaught[j] AND label``, each
    bit plane weighted by its power of two.

    Each antecedent's truth table over the samples and each class's label set are bit vectors (uint32
    words); a rule's captures are ``truth AND uncaught`` (Yang et al.'s speed trick), where
    ``uncaught[j]``, the samples no rule before position j holds for, is the complement of a running OR of
    the list's truth tables. A loop counts the rows in blocks (:data:`ROWS_PER_BLOCK` rows, or one row for
    wide bit vectors, :data:`ROW_BY_ROW_WORDS`) up to the block of row ``length`` (batched: up to the
    longest list of the batch), carrying the running OR from block to block; the padded rules (-1) read the
    truth table's last, empty row, so rows after the default rule count nothing. In a fixed-shape step,
    recomputing only the positions after the first changed one would skip no work."""
    n_labels, n_planes, n_words = data.label_bits.shape
    plane_weights = 1 << jnp.arange(n_planes, dtype=jnp.int32)
    n_rows = rules.shape[0] + 1
    block_rows = ROWS_PER_BLOCK if n_words < ROW_BY_ROW_WORDS else 1
    n_blocks = -(-n_rows // block_rows)
    padded_rules = jnp.full((n_blocks * block_rows,), -1, rules.dtype).at[: rules.shape[0]].set(rules)

    def counts_and_totals(counted):  # (..., L) weighted counts, the last row all samples -> (..., L + 1)
        others, total = counted[..., :-1], counted[..., -1:]
        return jnp.concatenate([others, total - others.sum(axis=-1, keepdims=True), total], axis=-1)

    def count_block(carry):
        block, uncaught, table = carry
        first = block * block_rows
        truth = data.truth_bits[lax.dynamic_slice(padded_rules, (first,), (block_rows,))]  # (block_rows, W)
        covered = _exclusive_prefix_or(truth)
        rows = first + jnp.arange(block_rows)
        rule_bits = jnp.where((rows == length)[:, None], ~jnp.uint32(0), truth) & uncaught & ~covered[:-1]
        counted = counts_and_totals(_popcount(rule_bits[:, None, None, :] & data.label_bits[None]) @ plane_weights)
        # the block's rows written by a select: a dynamic update at a batched row becomes a scatter, and a
        # scatter keeps XLA's CPU backend from compiling the steps' loop as one function (interpretable_zoo.xla_flags)
        offset = jnp.arange(table.shape[0]) - first
        in_block = (offset >= 0) & (offset < block_rows)
        table = jnp.where(in_block[:, None], counted.astype(table.dtype)[jnp.clip(offset, 0, block_rows - 1)], table)
        return block + 1, uncaught & ~covered[-1], table

    # padded samples are in no label set, so they may start uncaught
    start = (jnp.zeros((), jnp.int32), jnp.full((n_words,), ~jnp.uint32(0)),
             jnp.zeros((n_blocks * block_rows, n_labels + 1), jnp.int32))
    return lax.while_loop(lambda carry: carry[0] * block_rows <= length, count_block, start)[2][:n_rows]


def list_state(static: BRLStatic, data: BRLData, rules, length) -> BRLState:
    """The :class:`BRLState` of a given padded list: its log prior from the model file's prior tables, its
    log likelihood from the likelihood tables, its log reference density (:func:`log_reference_density`)."""
    rules, length = jnp.asarray(rules, jnp.int32), jnp.asarray(length, jnp.int32)
    rule_cardinality = data.cardinality_index[jnp.maximum(rules, 0)]
    log_prior = brl.log_prior_from_tables(data.prior, rule_cardinality, length, static.cardinalities_can_run_out)
    log_likelihood = brl.log_marginal_likelihood_from_tables(data.likelihood, label_counts(data, rules, length))
    return BRLState(rules, length, log_prior, log_likelihood, log_reference_density(static, data, rules, length))


def init(static: BRLStatic, data: BRLData, key) -> BRLState:
    """One replica's dispersed start: a length from the length prior, antecedents in random order."""
    uniforms = random.uniform(key, (static.antecedent_slots + 1,))
    length_cdf = jnp.cumsum(jax.nn.softmax(data.prior.length))
    length = jnp.minimum(jnp.sum(length_cdf <= uniforms[0]), static.capacity)  # inverse transform
    slots = jnp.arange(static.antecedent_slots)
    order = jnp.argsort(jnp.where(slots < data.n_antecedents, uniforms[1:], 2.0))[: static.capacity]
    return list_state(static, data, jnp.where(jnp.arange(static.capacity) < length, order, -1), length)


def mh_update(static: BRLStatic, data: BRLData, state: BRLState, uniforms,
              beta) -> tuple[BRLState, jnp.ndarray, jnp.ndarray]:
    """One Metropolis-Hastings step with the exact Hastings ratio (:func:`propose`), targeting
    r(d)^(1 - beta) (p(d) p(y | d))^beta (:func:`log_reference_density`), driven by ``uniforms``
    (UNIFORMS_PER_STEP,) in [0, 1); returns the new state, the acceptance probability and the move
    proposed (STAY for a null move)."""
    neighbours = (data.neighbour_starts, data.neighbour_list) if static.neighbour_moves else None
    move, new_rules, new_length, added, removed = propose(
        uniforms[:4], state.rules, state.length, data.n_antecedents, data.ticket_bounds, neighbours
    )
    # the rules' factors of Q(d | d*) / Q(d* | d): q(removed) / q(added), or f(|N(added)|) / f(|N(removed)|)
    rules_ratio = jnp.where(move == NEIGHBOUR, data.log_neighbour_choice[added] - data.log_neighbour_choice[removed],
                            data.log_rule_choice[removed] - data.log_rule_choice[added])
    proposal = list_state(static, data, new_rules, new_length)
    log_ratio = (
        (1.0 - beta) * (proposal.log_reference - state.log_reference)
        + beta * (proposal.log_prior + proposal.log_likelihood - state.log_prior - state.log_likelihood)
        + data.log_hastings[move, state.length]
        + rules_ratio
    )  # fmt: skip
    accept_prob = jnp.minimum(1.0, jnp.exp(log_ratio))
    accept = uniforms[4] < accept_prob
    return jax.tree.map(lambda new, old: jnp.where(accept, new, old), proposal, state), accept_prob, move


def uniform_below(key, n):
    """An exactly uniform int32 in [0, n), 0 < n < 2^31: 32 random bits modulo n, drawn again while they
    fall past the last whole multiple of n below 2^32 (probability below n / 2^32). ``random.randint``
    is not exact: it reduces its bits modulo n, biased by about n / 2^32."""
    n = jnp.asarray(n, jnp.uint32)
    largest = jnp.uint32(0xFFFFFFFF) - (jnp.uint32(0) - n) % n  # 2^32 - 1 - (2^32 mod n)

    def draw(carry):
        key, _ = carry
        key, bits_key = random.split(key)
        return key, random.bits(bits_key, (), jnp.uint32)

    _, bits = lax.while_loop(lambda carry: carry[1] > largest, draw, draw((key, jnp.uint32(0))))
    return (bits % n).astype(jnp.int32)


def reference_draw(static: BRLStatic, data: BRLData, key) -> BRLState:
    """An independent draw from the tempering reference r (:func:`log_reference_density`): a length from its
    truncated Poisson, then rules one after the other without replacement, each by a ticket drawn
    uniformly among those of the antecedents not yet drawn: the first antecedent whose ticket bound, less
    the tickets of the drawn rules at or before it, exceeds the ticket, found by bisection. The cost is
    capacity^2 log ``|A|``, not a pass over all antecedents; the tickets are exactly uniform
    (:func:`uniform_below`)."""
    key_length, key_rules = random.split(key)
    length = random.categorical(key_length, data.reference_length).astype(jnp.int32)
    bounds = data.reference_ticket_bounds

    def draw_rule(rules, position_key):
        position, key = position_key
        tickets = _reference_tickets(data, rules)
        ticket = uniform_below(key, bounds[-1] - tickets.sum())

        def tickets_left_through(a):  # bound of a among the antecedents not yet drawn
            return bounds[a] - jnp.where(rules <= a, tickets, 0).sum()

        low, high = jnp.int32(0), jnp.int32(static.antecedent_slots - 1)
        for _ in range(static.antecedent_slots.bit_length() - 1):  # slots is a power of two
            middle = (low + high) // 2
            past = tickets_left_through(middle) > ticket
            low, high = jnp.where(past, low, middle + 1), jnp.where(past, middle, high)
        return rules.at[position].set(low), None

    positions = jnp.arange(static.capacity)
    rules, _ = lax.scan(draw_rule, jnp.full(static.capacity, -1, jnp.int32),
                        (positions, random.split(key_rules, static.capacity)))
    return list_state(static, data, jnp.where(positions < length, rules, -1), length)


def _redraw_at_reference(static: BRLStatic, data: BRLData, states: BRLState, keys, betas):
    """(states, keys) of a batch whose replicas share ``data``'s tables, with the replica of least beta
    replaced by an independent draw from the reference (:func:`reference_draw`) if its beta is 0. The
    draw is selected, not branched to: vmapped over the chains (``_by_chain``), a ``lax.cond`` would
    become a select of both branches at many times the draw's cost (benchmarks/RESULTS.md,
    brl_label_counts)."""
    first = jnp.argmin(betas)
    at_reference = betas[first] == 0
    key_draw, key_first = random.split(keys[first])
    fresh = reference_draw(static, data, key_draw)
    states = jax.tree.map(lambda batch, new: batch.at[first].set(jnp.where(at_reference, new, batch[first])),
                          states, fresh)
    return states, keys.at[first].set(jnp.where(at_reference, key_first, keys[first]))


def _by_chain(function, data: BRLData, *batch):
    """``function(data, *batch)`` on a batch (leading axis B) whose replicas share ``data``'s tables, or,
    with per-chain tables (:func:`with_proposal`, C rows), on each chain's B / C replicas with its row."""
    if data.ticket_bounds.ndim == 1:
        return function(data, *batch)
    n_chains = data.ticket_bounds.shape[0]
    data_axes = BRLData(*(0 if name in PER_CHAIN_FIELDS else None for name in BRLData._fields))
    by_chain = jax.vmap(function, in_axes=(data_axes, *[0] * len(batch)))(
        data, *jax.tree.map(lambda x: x.reshape(n_chains, -1, *x.shape[1:]), batch)
    )
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), by_chain)


def scratch(static: BRLStatic) -> tuple[int, str, str]:
    """The memory of a replica's :func:`step` beyond its state: the uniforms of all its iterations, drawn
    at once (for the run's memory estimate)."""
    n_steps = static.steps_per_call
    return 4 * UNIFORMS_PER_STEP * n_steps, f"the uniforms of {n_steps} steps per scan", "steps_per_scan"


def step(static: BRLStatic, data: BRLData, states: BRLState, keys, betas) -> tuple[BRLState, BRLInfo]:
    """``static.steps_per_call`` Metropolis-Hastings iterations (:func:`mh_update`) of each replica of a
    batch (leading axis B of ``states``, ``keys`` (B,), ``betas`` (B,)), replica b targeting
    r(d)^(1 - betas[b]) (p(d) p(y | d))^betas[b]; returns the new states and their :class:`BRLInfo` (B,).
    With per-chain tables (:func:`with_proposal`, C rows), the batch is C chains of B / C replicas each,
    chain-major, and each chain's replicas propose with its own row (all temper towards one reference).

    Before its steps, the replica at the reference (beta = 0; one per chain, or one per batch with shared
    tables) is replaced by an independent draw from r, as Pigeons.jl does: a replica that reaches the
    reference leaves it with a list unrelated to the one it came with, and a round trip regenerates the
    chain; at the reference a Metropolis-Hastings step changes one rule of a list of some capacity / 2.
    A batch with no replica at the reference skips the redraw as a whole: vmapped over the chains, the
    redraw's test would become a select that draws from r for every chain and discards it (at one step per
    scan, most of a scan's cost); an untempered target (``static.tempered`` False) has neither the redraw
    nor r in its program. The iterations are one scan over the batch, traced and compiled once."""
    if static.tempered:
        states, keys = lax.cond(
            jnp.any(betas == 0),
            lambda states_keys: _by_chain(partial(_redraw_at_reference, static), data, *states_keys, betas),
            lambda states_keys: states_keys,
            (states, keys),
        )
        # the reference of data, which may have changed since the states were evaluated (a new round's weights)
        refresh = jax.vmap(lambda data, state: log_reference_density(static, data, state.rules, state.length),
                           (None, 0))
        states = states._replace(log_reference=_by_chain(refresh, data, states))
    uniforms = jax.vmap(lambda key: random.uniform(key, (static.steps_per_call * UNIFORMS_PER_STEP,)))(keys)
    uniforms = uniforms.reshape(len(keys), static.steps_per_call, UNIFORMS_PER_STEP)
    update = jax.vmap(partial(mh_update, static), in_axes=(None, 0, 0, 0))

    def one_iteration(states, uniforms):
        states, accept_prob, move = _by_chain(update, data, states, uniforms, betas)
        return states, (move, accept_prob)

    states, (moves, accept_probs) = lax.scan(one_iteration, states, jnp.swapaxes(uniforms, 0, 1))
    return states, BRLInfo.of_iterations(moves, accept_probs)


def summaries(static: BRLStatic, data: BRLData, states: BRLState) -> dict:
    """Label-free scalars per replica: the list ``length`` and the ``mean_cardinality`` of its rules
    (0 for the empty list)."""
    valid = jnp.arange(static.capacity) < states.length[:, None]
    cardinality = jnp.where(valid, data.cardinality_index[jnp.maximum(states.rules, 0)] + 1, 0)
    return {"length": states.length, "mean_cardinality": cardinality.sum(axis=1) / jnp.maximum(states.length, 1)}


class MHChain(NamedTuple):
    """One chain of :class:`BRLMetropolisHastings`: a :class:`BRLState`, the :class:`BRLInfo` of its last
    step and its PRNG key."""

    replica: BRLState
    info: BRLInfo
    rng_key: jnp.ndarray

    @property
    def z(self):
        return {"rules": self.replica.rules, "length": self.replica.length}

    @property
    def potential_energy(self):
        """-(log prior + log likelihood), NumPyro's name for the negative log target."""
        return -(self.replica.log_prior + self.replica.log_likelihood)

    @property
    def accept_prob(self):
        return self.info.accept_prob


def _is_batched(rng_key) -> bool:
    if jax.dtypes.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        return rng_key.ndim > 0
    return rng_key.ndim > 1


def _init_chain(static: BRLStatic, data: BRLData, key, params) -> MHChain:
    key, key_list = random.split(key)
    replica = init(static, data, key_list) if params is None else list_state(static, data, params["rules"], params["length"])
    none = jnp.zeros((), replica.log_prior.dtype)
    return MHChain(replica, BRLInfo(none, none, *(jnp.full((), jnp.nan, none.dtype) for _ in MOVES)), key)


def _sample_chains(static: BRLStatic, data: BRLData, chains: MHChain) -> MHChain:
    keys = jax.vmap(random.split)(chains.rng_key)
    betas = jnp.ones(chains.replica.log_prior.shape, chains.replica.log_prior.dtype)
    return MHChain(*step(static, data, chains.replica, keys[:, 1], betas), keys[:, 0])


@partial(jax.jit, static_argnums=0)
def _init_chains(static: BRLStatic, data: BRLData, keys, params) -> MHChain:
    """Chains for ``keys`` (B,): dispersed starts (``params`` None), or from one list or a batch of lists."""
    params_axis = None if params is None or jnp.ndim(params["length"]) == 0 else 0
    return jax.vmap(partial(_init_chain, static, data), in_axes=(0, params_axis))(keys, params)


class BRLMetropolisHastings(MCMCKernel):
    """NumPyro kernel over rule lists, plain Metropolis-Hastings at inverse temperature 1 (:func:`step`);
    run it with ``model_args = (truth_table, cardinalities, n_classes, y)`` and ``model_kwargs =
    {"priors": ..., "max_length": ...}`` of :func:`~interpretable_zoo.models.brl.collapsed_model`.

    ``steps_per_sample``: iterations per draw (thinning inside the compiled kernel; the reported
    ``accept_prob`` is their mean). Chains start from :func:`init` unless ``init_params = {"rules",
    "length"}`` is given (batched over chains when running vectorized chains).
    """

    sample_field = "z"

    def __init__(self, steps_per_sample: int = 1):
        self.steps_per_sample = check_positive_int(steps_per_sample, "steps_per_sample")

    @property
    def model(self):
        return brl.collapsed_model

    def target(self, model_args, model_kwargs):
        """(static, data) of :func:`make_target` for these model arguments. ``init`` and ``sample`` both
        derive it, so the kernel keeps no state and ``sample`` always runs on its own arguments."""
        truth_table, cardinalities, n_classes, y = model_args
        model_kwargs = model_kwargs or {}
        capacity = brl.list_capacity(np.shape(cardinalities)[0], model_kwargs.get("max_length"))
        priors = model_kwargs.get("priors", brl.Priors())
        hyperpriors.refuse_hyperpriors(priors, "BRLMetropolisHastings (a NumPyro kernel)",
                                       "fit_brl samples lam, eta and alpha within the chain")
        return make_target(truth_table, cardinalities, n_classes, y, priors, capacity, steps_per_call=self.steps_per_sample,
                           tempered=False)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """Chains' starts, after the fit-time check of ``fit_brl`` (``target_check.check_brl``): under an
        edit of the model file that this kernel cannot follow, a ModelMismatchError, not the old posterior."""
        from interpretable_zoo.inference import target_check  # it imports this module

        target = self.target(model_args, model_kwargs)
        _, cardinalities, n_classes, _ = model_args
        priors = (model_kwargs or {}).get("priors", brl.Priors())
        target_check.outside_traces(target_check.check_brl, np.asarray(cardinalities), int(n_classes), priors,
                                    target[0].capacity)
        batched = _is_batched(rng_key)
        params = None if init_params is None else jax.tree.map(jnp.asarray, init_params)
        chains = _init_chains(*target, rng_key if batched else rng_key[None], params)
        return chains if batched else jax.tree.map(lambda x: x[0], chains)

    def sample(self, state, model_args, model_kwargs):
        target = self.target(model_args, model_kwargs)
        if _is_batched(state.rng_key):
            return _sample_chains(*target, state)
        return jax.tree.map(lambda x: x[0], _sample_chains(*target, jax.tree.map(lambda x: x[None], state)))
