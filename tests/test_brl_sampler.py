"""BRL model file and Metropolis-Hastings kernel: log_density agreement, proposals at every edge,
exactness against enumeration (with negative controls), and simulation-based calibration."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from jax import enable_x64
from numpyro.infer.util import log_density

from interpretable_zoo.diagnostics.exact import enumerate_posterior, exact_gof_test, state_index
from interpretable_zoo.diagnostics.sbc import simulation_based_calibration
from interpretable_zoo.inference import brl_mh
from interpretable_zoo.inference.mcmc import run_mcmc
from interpretable_zoo.models import brl

ANTECEDENTS = [(0,), (1,), (2,), (0, 1), (1, 2)]  # 5 antecedents: 326 possible lists
CARDINALITIES = np.array([len(a) for a in ANTECEDENTS])
OTHER_PRIORS = brl.Priors(lam=0.5, eta=2.0, alpha=(0.3, 3.0))


def tiny_problem(n=14, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, (n, 3)).astype(bool)
    truth_table = np.stack([X[:, list(a)].all(axis=1) for a in ANTECEDENTS], axis=1)
    y = ((X[:, 0] & X[:, 1]) ^ (rng.random(n) < 0.25)).astype(np.int32)
    return truth_table, y


def all_lists(n_antecedents, capacity):
    rules, lengths = [], []
    for m in range(capacity + 1):
        for perm in itertools.permutations(range(n_antecedents), m):
            rules.append(list(perm) + [-1] * (capacity - m))
            lengths.append(m)
    return {"rules": np.array(rules, np.int32), "length": np.array(lengths, np.int32)}


def random_params(rng, n_draws, capacity, alpha):
    """Sites of brl.model: random lists (every length), the unused antecedents after them, random theta."""
    lengths = np.arange(n_draws) % (capacity + 1)
    antecedents = np.stack([rng.permutation(len(ANTECEDENTS))[:capacity] for _ in range(n_draws)])
    params = {"length": jnp.asarray(lengths), "theta": jnp.asarray(rng.dirichlet(alpha, (n_draws, capacity + 1)))}
    for j in range(capacity):
        params[f"antecedent_{j}"] = jnp.asarray(antecedents[:, j])
        params[f"cardinality_{j}"] = jnp.asarray(CARDINALITIES[antecedents[:, j]])
    return params


def exact_log_joint(truth_table, y, n_classes, priors, capacity):
    def log_joint(state):
        rule_counts, default_counts = brl.capture_counts(truth_table, y, n_classes, state["rules"], state["length"])
        alpha = priors.alpha_vector(n_classes)
        return brl.log_prior(state["rules"], state["length"], CARDINALITIES, priors, capacity) + (
            brl.log_marginal_likelihood(rule_counts, default_counts, state["length"], alpha)
        )

    return log_joint


# ---------------------------------------------------------------- model file


def test_list_count_and_prior_normalises():
    states = all_lists(5, 5)
    assert len(states["length"]) == 326
    with enable_x64():
        for priors in (brl.Priors(), OTHER_PRIORS):
            log_p = jax.jit(jax.vmap(lambda r, m: brl.log_prior(r, m, CARDINALITIES, priors, 5)))(
                jnp.asarray(states["rules"]), jnp.asarray(states["length"])
            )
            assert float(jnp.exp(log_p).sum()) == pytest.approx(1.0, abs=1e-12)


def test_cardinality_normaliser_drops_exhausted_cardinalities():
    # three cardinality-1 antecedents used up: the 4th rule must have cardinality 2 with probability 1
    rules = jnp.array([0, 1, 2, 3, -1])
    with enable_x64():
        log_prior = jax.jit(lambda length: brl.log_prior(rules, length, CARDINALITIES, brl.Priors(), 5))
        log_p4, log_p3 = log_prior(4), log_prior(3)
        length_prior = brl.log_length_prior(brl.Priors(), 5)
        # p(c=2 | none of cardinality 1 left) = 1, then 1/2 for the antecedent
        expected = float(log_p3 - length_prior[3] + length_prior[4] + np.log(1 / 2))
        assert float(log_p4) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "priors, n_classes",
    [(brl.Priors(), 2), (OTHER_PRIORS, 2), (brl.Priors(lam=4.0, alpha=(0.5, 1.0, 2.0)), 3)],
    ids=["default", "other", "three-classes"],
)
def test_prior_and_likelihood_match_the_numpyro_program(priors, n_classes):
    """log p(d) + log p(y | d) = log p(d, theta, y) - log p(theta | d, y) for any theta (the model's
    log_density with theta drawn at random), and the kernel's log target equals it."""
    truth_table, y = tiny_problem()
    y = (y + truth_table[:, 2]) % n_classes
    capacity = 5
    kwargs = {"priors": priors, "max_length": capacity}
    with enable_x64():
        key = jax.random.PRNGKey(3)
        alpha = priors.alpha_vector(n_classes)
        spec = brl_mh.TargetSpec(priors, tuple(CARDINALITIES), n_classes, capacity)
        data = brl_mh.target_data(spec, truth_table, y)
        params = random_params(np.random.default_rng(5), 40, capacity, alpha)
        args = (truth_table, CARDINALITIES, n_classes, y)

        def differences(params):
            length = params["length"]
            antecedents = jnp.stack([params[f"antecedent_{j}"] for j in range(capacity)])
            rules = jnp.where(jnp.arange(capacity) < length, antecedents, -1)
            joint, _ = log_density(brl.model, args, kwargs, params)
            rule_counts, default_counts = brl.capture_counts(truth_table, y, n_classes, rules, length)
            rows = jnp.arange(capacity + 1)
            in_use = (rows < length) | (rows == capacity)  # rules j < length, and the default rule (last row)
            counts = jnp.concatenate([rule_counts, default_counts[None]])
            log_posterior_theta = jnp.where(in_use, dist.Dirichlet(alpha + counts).log_prob(params["theta"]), 0.0).sum()
            collapsed = brl.log_prior(rules, length, CARDINALITIES, priors, capacity) + brl.log_marginal_likelihood(
                rule_counts, default_counts, length, alpha
            )
            collapsed_program, _ = log_density(brl.collapsed_model, args, kwargs, params)
            state = brl_mh.init_chain(spec, data, key, rules, length)
            return jnp.stack(
                [joint - log_posterior_theta - collapsed, collapsed_program - collapsed, -state.potential_energy - collapsed]
            )

        differences = jax.jit(jax.vmap(differences))(params)
        np.testing.assert_allclose(np.asarray(differences), 0.0, atol=1e-9)


def test_lookup_tables_equal_the_model_formulas_when_no_cardinality_runs_out():
    """Lists of at most 2 of the 5 antecedents (3 of cardinality 1, 2 of cardinality 2) cannot use up
    a cardinality: the kernel leaves the cardinality-normaliser correction out (it is zero), and its
    table-based log target equals log_prior + log_marginal_likelihood on every list. (With capacity 5,
    where the correction is added, test_prior_and_likelihood_match_the_numpyro_program checks it.)"""
    truth_table, y = tiny_problem()
    capacity, priors = 2, OTHER_PRIORS
    states = all_lists(5, capacity)
    with enable_x64():
        spec = brl_mh.TargetSpec(priors, tuple(CARDINALITIES), 2, capacity)
        assert not spec.cardinalities_can_run_out and brl_mh.TargetSpec(priors, tuple(CARDINALITIES), 2, 5).cardinalities_can_run_out
        data = brl_mh.target_data(spec, truth_table, y)
        exact = exact_log_joint(truth_table, y, 2, priors, capacity)

        def differences(rules, length):
            state = brl_mh.init_chain(spec, data, jax.random.PRNGKey(0), rules, length)
            correction = brl.cardinality_normaliser_correction(rules, length, CARDINALITIES, priors)
            return jnp.stack([-state.potential_energy - exact({"rules": rules, "length": length}), correction])

        differences = jax.jit(jax.vmap(differences))(jnp.asarray(states["rules"]), jnp.asarray(states["length"]))
        np.testing.assert_allclose(np.asarray(differences), 0.0, atol=1e-9)


@pytest.mark.parametrize("capacity", [20, brl_mh.SEQUENTIAL_PREFIX_ROWS + 8], ids=["row-by-row", "log-depth-scan"])
def test_bit_vector_label_counts_equal_the_model_files_captures(capacity):
    """The kernel's packed captures (both ways of forming the running OR) give the model file's
    per-rule and default label counts, with the last class counted as the rest, for 3 classes and a
    sample count that is not a multiple of the 32-bit word."""
    rng = np.random.default_rng(4)
    n_samples, n_antecedents, n_classes = 77, 60, 3
    truth_table = rng.random((n_samples, n_antecedents)) < 0.15
    y = rng.integers(0, n_classes, n_samples)
    spec = brl_mh.TargetSpec(brl.Priors(), (1,) * n_antecedents, n_classes, capacity)
    data = brl_mh.target_data(spec, truth_table, y)
    lengths = np.arange(40) % (capacity + 1)
    rules = np.stack([np.where(np.arange(capacity) < m, rng.permutation(n_antecedents)[:capacity], -1) for m in lengths])
    counts = jax.jit(jax.vmap(lambda r, m: brl_mh.label_counts(data, r, m)))(rules, lengths)
    for r, m, got in zip(rules, lengths, np.asarray(counts)):
        rule_counts, default_counts = (np.asarray(c) for c in brl.capture_counts(truth_table, y, n_classes, r, m))
        np.testing.assert_array_equal(got[:m, :n_classes], rule_counts[:m])
        np.testing.assert_array_equal(got[m, :n_classes], default_counts)
        np.testing.assert_array_equal(got[:, n_classes], got[:, :n_classes].sum(axis=1))
        assert not got[m + 1 :].any()


# ---------------------------------------------------------------- proposals


def neighbours(rules, n_antecedents, capacity):
    """Brute force Q(. | d): every list one move away with its proposal probability (module docstring)."""
    m = len(rules)
    moves = [name for name, ok in (("insert", m < capacity), ("delete", m >= 1), ("swap", m >= 2)) if ok]
    q = {}
    for move in moves:
        if move == "insert":
            outcomes = [rules[:p] + (a,) + rules[p:] for a in range(n_antecedents) if a not in rules for p in range(m + 1)]
        elif move == "delete":
            outcomes = [rules[:p] + rules[p + 1 :] for p in range(m)]
        else:
            outcomes = []
            for i, j in itertools.combinations(range(m), 2):
                swapped = list(rules)
                swapped[i], swapped[j] = swapped[j], swapped[i]
                outcomes.append(tuple(swapped))
        for outcome in outcomes:
            q[outcome] = q.get(outcome, 0.0) + 1.0 / len(moves) / len(outcomes)
    return q


EDGE_CASES = [  # (list, |A|, capacity): empty, one rule, middle, one short of full, full; capacity below |A|
    ((), 5, 5), ((3,), 5, 5), ((3, 0), 5, 5), ((3, 0, 4, 1), 5, 5), ((3, 0, 4, 1, 2), 5, 5),
    ((), 5, 1), ((2,), 5, 1), ((2,), 5, 3), ((2, 4), 5, 3), ((2, 4, 0), 5, 3), ((0,), 1, 1), ((0, 1), 2, 2),
]  # fmt: skip


def padded(rules, capacity):
    return jnp.array(list(rules) + [-1] * (capacity - len(rules)), jnp.int32)


@pytest.mark.parametrize("rules, n_antecedents, capacity", EDGE_CASES)
def test_proposal_probabilities_forward_and_reverse_at_every_edge(rules, n_antecedents, capacity):
    forward = neighbours(rules, n_antecedents, capacity)
    assert sum(forward.values()) == pytest.approx(1.0)
    table = np.asarray(brl_mh.log_proposal_table(brl_mh.TargetSpec(brl.Priors(), (1,) * n_antecedents, 2, capacity)))
    for new_rules, q in forward.items():
        move = {1: brl_mh.INSERT, -1: brl_mh.DELETE, 0: brl_mh.SWAP}[len(new_rules) - len(rules)]
        log_q = brl_mh.log_proposal_probability(move, len(rules), n_antecedents, capacity)
        assert float(log_q) == pytest.approx(math.log(q), abs=1e-6)
        reverse = neighbours(new_rules, n_antecedents, capacity)[rules]
        reverse_move = brl_mh.REVERSE_MOVE[move]
        log_q_reverse = brl_mh.log_proposal_probability(reverse_move, len(new_rules), n_antecedents, capacity)
        assert float(log_q_reverse) == pytest.approx(math.log(reverse), abs=1e-6)
        # the kernel reads both from its table
        assert table[move, len(rules)] == pytest.approx(math.log(q), abs=1e-6)
        assert table[reverse_move, len(new_rules)] == pytest.approx(math.log(reverse), abs=1e-6)


@pytest.mark.parametrize("rules, n_antecedents, capacity", EDGE_CASES)
def test_proposals_are_drawn_with_those_probabilities(rules, n_antecedents, capacity):
    from scipy import stats

    forward = neighbours(rules, n_antecedents, capacity)
    outcomes = list(forward)
    n_draws = 20000
    uniforms = jax.random.uniform(jax.random.PRNGKey(len(rules) + 7 * capacity), (n_draws, 4))
    draw = jax.jit(jax.vmap(lambda u: brl_mh.propose(u, padded(rules, capacity), len(rules), n_antecedents)))
    moves, new_rules, new_lengths, inserted, deleted = (np.asarray(a) for a in draw(uniforms))
    drawn = [tuple(r[:m]) for r, m in zip(new_rules.tolist(), new_lengths.tolist())]
    assert set(drawn) <= set(outcomes)
    for move, r, m, a, d in zip(moves[:200], new_rules[:200], new_lengths[:200], inserted[:200], deleted[:200]):
        assert (r[m:] == -1).all()
        assert move != brl_mh.INSERT or set(r[:m]) - set(rules) == {a}  # the reported inserted / deleted rule
        assert move != brl_mh.DELETE or set(rules) - set(r[:m]) == {d}
    counts = np.array([drawn.count(o) for o in outcomes])
    expected = n_draws * np.array([forward[o] for o in outcomes])
    if len(outcomes) > 1:
        assert stats.chisquare(counts, expected).pvalue > 1e-4
    else:
        assert counts[0] == n_draws


# ---------------------------------------------------------------- exactness against enumeration


def run_on_tiny_problem(priors, seed, num_samples=12000, num_chains=24, kernel=None):
    truth_table, y = tiny_problem()
    mcmc = run_mcmc(
        kernel or brl_mh.BRLMetropolisHastings(),
        num_warmup=200,
        num_samples=num_samples,
        num_chains=num_chains,
        seed=seed,
        model_args=(truth_table, CARDINALITIES, 2, y),
        model_kwargs={"priors": priors},
        chain_method="vectorized",
        progress_bar=False,
    )
    return mcmc.get_samples(group_by_chain=True)


def gof_against_enumeration(draws, priors):
    truth_table, y = tiny_problem()
    states = all_lists(5, 5)
    with enable_x64():
        probs = enumerate_posterior(exact_log_joint(truth_table, y, 2, priors, 5), states)
    indices = state_index({"rules": draws["rules"], "length": draws["length"]}, states)
    rules, lengths = states["rules"], states["length"]
    statistics = {f"length={m}": (lengths == m) * 1.0 for m in range(6)}
    for a in range(5):
        statistics[f"first rule {a}"] = (rules[:, 0] == a) * 1.0
        statistics[f"{a} in list"] = (rules == a).any(axis=1) * 1.0
    for rank, state in enumerate(np.argsort(probs)[::-1][:8]):
        statistics[f"top state {rank}"] = (np.arange(len(probs)) == state) * 1.0
    return exact_gof_test(indices, probs, statistics=statistics)


@pytest.mark.parametrize("priors", [brl.Priors(), OTHER_PRIORS], ids=["default", "lam0.5-eta2-alpha0.3,3"])
def test_sampler_matches_the_enumerated_posterior(priors):
    result = gof_against_enumeration(run_on_tiny_problem(priors, seed=11), priors)
    assert result.passed(alpha=1e-3), result


def test_negative_control_wrong_prior_fails():
    draws = run_on_tiny_problem(brl.Priors(lam=1.5), seed=11)
    result = gof_against_enumeration(draws, brl.Priors())
    assert not result.passed(alpha=1e-3), result


def test_negative_control_hastings_ratio_without_edge_move_probabilities_fails(monkeypatch):
    """The proposal probability without P_m(move): wrong exactly at the edges (m = 0, 1, capacity)."""

    def without_move_probability(move, length, n_antecedents, capacity):
        m = jnp.asarray(length, jnp.float32)
        choice = jnp.stack([-jnp.log((n_antecedents - m) * (m + 1)), -jnp.log(m), -jnp.log(m * (m - 1) / 2)])
        return choice[move]

    monkeypatch.setattr(brl_mh, "log_proposal_probability", without_move_probability)
    result = gof_against_enumeration(run_on_tiny_problem(brl.Priors(), seed=11), brl.Priors())
    assert not result.passed(alpha=1e-3), result


# ---------------------------------------------------------------- parallel tempering

LADDER = (1.0, 0.3, 0.05)


def test_swaps_pair_neighbours_of_one_parity_with_the_exact_acceptance():
    capacity, n_copies = 5, 4
    rules = jnp.tile(jnp.arange(n_copies)[:, None], (1, capacity))
    log_likelihood = jnp.array([-10.0, -4.0, -9.0, -12.0])
    ladder = brl_mh.BRLState(
        z={"rules": rules, "length": jnp.full(n_copies, capacity)},
        cardinality_counts=jnp.tile(jnp.arange(n_copies)[:, None], (1, 2)),
        log_prior=jnp.zeros(n_copies),
        log_likelihood=log_likelihood,
        accept_prob=jnp.zeros(n_copies),
        rng_key=jax.random.split(jax.random.PRNGKey(0), n_copies),
    )
    betas = jnp.array([1.0, 0.5, 0.25, 0.1])
    swap = jax.jit(brl_mh.swap_step)
    for parity, pairs in ((0, [(0, 1), (2, 3)]), (1, [(1, 2)])):
        for u in (0.0, 0.3, 0.9):
            swapped = swap(ladder, betas, jnp.full(n_copies, u), jnp.asarray(parity))
            expected = list(range(n_copies))
            for k, j in pairs:
                ratio = math.exp((betas[k] - betas[j]) * (log_likelihood[j] - log_likelihood[k]))
                if u < ratio:
                    expected[k], expected[j] = j, k
            assert np.asarray(swapped.z["rules"][:, 0]).tolist() == expected
            np.testing.assert_array_equal(swapped.log_likelihood, log_likelihood[np.array(expected)])
            np.testing.assert_array_equal(swapped.cardinality_counts[:, 0], expected)
    with pytest.raises(ValueError, match="inverse_temperatures"):
        brl_mh.BRLMetropolisHastings(inverse_temperatures=(0.5, 1.0))
    assert brl_mh.geometric_ladder(3, 0.04) == pytest.approx((1.0, 0.2, 0.04))


def test_parallel_tempering_matches_the_enumerated_posterior():
    """The temperature-1 copy of a three-temperature ladder, two iterations per draw."""
    kernel = brl_mh.BRLMetropolisHastings(inverse_temperatures=LADDER, steps_per_sample=2)
    draws = run_on_tiny_problem(brl.Priors(), seed=11, num_samples=3000, kernel=kernel)
    result = gof_against_enumeration(draws, brl.Priors())
    assert result.passed(alpha=1e-3), result


def test_negative_control_swaps_always_accepted_fails(monkeypatch):
    exact_swap = brl_mh.swap_step
    monkeypatch.setattr(brl_mh, "swap_step", lambda ladder, betas, uniforms, parity: exact_swap(ladder, betas, 0.0 * uniforms, parity))
    kernel = brl_mh.BRLMetropolisHastings(inverse_temperatures=LADDER, steps_per_sample=2)
    result = gof_against_enumeration(run_on_tiny_problem(brl.Priors(), seed=11, num_samples=1500, kernel=kernel), brl.Priors())
    assert not result.passed(alpha=1e-3), result


# ---------------------------------------------------------------- simulation-based calibration


def test_simulation_based_calibration_on_lists_drawn_from_the_model():
    truth_table, _ = tiny_problem(n=30, seed=4)
    capacity = 5
    priors = brl.Priors(lam=2.0)
    spec = brl_mh.TargetSpec(priors, tuple(CARDINALITIES), 2, capacity)
    num_warmup, num_draws, thin = 100, 60, 10

    def fit(rng_key, data):
        bits = brl_mh.target_data(spec, truth_table, data["y"])
        key_init, key_chain = jax.random.split(rng_key)
        state = brl_mh.init_chain(spec, bits, key_chain, *brl_mh.random_list(spec, key_init))
        step = lambda s, _: (brl_mh.mh_step(spec, bits, s),) * 2  # noqa: E731
        state, _ = jax.lax.scan(step, state, None, length=num_warmup)
        _, states = jax.lax.scan(step, state, None, length=num_draws * thin)
        rules, lengths = states.z["rules"], states.z["length"]
        draws = {"length": lengths}
        for j in range(capacity):
            draws[f"antecedent_{j}"] = jnp.maximum(rules[:, j], 0)
        return draws

    def count_of(antecedent):
        return lambda v: sum((v[f"antecedent_{j}"] == antecedent) & (j < v["length"]) for j in range(capacity))

    def pairs(v):
        return sum((jnp.asarray(CARDINALITIES)[v[f"antecedent_{j}"]] == 2) & (j < v["length"]) for j in range(capacity))

    statistics = {"length": lambda v: v["length"], "pairs": pairs, "uses (0,)": count_of(0), "uses (0,1)": count_of(3)}
    statistics["first rule"] = lambda v: jnp.where(v["length"] > 0, v["antecedent_0"], -1)
    result = simulation_based_calibration(
        jax.random.key(0),
        brl.model,
        fit,
        num_simulations=300,
        data_sites=["y"],
        model_args=(truth_table, CARDINALITIES, 2),
        model_kwargs={"priors": priors, "max_length": capacity},
        statistics=statistics,
        thin=thin,
    )
    assert result.passed(alpha=1e-3), result
