"""BRL model file and Metropolis-Hastings kernel: log_density agreement, bit-vector captures, one
compiled step per size bucket, the NumPyro kernel against enumeration (with negative controls), and
simulation-based calibration. The moves themselves: test_brl_moves.py."""

import functools
import itertools
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from compile_events import compile_pipeline_events
from jax import enable_x64
from numpyro.infer.util import log_density
from scipy import stats

from interpretable_zoo.diagnostics.exact import enumerate_posterior, exact_gof_test, state_index
from interpretable_zoo.diagnostics.sbc import simulation_based_calibration
from interpretable_zoo.inference import brl_mh, rule_mining
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


def reference_rule_weights(n_antecedents, rule_weights=None):
    """The reference's w_a: uniform, or REFERENCE_UNIFORM_SHARE spread evenly and the rest by ``rule_weights``."""
    if rule_weights is None:
        return np.full(n_antecedents, 1.0 / n_antecedents)
    share = brl_mh.REFERENCE_UNIFORM_SHARE
    return share / n_antecedents + (1 - share) * np.asarray(rule_weights, float) / np.sum(rule_weights)


def exact_log_joint(truth_table, y, n_classes, priors, capacity, beta=1.0, rule_weights=None):
    """(1 - beta) log r(d) + beta (log p(d) + log p(y | d)) from the model file's formulas, r the
    tempering reference: a Poisson(capacity / 2) length truncated to 0..capacity, then the rules drawn
    one after the other without replacement by the weights of :func:`reference_rule_weights`."""
    lengths = np.arange(capacity + 1)
    mean = capacity / 2
    reference_length = jnp.asarray(stats.poisson.logpmf(lengths, mean) - stats.poisson.logcdf(capacity, mean))
    w = jnp.asarray(reference_rule_weights(truth_table.shape[1], rule_weights))

    def log_joint(state):
        rule_counts, default_counts = brl.capture_counts(truth_table, y, n_classes, state["rules"], state["length"])
        alpha = priors.alpha_vector(n_classes)
        log_prior = brl.log_prior(state["rules"], state["length"], CARDINALITIES, priors, capacity)
        log_reference = reference_length[state["length"]]
        drawn = 0.0
        for j in range(capacity):
            w_j = jnp.where(j < state["length"], w[jnp.maximum(state["rules"][j], 0)], 0.0)
            log_reference += jnp.where(j < state["length"], jnp.log(w_j) - jnp.log(1.0 - drawn), 0.0)
            drawn += w_j
        log_posterior = log_prior + brl.log_marginal_likelihood(rule_counts, default_counts, state["length"], alpha)
        return (1 - beta) * log_reference + beta * log_posterior

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
        alpha = priors.alpha_vector(n_classes)
        static, data = brl_mh.make_target(truth_table, CARDINALITIES, n_classes, y, priors, capacity)
        assert static.antecedent_slots > len(ANTECEDENTS) and static.cardinalities_can_run_out  # padded; per position
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
            state = brl_mh.list_state(static, data, rules, length)
            kernel = state.log_prior + state.log_likelihood
            return jnp.stack([joint - log_posterior_theta - collapsed, collapsed_program - collapsed, kernel - collapsed])

        differences = jax.jit(jax.vmap(differences))(params)
        np.testing.assert_allclose(np.asarray(differences), 0.0, atol=1e-9)


def test_log_prior_by_counts_equals_the_model_formula_when_no_cardinality_runs_out():
    """Lists of at most 2 of the 5 antecedents (3 of cardinality 1, 2 of cardinality 2) cannot use up
    a cardinality: the kernel sums the cardinality terms over counts, and its log target equals
    log_prior (position by position) + log_marginal_likelihood on every list. (With capacity 5, where
    the kernel goes position by position, test_prior_and_likelihood_match_the_numpyro_program checks it.)"""
    truth_table, y = tiny_problem()
    capacity, priors = 2, OTHER_PRIORS
    states = all_lists(5, capacity)
    with enable_x64():
        static, data = brl_mh.make_target(truth_table, CARDINALITIES, 2, y, priors, capacity)
        assert not static.cardinalities_can_run_out
        exact = exact_log_joint(truth_table, y, 2, priors, capacity)

        def difference(rules, length):
            state = brl_mh.list_state(static, data, rules, length)
            return state.log_prior + state.log_likelihood - exact({"rules": rules, "length": length})

        differences = jax.jit(jax.vmap(difference))(jnp.asarray(states["rules"]), jnp.asarray(states["length"]))
        np.testing.assert_allclose(np.asarray(differences), 0.0, atol=1e-9)


@pytest.mark.parametrize("shape, n_words", [((5, 70), 3), ((3, 4, 33), 2), ((2, 32), 1), ((1, 1), 4)])
def test_packed_bits_are_the_same_from_numpy_and_from_a_trace(shape, n_words):
    """Bit k of word w is element 32 w + k, zeros beyond the array: NumPy's one-bit-per-element packing
    (concrete tables, also transposed views) and the traced packing give the same words."""
    bits = np.random.default_rng(0).random(shape) < 0.5
    last = (0,) * (len(shape) - 1) + (shape[-1] - 1,)
    bits[last] = True  # the last element of the first row: bit (P - 1) % 32 of word (P - 1) // 32
    traced = np.asarray(jax.jit(lambda b: brl_mh.pack_bits(b, n_words))(jnp.asarray(bits)))
    for layout in (bits, np.asfortranarray(bits)):
        packed = brl_mh.pack_bits(layout, n_words)
        assert packed.dtype == np.uint32 and packed.shape == shape[:-1] + (n_words,)
        np.testing.assert_array_equal(packed, traced)
    word, bit = divmod(shape[-1] - 1, 32)
    assert traced[last[:-1] + (word,)] >> bit & 1 == 1


@pytest.mark.parametrize(
    "capacity, distinct_rows, looped",
    [(20, None, False), (2 * brl_mh.ROWS_PER_BLOCK - 1, None, False), (20, 12, False), (20, None, True),
     (20, 12, True)],
    ids=["partial-last-block", "whole-blocks", "merged-duplicates", "row-by-row", "row-by-row-merged-duplicates"],
)
def test_bit_vector_label_counts_equal_the_model_files_captures(capacity, distinct_rows, looped, monkeypatch):
    """The kernel's packed captures (counted in blocks of rows, the last one partly padding or not, one row
    at a time as for wide bit vectors, and with duplicate samples merged into bit planes of their
    multiplicities) give the model file's per-rule and default label counts, with the last class
    counted as the rest, for 3 classes, with padded antecedents and a sample count whose words are padded
    (17 words in an 18-word bucket, the last word partly filled); lists of every length, batched."""
    if looped:  # these bit vectors are short: have them counted row by row all the same
        monkeypatch.setattr(brl_mh, "ROW_BY_ROW_WORDS", 1)
    rng = np.random.default_rng(4)
    n_samples, n_antecedents, n_classes = 17 * 32 - 3, 60, 3
    truth_table = rng.random((n_samples, n_antecedents)) < 0.15
    y = rng.integers(0, n_classes, n_samples)
    if distinct_rows is not None:  # every sample a copy of one of a few rows, with its label
        copied = rng.integers(0, distinct_rows, n_samples)
        truth_table, y = truth_table[copied], y[copied]
    static, data = brl_mh.make_target(truth_table, np.ones(n_antecedents, int), n_classes, y, brl.Priors(), capacity)
    _, multiplicity = np.unique(np.column_stack([truth_table, y]), axis=0, return_counts=True)
    planes = 1 if distinct_rows is None else brl_mh.bit_planes(multiplicity.max())
    assert (static.antecedent_slots, static.n_words) == (64, 18 if distinct_rows is None else 1)
    assert data.label_bits.shape == (n_classes, planes, static.n_words)
    assert (distinct_rows is None) == (len(multiplicity) == n_samples)
    lengths = np.arange(40) % (capacity + 1)
    rules = np.stack([np.where(np.arange(capacity) < m, rng.permutation(n_antecedents)[:capacity], -1) for m in lengths])
    counts = jax.jit(jax.vmap(lambda r, m: brl_mh.label_counts(data, r, m)))(rules, lengths)
    for r, m, got in zip(rules, lengths, np.asarray(counts)):
        rule_counts, default_counts = (np.asarray(c) for c in brl.capture_counts(truth_table, y, n_classes, r, m))
        np.testing.assert_array_equal(got[:m, :n_classes], rule_counts[:m])
        np.testing.assert_array_equal(got[m, :n_classes], default_counts)
        np.testing.assert_array_equal(got[:, n_classes], got[:, :n_classes].sum(axis=1))
        assert not got[m + 1 :].any()


def test_bit_planes_are_even_so_that_resampled_rows_keep_their_shapes():
    """Largest multiplicities on both sides of a power of two (Titanic's lie around 512) take the same
    planes; the planes always hold the largest multiplicity."""
    assert [brl_mh.bit_planes(n) for n in (1, 2, 3, 4, 255, 256, 450, 511, 512, 574, 1023, 1024)] == [
        2, 2, 2, 4, 8, 10, 10, 10, 10, 10, 10, 12]
    for n in range(1, 5000):
        assert n < 2 ** brl_mh.bit_planes(n) and brl_mh.bit_planes(n) % 2 == 0


def test_merging_duplicate_samples_changes_no_draw():
    """Samples merged into bit planes (1 word and 6 planes instead of 7 words) give the same chains,
    bit for bit, as one bit per sample; samples without duplicates are left unmerged."""
    truth_table, y = tiny_problem(n=200, seed=2)
    targets = [
        brl_mh.make_target(truth_table, CARDINALITIES, 2, y, brl.Priors(), 5, steps_per_call=7, merge_duplicates=merge)
        for merge in (True, False)
    ]
    assert [(static.n_words, data.label_bits.shape[1]) for static, data in targets] == [(1, 6), (7, 1)]
    chains = []
    for static, data in targets:
        states = jax.vmap(functools.partial(brl_mh.init, static, data))(jax.random.split(jax.random.key(3), 6))
        step = jax.jit(functools.partial(brl_mh.step, static))
        for key in jax.random.split(jax.random.key(4), 50):
            states, _ = step(data, states, jax.random.split(key, 6), jnp.linspace(0.2, 1.0, 6))
        chains.append(states)
    jax.tree.map(np.testing.assert_array_equal, *chains)
    unique_rows = np.random.default_rng(0).random((300, 40)) < 0.5
    static, data = brl_mh.make_target(unique_rows, np.ones(40, int), 2, np.arange(300) % 2, brl.Priors(), 5)
    assert (static.n_words, data.label_bits.shape[1]) == (10, 1)


def test_an_untempered_target_draws_what_the_tempered_program_draws_at_beta_one():
    """A target built untempered (``tempered=False``: no reference in the program, ``log_reference`` 0)
    gives every replica at beta = 1 the chain that the tempered program gives it, bit for bit; below
    beta = 1, where the reference has weight, the two differ (so the comparison can fail)."""
    truth_table, y = tiny_problem(n=60, seed=5)
    targets = [brl_mh.make_target(truth_table, CARDINALITIES, 2, y, brl.Priors(), 5, steps_per_call=7, tempered=tempered)
               for tempered in (True, False)]  # fmt: skip

    def chains(static, data, beta):
        states = jax.vmap(functools.partial(brl_mh.init, static, data))(jax.random.split(jax.random.key(3), 6))
        step = jax.jit(functools.partial(brl_mh.step, static))
        for key in jax.random.split(jax.random.key(4), 50):
            states, _ = step(data, states, jax.random.split(key, 6), jnp.full(6, beta))
        return states

    tempered, untempered = (chains(static, data, 1.0) for static, data in targets)
    for field in ("rules", "length", "log_prior", "log_likelihood"):
        np.testing.assert_array_equal(getattr(tempered, field), getattr(untempered, field), err_msg=field)
    assert np.all(np.asarray(untempered.log_reference) == 0) and np.all(np.asarray(tempered.log_reference) < 0)
    assert len({tuple(rules) for rules in np.asarray(untempered.rules)}) > 1  # the chains moved apart
    warm, cold = (chains(static, data, 0.5) for static, data in targets)
    assert not np.array_equal(warm.rules, cold.rules)


def test_truth_table_and_distinct_samples_read_each_antecedent_contiguously(monkeypatch):
    """truth_table equals the per-antecedent definition (an empty antecedent holds everywhere), built in
    chunks of one or two antecedents here, and holds each antecedent's samples contiguously (what the kernel
    packs); distinct_samples finds the groups of equal (row, label) pairs that a comparison of whole rows
    finds, for the table in that layout and in the sample-major one."""
    rng = np.random.default_rng(5)
    items = rng.random((300, 12)) < 0.4
    antecedents = [(0,), (3, 7), (), (1, 2, 11), (5,), (3, 7), (4, 9), (0, 6, 8, 10)]
    expected = np.stack([items[:, list(a)].all(axis=1) for a in antecedents], axis=1)
    monkeypatch.setattr(rule_mining, "TRUTH_TABLE_GATHER_BYTES", 700)
    table = rule_mining.truth_table(items.astype(np.uint8), antecedents)
    np.testing.assert_array_equal(table, expected)
    assert table.T.flags.c_contiguous
    y = rng.integers(0, 2, 300)
    _, first, counts = np.unique(np.column_stack([expected, y]), axis=0, return_index=True, return_counts=True)
    groups = sorted(zip(first.tolist(), counts.tolist()))
    assert len(groups) < 300 and max(counts) > 1  # duplicates to find
    for layout in (table, np.ascontiguousarray(table)):
        assert sorted(zip(*(v.tolist() for v in brl_mh.distinct_samples(layout, y)))) == groups


def compile_events(run):
    """``run()`` and the JAX compile-pipeline events (tracing, lowering, backend compile) it caused."""
    with compile_pipeline_events() as events:
        jax.block_until_ready(run())
    return events


def assert_the_second_target_compiles_nothing(first, second):
    """A jitted step on ``first`` (static, data) compiles; on ``second``, of the same static, it is neither
    traced nor compiled again."""
    (static, data), (other_static, other_data) = first, second
    assert other_static == static
    step = jax.jit(brl_mh.step, static_argnums=0)
    init = jax.jit(jax.vmap(brl_mh.init, in_axes=(None, None, 0)), static_argnums=0)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    betas = jnp.array([1.0, 0.5, 0.0])
    states = init(static, data, keys)
    assert "/jax/core/compile/backend_compile_duration" in compile_events(lambda: step(static, data, states, keys, betas))
    states = jax.block_until_ready(init(other_static, other_data, keys))
    assert compile_events(lambda: step(other_static, other_data, states, keys, betas)) == []


def test_a_second_target_in_the_same_buckets_compiles_nothing():
    """Another data set (6 instead of 5 antecedents, 20 instead of 14 samples: the same buckets) and
    other priors: the jitted step is neither traced nor compiled again."""
    truth_table, y = tiny_problem()
    other_table, other_y = tiny_problem(n=20, seed=1)
    other_table = np.hstack([other_table, other_table[:, :1] & ~other_table[:, 1:2]])
    assert_the_second_target_compiles_nothing(
        brl_mh.make_target(truth_table, CARDINALITIES, 2, y, brl.Priors(), 4),
        brl_mh.make_target(other_table, [*CARDINALITIES, 2], 2, other_y, OTHER_PRIORS, 4),
    )


def test_targets_whose_neighbour_relations_differ_in_size_share_one_program():
    """Fits of close data (bootstrap rows, folds) mine antecedent sets whose neighbour relations differ in
    size more than their antecedent counts do: relations of 3 and 4 pairs (each both ways: 6 and 8
    entries) keep the same shapes, and the second compiles nothing."""
    truth_table, y = tiny_problem()
    targets = []
    for pairs in ([(0, 1), (1, 2), (3, 4)], [(0, 1), (1, 2), (3, 4), (0, 2)]):
        both_ways = pairs + [(b, a) for a, b in pairs]
        neighbours = [sorted(b for a, b in both_ways if a == source) for source in range(len(ANTECEDENTS))]
        targets.append(brl_mh.make_target(truth_table, CARDINALITIES, 2, y, brl.Priors(), 4, neighbours=neighbours))
    assert [int(data.neighbour_starts[-1]) for _, data in targets] == [6, 8]
    assert jax.tree.map(jnp.shape, targets[1][1]) == jax.tree.map(jnp.shape, targets[0][1])
    assert_the_second_target_compiles_nothing(*targets)


# ---------------------------------------------------------------- the NumPyro kernel against enumeration


def run_on_tiny_problem(priors, seed, num_samples=3000, num_chains=16, steps_per_sample=4):
    truth_table, y = tiny_problem()
    mcmc = run_mcmc(
        brl_mh.BRLMetropolisHastings(steps_per_sample),
        num_warmup=100,
        num_samples=num_samples,
        num_chains=num_chains,
        seed=seed,
        model_args=(truth_table, CARDINALITIES, 2, y),
        model_kwargs={"priors": priors},
        chain_method="vectorized",
        progress_bar=False,
    )
    return mcmc.get_samples(group_by_chain=True)


@functools.cache
def tiny_posterior(priors, beta, rule_weights=None):
    """Every list of at most 5 rules on the tiny problem and its probability under rung beta's target
    r(d)^(1 - beta) (p(d) p(y | d))^beta, r's rules drawn by ``rule_weights`` (a tuple, or None: uniform)."""
    truth_table, y = tiny_problem()
    states = all_lists(5, 5)
    with enable_x64():
        return states, enumerate_posterior(exact_log_joint(truth_table, y, 2, priors, 5, beta, rule_weights), states)


def gof_against_enumeration(draws, priors, beta=1.0, rule_weights=None):
    """The exact test of draws of lists of at most 5 rules on the tiny problem against rung beta's target
    (the reference's rules drawn by ``rule_weights``, learned weights as :func:`brl_mh.with_proposal` takes)."""
    states, probs = tiny_posterior(priors, beta, None if rule_weights is None else tuple(rule_weights))
    indices = state_index({"rules": draws["rules"], "length": draws["length"]}, states)
    rules, lengths = states["rules"], states["length"]
    statistics = {f"length={m}": (lengths == m) * 1.0 for m in range(6)}
    for a in range(5):
        statistics[f"first rule {a}"] = (rules[:, 0] == a) * 1.0
        statistics[f"{a} in list"] = (rules == a).any(axis=1) * 1.0
    for rank, state in enumerate(np.argsort(probs)[::-1][:8]):
        statistics[f"top state {rank}"] = (np.arange(len(probs)) == state) * 1.0
    return exact_gof_test(indices, probs, statistics=statistics)


def test_numpyro_kernel_matches_the_enumerated_posterior():
    result = gof_against_enumeration(run_on_tiny_problem(OTHER_PRIORS, seed=11), OTHER_PRIORS)
    assert result.passed(alpha=1e-3), result


def test_negative_control_wrong_prior_fails():
    draws = run_on_tiny_problem(brl.Priors(lam=1.5), seed=11)
    result = gof_against_enumeration(draws, brl.Priors())
    assert not result.passed(alpha=1e-3), result


def test_numpyro_kernel_starts_from_given_lists_runs_under_pmap_and_pickles():
    """``init_params`` as the start; init and sample traced under ``pmap`` (what chain_method="parallel"
    does on each device); init leaves the kernel as it was (no state), and it pickles."""
    truth_table, y = tiny_problem()
    args = (truth_table, CARDINALITIES, 2, y)
    start = {"rules": jnp.array([3, 0, -1, -1, -1]), "length": jnp.array(2)}
    kernel = brl_mh.BRLMetropolisHastings(steps_per_sample=2)
    assert kernel.model is brl.collapsed_model
    before = pickle.dumps(kernel)
    state = jax.pmap(lambda key: kernel.init(key, 0, start, args, {}))(jax.random.split(jax.random.PRNGKey(0), 1))
    np.testing.assert_array_equal(state.z["rules"][0], start["rules"])
    exact = float(exact_log_joint(truth_table, y, 2, brl.Priors(), 5)(start))
    assert float(state.potential_energy[0]) == pytest.approx(-exact, rel=1e-5)
    state = jax.pmap(lambda s: kernel.sample(s, args, {}))(state)
    assert state.z["rules"].shape == (1, 5) and np.isfinite(np.asarray(state.potential_energy)).all()
    assert pickle.dumps(kernel) == before
    (static, data), (static_again, data_again) = kernel.target(args, {}), pickle.loads(before).target(args, {})
    assert static_again == static
    jax.tree.map(np.testing.assert_array_equal, data_again, data)


# ---------------------------------------------------------------- simulation-based calibration


def test_simulation_based_calibration_on_lists_drawn_from_the_model():
    truth_table, _ = tiny_problem(n=30, seed=4)
    capacity = 5
    priors = brl.Priors(lam=2.0)
    num_warmup, num_draws, thin = 100, 60, 10
    static, template = brl_mh.make_target(truth_table, CARDINALITIES, 2, np.zeros(30, int), priors, capacity, steps_per_call=thin)

    def fit(rng_key, data):
        target = template._replace(label_bits=brl_mh.pack_labels(data["y"], 2, static.n_words))
        key_init, key_chain = jax.random.split(rng_key)
        state = jax.tree.map(lambda x: x[None], brl_mh.init(static, target, key_init))

        def call(state, key):
            state, _ = brl_mh.step(static, target, state, key[None], jnp.ones(1))
            return state, (state.rules[0], state.length[0])

        _, (rules, lengths) = jax.lax.scan(call, state, jax.random.split(key_chain, num_warmup // thin + num_draws))
        return list_sites(rules[num_warmup // thin :], lengths[num_warmup // thin :])

    def pairs(v):
        return sum((jnp.asarray(CARDINALITIES)[v[f"antecedent_{j}"]] == 2) & (j < v["length"]) for j in range(capacity))

    result = list_sbc(jax.random.key(0), fit, truth_table, priors, capacity, {"pairs": pairs})
    assert result.passed(alpha=1e-3), result


def list_sites(rules, lengths):
    """Sampled lists (draws, capacity) and lengths as brl.model's sites ``length`` and ``antecedent_j``."""
    draws = {"length": lengths}
    for j in range(rules.shape[1]):
        draws[f"antecedent_{j}"] = jnp.maximum(rules[:, j], 0)
    return draws


def list_sbc(key, fit, truth_table, priors, capacity, extra_statistics=None):
    """SBC of a list sampler ``fit(rng_key, data) -> list_sites(...)`` on ``brl.model`` over 300 simulated
    label sets, on the list length, ``extra_statistics``, the uses of antecedents 0 and 3 and the first rule."""

    def count_of(antecedent):
        return lambda v: sum((v[f"antecedent_{j}"] == antecedent) & (j < v["length"]) for j in range(capacity))

    statistics = {"length": lambda v: v["length"], **(extra_statistics or {}), "uses (0,)": count_of(0),
                  "uses (0,1)": count_of(3)}
    statistics["first rule"] = lambda v: jnp.where(v["length"] > 0, v["antecedent_0"], -1)
    return simulation_based_calibration(
        key,
        brl.model,
        fit,
        num_simulations=300,
        data_sites=["y"],
        model_args=(truth_table, CARDINALITIES, 2),
        model_kwargs={"priors": priors, "max_length": capacity},
        statistics=statistics,
    )
