"""BRL Metropolis-Hastings moves (insert, delete, swap, replace, neighbour): proposal probabilities at every
edge, drawn frequencies, and the kernel's draws against the enumerated posterior (also tempered), each
with a negative control."""

import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from test_brl_sampler import (
    CARDINALITIES,
    all_lists,
    exact_log_joint,
    gof_against_enumeration,
    reference_rule_weights,
    tiny_problem,
)

from interpretable_zoo.inference import brl_mh
from interpretable_zoo.models import brl

# ---------------------------------------------------------------- proposals


TICKETS = 2**brl_mh.TICKET_BITS


def exact_choice(n):
    """The probability that an exact draw among n items gives a given one: floor(2^23 / n) / 2^23."""
    return (TICKETS // n) / TICKETS


def uniform_tickets(n_antecedents):
    return np.full(n_antecedents, TICKETS // n_antecedents)


NEIGHBOUR_LISTS = {  # a symmetric relation over n antecedents, with unequal numbers of neighbours
    5: [[1, 2, 3], [0], [0, 4], [0], [2]], 2: [[1], [0]], 1: [[]],
}


def proposals_by_move(rules, n_antecedents, capacity, tickets=None, neighbour_lists=None):
    """Brute force Q(. | d), move type by move type: {move: {list one such move away: its probability}}
    (``inference.brl_mh.propose``); antecedent a holds ``tickets[a]`` of the 2^23 tickets of the rule choice (uniform
    by default), and has the neighbours ``neighbour_lists[a]`` (None: no neighbour move)."""
    tickets = uniform_tickets(n_antecedents) if tickets is None else tickets
    m = len(rules)
    unused = [a for a in range(n_antecedents) if a not in rules]
    outcomes = {
        brl_mh.INSERT: [rules[:p] + (a,) + rules[p:] for a in unused for p in range(m + 1)] if m < capacity else [],
        brl_mh.DELETE: [rules[:p] + rules[p + 1 :] for p in range(m)],
        brl_mh.SWAP: [],
        brl_mh.REPLACE: [rules[:p] + (a,) + rules[p + 1 :] for a in unused for p in range(m)],
    }
    for i, j in itertools.combinations(range(m), 2):
        swapped = list(rules)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        outcomes[brl_mh.SWAP].append(tuple(swapped))
    feasible = [move for move in outcomes if outcomes[move]]
    if neighbour_lists is not None and any(neighbour_lists) and m >= 1:
        feasible.append(brl_mh.NEIGHBOUR)  # feasible even where every neighbour is listed (a null move)
        outcomes[brl_mh.NEIGHBOUR] = [
            rules[:p] + (b,) + rules[p + 1 :] for p in range(m) for b in neighbour_lists[rules[p]] if b not in rules
        ]
    q = {}
    for move in feasible:
        q[move] = {}
        for outcome in outcomes[move]:
            # an exact draw of the move type, then of each of its choices (two for insert, replace, swap)
            added = [a for a in outcome if a not in rules]
            removed = [a for a in rules if a not in outcome]
            rule_choice = tickets[added[0]] / TICKETS if added else 1.0
            choices = {brl_mh.INSERT: lambda: rule_choice * exact_choice(m + 1),
                       brl_mh.DELETE: lambda: exact_choice(m),
                       brl_mh.SWAP: lambda: 2 * exact_choice(m) * exact_choice(m - 1),
                       brl_mh.REPLACE: lambda: exact_choice(m) * rule_choice,
                       brl_mh.NEIGHBOUR: lambda: exact_choice(m) * exact_choice(len(neighbour_lists[removed[0]]))
                       }[move]()  # fmt: skip
            q[move][outcome] = q[move].get(outcome, 0.0) + exact_choice(len(feasible)) * choices
    return q


def proposal_probabilities(rules, n_antecedents, capacity, tickets=None, neighbour_lists=None):
    """Brute force Q(. | d): every list one move away with its proposal probability summed over the move
    types that reach it (:func:`proposals_by_move`), and d itself with the probability of a null move."""
    q = {}
    for by_outcome in proposals_by_move(rules, n_antecedents, capacity, tickets, neighbour_lists).values():
        for outcome, probability in by_outcome.items():
            q[outcome] = q.get(outcome, 0.0) + probability
    q[rules] = q.get(rules, 0.0) + 1.0 - sum(q.values())  # null moves
    return q


@pytest.mark.parametrize("count", [1, 2, 3, 7, 31, 8941])
def test_every_ticket_of_an_exact_draw(count):
    """Over all 2^23 tickets: each index is drawn by exactly floor(2^23 / count) of them, the rest are
    null moves, and the kernel's tables use that probability."""
    uniforms = jnp.arange(TICKETS, dtype=jnp.float32) / TICKETS  # every float32 uniform there is
    index, drawn = jax.jit(brl_mh._exact_index)(uniforms, count)
    per_index = np.bincount(np.asarray(index)[np.asarray(drawn)], minlength=count)
    np.testing.assert_array_equal(per_index, np.full(count, TICKETS // count))
    assert float(brl_mh.log_choice_probability(count)) == pytest.approx(math.log(exact_choice(count)), abs=1e-12)


EDGE_CASES = [  # (list, |A|, capacity): empty, one rule, middle, one short of full, full; capacity below |A|
    ((), 5, 5), ((3,), 5, 5), ((3, 0), 5, 5), ((3, 0, 4, 1), 5, 5), ((3, 0, 4, 1, 2), 5, 5),
    ((), 5, 1), ((2,), 5, 1), ((2,), 5, 3), ((2, 4), 5, 3), ((2, 4, 0), 5, 3), ((0,), 1, 1), ((0, 1), 2, 2),
]  # fmt: skip


def skewed_weights(n_antecedents):
    """Rule weights far from uniform (antecedent a weighs (a + 1)^3), as a fit may learn them."""
    return (np.arange(n_antecedents) + 1.0) ** 3


def rule_tickets(weights, n_antecedents):
    """T_a of :func:`brl_mh.rule_choice_tables` for ``weights`` (None: uniform), from its ticket bounds."""
    bounds, _ = brl_mh.rule_choice_tables(weights, n_antecedents, n_antecedents)
    return np.diff(bounds, prepend=0)


def added_and_removed(old, new):
    added = [a for a in new if a not in old]
    removed = [a for a in old if a not in new]
    return (added[0] if added else -1), (removed[0] if removed else -1)


def neighbour_setting(with_neighbours, n_antecedents):
    """(neighbour lists or None, the kernel's (neighbour_starts, neighbour_list) or None, whether the move is
    drawn)."""
    if not with_neighbours:
        return None, None, False
    lists = NEIGHBOUR_LISTS[n_antecedents]
    starts, flat, _ = brl_mh.neighbour_tables(lists, 8)
    return lists, (jnp.asarray(starts), jnp.asarray(flat)), any(lists)


PROPOSAL_SETTINGS = [(False, False), (True, False), (False, True)]
"""(weighted rule choice, neighbour moves) of the proposal tests."""


@pytest.mark.parametrize("weighted, with_neighbours", PROPOSAL_SETTINGS, ids=["uniform", "weighted", "neighbours"])
@pytest.mark.parametrize("rules, n_antecedents, capacity", EDGE_CASES)
def test_proposal_probabilities_forward_and_reverse_at_every_edge(rules, n_antecedents, capacity, weighted,
                                                                  with_neighbours):
    weights = skewed_weights(n_antecedents) if weighted else None
    tickets = rule_tickets(weights, n_antecedents)
    _, log_rule_choice = brl_mh.rule_choice_tables(weights, n_antecedents, n_antecedents)
    lists, _, neighbour_moves = neighbour_setting(with_neighbours, n_antecedents)
    *_, log_neighbour_choice = brl_mh.neighbour_tables(lists or [[]] * n_antecedents, n_antecedents)
    forward = proposals_by_move(rules, n_antecedents, capacity, tickets, lists)
    assert tickets.sum() <= TICKETS and tickets.min() >= TICKETS * brl_mh.UNIFORM_TICKET_SHARE // n_antecedents
    hastings = brl_mh.log_hastings_table(n_antecedents, capacity, neighbour_moves)
    for move, outcomes in forward.items():
        for new_rules, q in outcomes.items():
            added, removed = added_and_removed(rules, new_rules)
            log_q = brl_mh.log_proposal_probability(move, len(rules), n_antecedents, capacity, neighbour_moves)
            if move == brl_mh.NEIGHBOUR:
                log_q += math.log(exact_choice(len(lists[removed])))
            elif added >= 0:
                log_q += math.log(tickets[added] / TICKETS)
            assert float(log_q) == pytest.approx(math.log(q), rel=1e-12)
            reverse_move = brl_mh.REVERSE_MOVE[move]
            reverse = proposals_by_move(new_rules, n_antecedents, capacity, tickets, lists)[reverse_move][rules]
            log_q_reverse = brl_mh.log_proposal_probability(reverse_move, len(new_rules), n_antecedents, capacity,
                                                            neighbour_moves)  # fmt: skip
            if move == brl_mh.NEIGHBOUR:
                log_q_reverse += math.log(exact_choice(len(lists[added])))
            elif removed >= 0:
                log_q_reverse += math.log(tickets[removed] / TICKETS)
            assert float(log_q_reverse) == pytest.approx(math.log(reverse), rel=1e-12)
            # the kernel reads the ratio from its table and the rules' log q, or their numbers of neighbours
            if move == brl_mh.NEIGHBOUR:
                rules_ratio = log_neighbour_choice[added] - log_neighbour_choice[removed]
            else:
                rules_ratio = log_rule_choice[removed] - log_rule_choice[added]
            assert hastings[move, len(rules)] + rules_ratio == pytest.approx(math.log(reverse / q), rel=1e-6, abs=1e-5)
    for move in set(brl_mh.MOVES) - set(forward):
        assert brl_mh.log_proposal_probability(move, len(rules), n_antecedents, capacity, neighbour_moves) == -np.inf
    assert (brl_mh.NEIGHBOUR in forward) == (neighbour_moves and len(rules) >= 1)


draw_proposals = jax.jit(jax.vmap(brl_mh.propose, in_axes=(0, None, None, None, None, None)))


@pytest.mark.parametrize("weighted, with_neighbours", PROPOSAL_SETTINGS, ids=["uniform", "weighted", "neighbours"])
@pytest.mark.parametrize("rules, n_antecedents, capacity", EDGE_CASES)
def test_proposals_are_drawn_with_those_probabilities(rules, n_antecedents, capacity, weighted, with_neighbours):
    weights = skewed_weights(n_antecedents) if weighted else None
    slots = 8  # padded antecedents beyond n_antecedents hold no tickets
    bounds, _ = brl_mh.rule_choice_tables(weights, n_antecedents, slots)
    lists, table, neighbour_moves = neighbour_setting(with_neighbours, n_antecedents)
    forward = proposal_probabilities(rules, n_antecedents, capacity, rule_tickets(weights, n_antecedents), lists)
    by_move = proposals_by_move(rules, n_antecedents, capacity, rule_tickets(weights, n_antecedents), lists)
    outcomes = [outcome for outcome in forward if outcome != rules]
    n_draws = 20000
    uniforms = jax.random.uniform(jax.random.PRNGKey(len(rules) + 7 * capacity), (n_draws, 4))
    padded = jnp.array(list(rules) + [-1] * (capacity - len(rules)), jnp.int32)
    proposals = draw_proposals(uniforms, padded, jnp.int32(len(rules)), jnp.int32(n_antecedents), jnp.asarray(bounds),
                               table if neighbour_moves else None)
    moves, new_rules, new_lengths, added, removed = (np.asarray(a) for a in proposals)
    drawn = [tuple(r[:m]) for r, m in zip(new_rules.tolist(), new_lengths.tolist())]
    assert set(drawn) <= {*outcomes, rules}  # in particular no antecedent beyond n_antecedents
    # each drawn move type reaches its outcome (replace and neighbour may reach the same list)
    assert all((move == brl_mh.STAY) == (d == rules) and (move == brl_mh.STAY or d in by_move[move])
               for move, d in zip(moves[:500], drawn[:500]))
    assert all((a, r) == (added_and_removed(rules, d) if d != rules else (-1, -1))  # a null move changes no rule
               for a, r, d in zip(added[:500].tolist(), removed[:500].tolist(), drawn[:500]))
    assert all((r[m:] == -1).all() for r, m in zip(new_rules, new_lengths))
    # every outcome and the null move (a listed rule drawn, or a ticket past the last whole multiple)
    counts = np.array([drawn.count(o) for o in [*outcomes, rules]])
    expected = n_draws * np.array([forward[o] for o in [*outcomes, rules]])
    possible = expected > 0
    assert counts[~possible].sum() == 0
    if possible.sum() > 1:
        assert stats.chisquare(counts[possible], expected[possible]).pvalue > 1e-4
    else:
        assert counts[possible].sum() == n_draws


# ---------------------------------------------------------------- exactness against enumeration

CAPACITY = 5  # all 5 antecedents: the full list is reached, where insert and replace are impossible
LONG_LISTS = brl.Priors(lam=6.0, eta=2.0, alpha=(0.5, 2.0))
N_REPLICAS, N_WARMUP, N_DRAWS, THIN = 16, 25, 3000, 4
POSTERIOR = jnp.ones(N_REPLICAS)


@partial(jax.jit, static_argnums=0)
def sample_replicas(static, data, key, betas):
    """(replica, draw) lists from N_REPLICAS replicas at inverse temperatures ``betas`` (N_REPLICAS,),
    THIN steps per draw, after N_WARMUP draws left out."""
    key_init, key_calls = jax.random.split(key)
    states = jax.vmap(partial(brl_mh.init, static, data))(jax.random.split(key_init, N_REPLICAS))

    def call(states, key):
        states, _ = brl_mh.step(static, data, states, jax.random.split(key, N_REPLICAS), betas)
        return states, (states.rules, states.length)

    _, (rules, lengths) = jax.lax.scan(call, states, jax.random.split(key_calls, N_WARMUP + N_DRAWS))
    return {"rules": rules[N_WARMUP:].swapaxes(0, 1), "length": lengths[N_WARMUP:].T}


def target(priors, neighbours=None):
    truth_table, y = tiny_problem()
    return brl_mh.make_target(truth_table, CARDINALITIES, 2, y, priors, CAPACITY, steps_per_call=THIN,
                              neighbours=neighbours)


def hastings_table_with(monkeypatch, move_log_probabilities):
    """The kernel's Hastings table built with other move probabilities P_m."""
    with monkeypatch.context() as patch:
        patch.setattr(brl_mh, "move_log_probabilities", move_log_probabilities)
        return jnp.asarray(brl_mh.log_hastings_table(len(CARDINALITIES), CAPACITY))


def without_move_probabilities(length, n_antecedents, capacity, neighbour_moves=False):
    """P_m(move) left out of Q: wrong at the edges (m = 0, 1 and the full list)."""
    return np.zeros((5, *np.shape(length)))


def replace_always_possible(length, n_antecedents, capacity, neighbour_moves=False):
    """Replace counted as possible at the full list of all |A| antecedents: P_|A| wrong."""
    m = np.asarray(length)
    feasible = np.stack([m < capacity, m >= 1, m >= 2, m >= 1, (m >= 1) & neighbour_moves])
    with np.errstate(divide="ignore"):
        return np.where(feasible, -np.log(feasible.sum(axis=0)), -np.inf)


@pytest.mark.parametrize(
    "priors, wrong",
    [(brl.Priors(), without_move_probabilities), (LONG_LISTS, replace_always_possible)],
    ids=["default", "long-lists"],
)
def test_kernel_matches_the_enumerated_posterior_and_a_wrong_ratio_fails(priors, wrong, monkeypatch):
    static, data = target(priors)
    result = gof_against_enumeration(sample_replicas(static, data, jax.random.PRNGKey(11), POSTERIOR), priors)
    assert result.passed(alpha=1e-3), result
    wrong_data = data._replace(log_hastings=hastings_table_with(monkeypatch, wrong))
    result = gof_against_enumeration(sample_replicas(static, wrong_data, jax.random.PRNGKey(11), POSTERIOR), priors)
    assert not result.passed(alpha=1e-3), result


def test_learned_weights_add_each_chains_shares_of_the_rules_it_used():
    """A round's weights, per chain: each antecedent's share of the rules in the chain's posterior-rung
    lists plus its share in the chain's replicas' final lists, added to WEIGHT_MEMORY times the weights the
    round ran with; no chain's weights see another chain's lists; half the tickets stay uniform; the
    tempering reference draws by the weights' mean over the chains."""
    static, data = target(brl.Priors())
    pad = [-1] * (CAPACITY - 2)
    records = {"rules": np.array([[[0, 2, *pad], [2, -1, *pad]],     # chain 0 kept 0, 2, 2
                                  [[1, -1, *pad], [3, 1, *pad]]])}  # chain 1 kept 1, 3, 1
    # two replicas per chain, chain-major: chain 0's final lists hold 4, chain 1's hold 0
    states = brl_mh.BRLState(np.array([[4, -1, *pad], [-1, -1, *pad], [0, -1, *pad], [-1, -1, *pad]]),
                             *[np.zeros(4)] * 4)
    weights = brl_mh.learn_proposal(static, data, records, states, None)
    np.testing.assert_allclose(weights, [[1 / 3, 0, 2 / 3, 0, 1], [1, 2 / 3, 0, 1 / 3, 0]])
    again = brl_mh.learn_proposal(static, data, records, states, weights)  # the round before, faded
    np.testing.assert_allclose(again, (1 + brl_mh.WEIGHT_MEMORY) * weights)
    learned = brl_mh.with_proposal(static, data, weights)
    for chain in range(2):
        tickets = np.diff(np.asarray(learned.ticket_bounds[chain]), prepend=0)
        uniform = brl_mh.UNIFORM_TICKET_SHARE
        share = uniform / 5 + (1 - uniform) * weights[chain] / weights[chain].sum()
        np.testing.assert_array_equal(tickets[:5], np.floor(share * TICKETS))
        assert not tickets[5:].any()  # padded antecedents are never proposed
    reference = np.diff(np.asarray(learned.reference_ticket_bounds), prepend=0)  # one reference, for every chain
    share = reference_rule_weights(5, weights.mean(axis=0))
    np.testing.assert_array_equal(reference[:5], np.floor(share * TICKETS))
    assert not reference[5:].any()


def test_chains_learn_in_independent_groups():
    """Four chains learn in LEARNING_GROUPS = 2 groups: chains 0 and 1 share the mean of their shares, chains
    2 and 3 theirs, and neither group's weights see the other's lists."""
    static, data = target(brl.Priors())
    assert brl_mh.LEARNING_GROUPS == 2
    pad = [-1] * (CAPACITY - 1)
    records = {"rules": np.array([[[rule, *pad]] for rule in (0, 1, 2, 3)])}  # chain c kept rule c once
    states = brl_mh.BRLState(np.full((4, CAPACITY), -1), *[np.zeros(4)] * 4)  # empty final lists
    weights = brl_mh.learn_proposal(static, data, records, states, None)
    np.testing.assert_allclose(weights, [[0.5, 0.5, 0, 0, 0]] * 2 + [[0, 0, 0.5, 0.5, 0]] * 2)


def test_each_chain_steps_with_its_own_tables():
    """With per-chain tables, a step of a batch of chains (chain-major replicas) moves each chain exactly as a
    step of that chain alone with its own row as shared proposal tables would, at every replica's beta, all
    chains tempering towards the one reference."""
    static, data = target(brl.Priors())
    weights = np.stack([skewed_weights(len(CARDINALITIES)), skewed_weights(len(CARDINALITIES))[::-1]])
    n_chains, replicas = 2, 3
    keys = jax.random.split(jax.random.PRNGKey(3), n_chains * replicas)
    betas = jnp.array([0.0, 0.4, 1.0] * n_chains)
    states = jax.vmap(lambda key: brl_mh.init(static, data, key))(jax.random.split(jax.random.PRNGKey(4), 6))
    learned = brl_mh.with_proposal(static, data, weights)
    together, _ = brl_mh.step(static, learned, states, keys, betas)
    for chain in range(n_chains):
        alone = brl_mh.with_proposal(static, data, weights[chain])._replace(
            reference_ticket_bounds=learned.reference_ticket_bounds)
        rows = slice(chain * replicas, (chain + 1) * replicas)
        expected, _ = brl_mh.step(static, alone, jax.tree.map(lambda x: x[rows], states), keys[rows], betas[rows])
        jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a)[rows], b), together, expected)
    shared, _ = brl_mh.step(static, brl_mh.with_proposal(static, data, weights[0]), states, keys, betas)
    assert not np.array_equal(np.asarray(shared.rules), np.asarray(together.rules))  # the rows do differ


@pytest.mark.parametrize("weights", [None, "skewed"])
def test_reference_density_sums_to_one_over_every_list(weights):
    """r(d) over all 326 lists of at most 5 of the 5 antecedents sums to 1, with uniform and with learned
    rule weights, and equals the formula written out in ``test_brl_sampler.exact_log_joint`` (beta = 0)."""
    static, data = target(brl.Priors())
    rule_weights = None if weights is None else skewed_weights(len(CARDINALITIES))
    if rule_weights is not None:
        data = brl_mh.with_proposal(static, data, rule_weights)
    lists = all_lists(len(CARDINALITIES), CAPACITY)
    rules, lengths = jnp.asarray(lists["rules"]), jnp.asarray(lists["length"])
    log_r = jax.vmap(partial(brl_mh.log_reference_density, static, data))(rules, lengths)
    assert float(np.exp(np.asarray(log_r, np.float64)).sum()) == pytest.approx(1.0, abs=1e-5)
    truth_table, y = tiny_problem()
    exact = exact_log_joint(truth_table, y, 2, brl.Priors(), CAPACITY, beta=0.0, rule_weights=rule_weights)
    np.testing.assert_allclose(log_r, jax.vmap(lambda r, m: exact({"rules": r, "length": m}))(rules, lengths), atol=1e-5)


def test_uniform_below_is_exactly_uniform_where_a_modulo_is_not():
    """n = 3 2^29: 32 random bits modulo n put 3/4 of the draws below 2^30 (two whole cycles and two
    thirds of a third), the exact draw 2/3; 20,000 draws tell them apart by 15 standard errors. The
    control is the modulo of the same keys' bits."""
    n, draws = 3 * 2**29, 20_000
    keys = jax.random.split(jax.random.PRNGKey(6), draws)
    exact = np.asarray(jax.jit(jax.vmap(lambda key: brl_mh.uniform_below(key, n)))(keys))
    assert exact.min() >= 0 and exact.max() < n
    standard_error = np.sqrt(2 / 3 * 1 / 3 / draws)
    assert abs((exact < 2**30).mean() - 2 / 3) < 4 * standard_error
    bits = np.asarray(jax.vmap(lambda key: jax.random.bits(jax.random.split(key)[1], (), jnp.uint32))(keys))
    assert abs((bits % n < 2**30).mean() - 2 / 3) > 4 * standard_error


def test_reference_draws_match_the_enumerated_reference_and_other_weights_fail():
    """Independent draws from the reference (:func:`brl_mh.reference_draw`, by tickets) with skewed rule
    weights follow r(d) enumerated over all lists; the control tests them against the uniform reference."""
    static, data = target(brl.Priors())
    weights = skewed_weights(len(CARDINALITIES))
    learned = brl_mh.with_proposal(static, data, weights)
    keys = jax.random.split(jax.random.PRNGKey(21), N_REPLICAS * N_DRAWS)
    drawn = jax.vmap(partial(brl_mh.reference_draw, static, learned))(keys)
    draws = {"rules": drawn.rules.reshape(N_REPLICAS, N_DRAWS, -1), "length": drawn.length.reshape(N_REPLICAS, N_DRAWS)}
    result = gof_against_enumeration(draws, brl.Priors(), 0.0, weights)
    assert result.passed(alpha=1e-3), result
    np.testing.assert_allclose(drawn.log_reference, jax.vmap(partial(brl_mh.log_reference_density, static, learned))(
        drawn.rules, drawn.length), rtol=1e-6)
    result = gof_against_enumeration(draws, brl.Priors(), 0.0, None)
    assert not result.passed(alpha=1e-3), result


def test_the_replica_at_the_reference_is_redrawn_at_every_step():
    """With one Metropolis-Hastings step per call, the list length of the replica at beta = 0 is
    uncorrelated from one call to the next (a fresh draw each time), while at beta = 0.001, where no
    redraw happens and the target is almost the same, one step leaves it strongly correlated."""
    truth_table, y = tiny_problem()
    static, data = brl_mh.make_target(truth_table, CARDINALITIES, 2, y, brl.Priors(), CAPACITY, steps_per_call=1)

    def lag_one_correlation(first_beta):
        betas = jnp.array([first_beta, 1.0])
        states = jax.vmap(partial(brl_mh.init, static, data))(jax.random.split(jax.random.PRNGKey(8), 2))

        def call(states, key):
            states, _ = brl_mh.step(static, data, states, jax.random.split(key, 2), betas)
            return states, states.length[0]

        _, lengths = jax.lax.scan(call, states, jax.random.split(jax.random.PRNGKey(9), 4000))
        lengths = np.asarray(lengths, np.float64)
        return np.corrcoef(lengths[:-1], lengths[1:])[0, 1]

    assert abs(lag_one_correlation(0.0)) < 0.06  # about 4 standard errors of 4000 independent draws
    assert lag_one_correlation(0.001) > 0.5


def test_a_step_re_evaluates_the_reference_of_states_from_an_earlier_round():
    """States evaluated with the uniform reference, then stepped with data holding learned weights (a new
    round's): every replica's log reference density is that of the new reference, moved or not."""
    static, data = target(brl.Priors())
    learned = brl_mh.with_proposal(static, data, skewed_weights(len(CARDINALITIES)))
    states = jax.vmap(partial(brl_mh.init, static, data))(jax.random.split(jax.random.PRNGKey(2), N_REPLICAS))
    stepped, _ = brl_mh.step(static, learned, states, jax.random.split(jax.random.PRNGKey(3), N_REPLICAS), POSTERIOR)
    expected = jax.vmap(partial(brl_mh.log_reference_density, static, learned))(stepped.rules, stepped.length)
    np.testing.assert_allclose(stepped.log_reference, expected, rtol=1e-6)
    unchanged = np.asarray((stepped.rules == states.rules).all(axis=1))
    assert unchanged.any()  # some replicas kept their list (a rejection), so only the refresh can mend them
    assert not np.allclose(np.asarray(states.log_reference)[unchanged], np.asarray(expected)[unchanged])


def test_rules_drawn_by_learned_weights_match_the_enumerated_posterior_and_an_uncorrected_ratio_fails():
    """Insert and replace draw the rule by far-from-uniform weights (:func:`brl_mh.with_proposal`), at the
    posterior and at a tempered rung; the control draws by the weights but computes the ratio as if the
    choice were uniform."""
    static, data = target(brl.Priors())
    weights = skewed_weights(len(CARDINALITIES))
    weighted = brl_mh.with_proposal(static, data, weights)
    betas = jnp.where(jnp.arange(N_REPLICAS) % 2 == 0, 0.3 * POSTERIOR, POSTERIOR)
    draws = sample_replicas(static, weighted, jax.random.PRNGKey(13), betas)
    for first, beta in ((0, 0.3), (1, 1.0)):
        result = gof_against_enumeration(jax.tree.map(lambda x: x[first::2], draws), brl.Priors(), beta, weights)
        assert result.passed(alpha=1e-3), (beta, result)
    uncorrected = weighted._replace(log_rule_choice=data.log_rule_choice)
    result = gof_against_enumeration(sample_replicas(static, uncorrected, jax.random.PRNGKey(13), POSTERIOR), brl.Priors())
    assert not result.passed(alpha=1e-3), result


def test_neighbour_moves_match_the_enumerated_posterior_and_an_uncorrected_ratio_fails():
    """With the neighbour move (a relation in which antecedents have 1 to 3 neighbours), at the posterior
    and at a tempered rung; the control leaves out the ratio f(|N(added)|) / f(|N(removed)|)."""
    static, data = target(brl.Priors(), NEIGHBOUR_LISTS[5])
    assert static.neighbour_moves
    betas = jnp.where(jnp.arange(N_REPLICAS) % 2 == 0, 0.3 * POSTERIOR, POSTERIOR)
    draws = sample_replicas(static, data, jax.random.PRNGKey(17), betas)
    for first, beta in ((0, 0.3), (1, 1.0)):
        result = gof_against_enumeration(jax.tree.map(lambda x: x[first::2], draws), brl.Priors(), beta)
        assert result.passed(alpha=1e-3), (beta, result)
    uncorrected = data._replace(log_neighbour_choice=jnp.zeros_like(data.log_neighbour_choice))
    result = gof_against_enumeration(sample_replicas(static, uncorrected, jax.random.PRNGKey(17), POSTERIOR), brl.Priors())
    assert not result.passed(alpha=1e-3), result


def test_tempered_replicas_match_the_enumerated_tempered_posterior_and_another_reference_fails():
    """One batch with replicas at beta = 0.3 and at 1: each follows r(d)^(1 - beta) (p(d) p(y | d))^beta,
    r the reference. The control runs with a reference of learned weights (the proposal left uniform)
    against the uniform reference's enumeration: the same posterior rung, another rung 0.3."""
    betas = jnp.where(jnp.arange(N_REPLICAS) % 2 == 0, 0.3 * POSTERIOR, POSTERIOR)
    static, data = target(brl.Priors())
    draws = sample_replicas(static, data, jax.random.PRNGKey(5), betas)
    for first, beta in ((0, 0.3), (1, 1.0)):
        result = gof_against_enumeration(jax.tree.map(lambda x: x[first::2], draws), brl.Priors(), beta)
        assert result.passed(alpha=1e-3), (beta, result)
    other_reference = brl_mh.with_proposal(static, data, skewed_weights(len(CARDINALITIES))).reference_ticket_bounds
    draws = sample_replicas(static, data._replace(reference_ticket_bounds=other_reference), jax.random.PRNGKey(5),
                            0.3 * POSTERIOR)
    result = gof_against_enumeration(draws, brl.Priors(), 0.3)
    assert not result.passed(alpha=1e-3), result


def exact_move_acceptance(rules, priors):
    """Per move type, the exact mean Metropolis-Hastings acceptance of its proposals (null moves left out)
    from the list ``rules`` at beta = 1, uniform rule choice, no neighbour moves: the sum over the lists
    d* that the move reaches of Q_move(d* | d) min(1, pi(d*) Q(d | d*) / (pi(d) Q(d* | d))), over the sum of
    Q_move(d* | d); pi from the model file's formulas (:func:`exact_log_joint`)."""
    truth_table, y = tiny_problem()
    log_joint = exact_log_joint(truth_table, y, 2, priors, CAPACITY)

    def log_pi(lst):
        padded = jnp.asarray(list(lst) + [-1] * (CAPACITY - len(lst)), jnp.int32)
        return float(log_joint({"rules": padded, "length": jnp.int32(len(lst))}))

    n = len(CARDINALITIES)
    forward = proposal_probabilities(rules, n, CAPACITY)
    acceptance = {}
    for move, outcomes in proposals_by_move(rules, n, CAPACITY).items():
        accepted = sum(q * min(1.0, math.exp(log_pi(new) - log_pi(rules))
                               * proposal_probabilities(new, n, CAPACITY)[rules] / forward[new])
                       for new, q in outcomes.items())
        acceptance[move] = accepted / sum(outcomes.values())
    return acceptance


def test_each_move_type_s_reported_acceptance_is_its_exact_acceptance_and_not_another_s():
    """Many replicas of one list take one step each: a step reports its acceptance under the move type it
    proposed and NaN under the others (a null move only in ``null_share``, accepted). Averaged over the
    replicas, each type's report matches its exact acceptance (within 4 standard errors of the binomial
    mean of proposals); the control reads the reports under another type's name, which must not match."""
    n_replicas = 20000
    rules = (3, 0)
    truth_table, y = tiny_problem()
    static, data = brl_mh.make_target(truth_table, CARDINALITIES, 2, y, brl.Priors(), CAPACITY, steps_per_call=1)
    padded = jnp.asarray(list(rules) + [-1] * (CAPACITY - len(rules)), jnp.int32)
    one = brl_mh.list_state(static, data, padded, len(rules))
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (n_replicas, *jnp.shape(x))), one)
    keys = jax.random.split(jax.random.PRNGKey(11), n_replicas)
    _, info = jax.jit(brl_mh.step, static_argnums=0)(static, data, states, keys, jnp.ones(n_replicas))
    names = {brl_mh.INSERT: "insert_accept_prob", brl_mh.DELETE: "delete_accept_prob", brl_mh.SWAP: "swap_accept_prob",
             brl_mh.REPLACE: "replace_accept_prob", brl_mh.NEIGHBOUR: "neighbour_accept_prob"}
    reports = {move: np.asarray(getattr(info, name)) for move, name in names.items()}
    proposed = np.stack([~np.isnan(report) for report in reports.values()])
    null = np.asarray(info.null_share) == 1.0
    np.testing.assert_array_equal(proposed.sum(axis=0) + null, 1)  # one move type, or a null move, per step
    np.testing.assert_array_equal(np.asarray(info.accept_prob)[null], 1.0)
    for move, report in reports.items():
        np.testing.assert_array_equal(report[~np.isnan(report)], np.asarray(info.accept_prob)[~np.isnan(report)])
    assert np.isnan(reports[brl_mh.NEIGHBOUR]).all()  # a target without neighbour moves never proposes one

    exact = exact_move_acceptance(rules, brl.Priors())  # insert 0.62, delete 0.73, swap 1, replace 0.33
    assert np.diff(sorted(exact.values())).min() > 0.1  # far apart, so that the control can fail

    def matches(report, expected):
        drawn = report[~np.isnan(report)]
        standard_error = max(np.sqrt(expected * (1 - expected) / len(drawn)), 1e-3)
        return len(drawn) > 1000 and abs(drawn.mean() - expected) < 4 * standard_error

    for move in exact:
        assert matches(reports[move], exact[move]), (move, np.nanmean(reports[move]), exact[move])
    shifted = dict(zip(exact, np.roll(list(exact), 1)))  # each type's report read under another type
    assert not any(matches(reports[shifted[move]], exact[move]) for move in exact)
