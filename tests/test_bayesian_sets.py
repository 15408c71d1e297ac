"""Bayesian Sets: exact scores against the NumPyro model, explanations, the set-size rule, bad input."""

import jax
import jax.numpy as jnp
import json

import numpy as np
import pytest
import scipy.sparse
from jax import enable_x64
from numpyro.handlers import seed as seed_handler
from numpyro.handlers import substitute, trace
from scipy.special import expit, logsumexp, roots_sh_jacobi

from interpretable_zoo.demos.bayesian_sets import cli_demo
from interpretable_zoo.inference.bayesian_sets import BayesianSets, estimate_membership_rate
from interpretable_zoo.models.bayesian_sets import Priors, beta_hyperparameters, informative_features, log_marginal, model

N_ITEMS, N_FEATURES = 14, 7
QUADRATURE_NODES = 12  # Gauss-Jacobi with K nodes integrates polynomials of degree 2K - 1 exactly
TOLERANCE = dict(rtol=1e-9, atol=1e-9)  # relative, and absolute in log units for scores near zero


def random_binary(seed: int, n_items: int = N_ITEMS, n_features: int = N_FEATURES) -> np.ndarray:
    """Random 0/1 data with every feature mean strictly between 0 and 1."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n_items, n_features)) < rng.uniform(0.1, 0.7, n_features)).astype(np.uint8)
    X[0], X[1] = 1, 0
    return X


def hyperparameters(priors: Priors, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    alpha, beta = beta_hyperparameters(priors, X.mean(axis=0))
    assert informative_features(alpha, beta, X.mean(axis=0)).all()
    return alpha, beta


def _per_feature_log_density(theta, rows, row_mask, alpha, beta):
    """log p(theta_j) + sum_i log p(x_ij | theta_j) per feature j, read from the NumPyro program's trace.

    ``rows`` is padded to a fixed number of rows; ``row_mask`` marks the real ones.
    """
    conditioned = trace(substitute(model, data={"theta": theta})).get_trace(alpha, beta, rows.shape[0], x=rows)
    theta_site, x_site = conditioned["theta"], conditioned["x"]
    x_log_prob = x_site["fn"].log_prob(x_site["value"]) * row_mask[:, None]
    return theta_site["fn"].log_prob(theta_site["value"]) + x_log_prob.sum(0)


# over quadrature nodes (axis 1 of theta), then over sets of rows (axis 0 of rows and row_mask)
_log_density_at_nodes = jax.jit(
    jax.vmap(
        jax.vmap(_per_feature_log_density, in_axes=(1, None, None, None, None), out_axes=1),
        in_axes=(None, 0, 0, None, None),
    )
)


def model_log_marginal(row_sets: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """log p(rows) for each set of rows (shape (S, N, J)): theta integrated out of the NumPyro ``model``.

    Per feature, the program's density at theta divided by the Beta kernel theta^(alpha-1) (1-theta)^(beta-1)
    is a polynomial of degree N in theta, which Gauss-Jacobi quadrature with that weight integrates exactly.
    """
    n_sets, n_rows, n_features = row_sets.shape
    padded = np.zeros((n_sets, N_ITEMS, n_features))  # one shape for every call: one compilation
    padded[:, :n_rows] = row_sets
    row_mask = np.arange(N_ITEMS) < n_rows
    nodes, weights = map(
        np.array, zip(*(roots_sh_jacobi(QUADRATURE_NODES, a + b - 1, a) for a, b in zip(alpha, beta)))
    )  # (J, K): weight t^(a-1) (1-t)^(b-1) on [0, 1]
    with enable_x64():
        log_density = np.asarray(
            _log_density_at_nodes(
                jnp.asarray(nodes), jnp.asarray(padded), jnp.asarray(np.tile(row_mask, (n_sets, 1)), jnp.float64),
                alpha, beta,
            )
        )  # (S, J, K)
    log_polynomial = log_density - (alpha[:, None] - 1) * np.log(nodes) - (beta[:, None] - 1) * np.log1p(-nodes)
    return np.sum(logsumexp(np.log(weights) + log_polynomial, axis=-1), axis=-1)


def brute_force_log_scores(X: np.ndarray, query, alpha, beta) -> np.ndarray:
    """log p(x | D_c) - log p(x) = log p(D_c + x) - log p(D_c) - log p(x) for every item, from the program."""
    query_rows = X[list(query)]
    with_item = np.stack([np.vstack([query_rows, x]) for x in X])
    log_query = model_log_marginal(query_rows[None], alpha, beta)
    return model_log_marginal(with_item, alpha, beta) - log_query - model_log_marginal(X[:, None, :], alpha, beta)


PRIORS = {
    "default": Priors(),
    "kappa_0.7": Priors(kappa=0.7),
    "explicit": Priors(alpha=np.linspace(0.2, 3.0, N_FEATURES), beta=np.linspace(4.0, 0.5, N_FEATURES)),
}
LAYOUTS = {
    "dense": lambda X: X,
    "csr": scipy.sparse.csr_matrix,
    "csc": scipy.sparse.csc_matrix,
    "bool": lambda X: X.astype(bool),
}
QUERIES = ([3], [2, 5, 9], [0, 1, 4, 7, 13])


@pytest.mark.parametrize("prior_name", PRIORS)
def test_eq9_marginal_is_the_numpyro_program_integrated(prior_name):
    X = random_binary(1)
    alpha, beta = hyperparameters(PRIORS[prior_name], X)
    for rows in (X[:1], X[:5], X):
        expected = model_log_marginal(rows[None], alpha, beta)[0]
        np.testing.assert_allclose(log_marginal(rows.sum(0), rows.shape[0], alpha, beta), expected, rtol=1e-11)


@pytest.fixture(scope="module")
def brute_force():
    """Brute-force scores per (prior, query) on one random data set, computed once for the module."""
    X = random_binary(0)
    scores = {}
    for prior_name, priors in PRIORS.items():
        alpha, beta = hyperparameters(priors, X)
        for query in QUERIES:
            scores[prior_name, tuple(query)] = brute_force_log_scores(X, query, alpha, beta)
    return X, scores


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("prior_name", PRIORS)
def test_log_scores_equal_brute_force_from_the_model(brute_force, prior_name, layout):
    X, expected = brute_force
    bayes_sets = BayesianSets(LAYOUTS[layout](X), priors=PRIORS[prior_name])
    for query in QUERIES:
        np.testing.assert_allclose(bayes_sets.log_scores(query), expected[prior_name, tuple(query)], **TOLERANCE)
    batch = bayes_sets.log_scores([list(query) for query in QUERIES])
    assert batch.shape == (len(QUERIES), N_ITEMS)
    for row, query in zip(batch, QUERIES):
        np.testing.assert_allclose(row, expected[prior_name, tuple(query)], **TOLERANCE)


def test_brute_force_check_rejects_a_wrong_prior(brute_force):
    """Negative control: scores under kappa = 3 must fail the check against the kappa = 2 brute force."""
    X, expected = brute_force
    wrong = BayesianSets(X, priors=Priors(kappa=3.0))
    for query in QUERIES:
        with pytest.raises(AssertionError):
            np.testing.assert_allclose(wrong.log_scores(query), expected["default", tuple(query)], **TOLERANCE)


def test_kappa_shorthand_is_the_kappa_prior():
    X = random_binary(6)
    shorthand = BayesianSets(X, kappa=0.7).log_scores([1, 2])
    np.testing.assert_array_equal(shorthand, BayesianSets(X, priors=Priors(kappa=0.7)).log_scores([1, 2]))


def exact_log_scores(X, query, alpha, beta) -> np.ndarray:
    """Eq. 10 in exact rational arithmetic on the float64 alpha, beta, then one logarithm in 40-digit decimals."""
    from decimal import Decimal, localcontext
    from fractions import Fraction

    alpha, beta = [Fraction(float(a)) for a in alpha], [Fraction(float(b)) for b in beta]
    n, s = len(query), X[query].sum(axis=0)
    scores = []
    for x in X:
        ratio = Fraction(1)
        for j, (a, b) in enumerate(zip(alpha, beta)):
            a_post, b_post = a + int(s[j]), b + n - int(s[j])
            ratio *= (a_post / a if x[j] else b_post / b) * (a + b) / (a + b + n)
        with localcontext() as context:
            context.prec = 40
            scores.append(float((Decimal(ratio.numerator).ln() - Decimal(ratio.denominator).ln())))
    return np.array(scores)


@pytest.mark.parametrize("kappa", [1e-300, 1e-20, 1e-6, 2.0, 1e12])
def test_scores_stay_exact_for_tiny_and_huge_kappa(kappa):
    """log score = c + X q (eqs. 13-15) without cancellation: beta + (N - s) is not beta + N - s, which is 0
    in floating point for kappa = 1e-20, and log-ratios near 1 keep their digits for a huge kappa."""
    X = random_binary(7)
    bayes_sets = BayesianSets(X, kappa=kappa)
    for query in QUERIES:
        expected = exact_log_scores(X, query, bayes_sets.alpha, bayes_sets.beta)
        np.testing.assert_allclose(
            bayes_sets.log_scores(query), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max()
        )
        result = bayes_sets.query(query, top_k=3)
        assert np.all(np.isfinite(result.log_scores)) and 0.0 <= result.membership_rate <= 1.0


def test_score_is_c_plus_q_dot_x_and_a_batch_is_one_product():
    X = random_binary(2, 40, 12)
    bayes_sets = BayesianSets(scipy.sparse.csr_matrix(X))
    queries = [[0, 5], [7, 8, 9, 30], [39]]
    c, q = bayes_sets.score_coefficients(queries)
    assert c.shape == (3,) and q.shape == (3, 12)
    np.testing.assert_allclose(bayes_sets.log_scores(queries), c[:, None] + q @ X.T, rtol=1e-12, atol=1e-12)
    single_c, single_q = bayes_sets.score_coefficients(queries[1])
    np.testing.assert_allclose(single_q, q[1], rtol=1e-12)
    np.testing.assert_allclose(single_c, c[1], rtol=1e-12)
    from_array = bayes_sets.log_scores(np.array([[0, 5], [5, 0]]))
    np.testing.assert_allclose(from_array[0], bayes_sets.log_scores([5, 0]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(from_array[0], from_array[1], rtol=1e-12, atol=1e-12)


def full_score_top_k(bayes_sets, queries, top_k, include_query):
    """Each query's top_k from the whole (B, n_items) score matrix: best first, ties to the lower index."""
    answers = []
    for scores, query in zip(bayes_sets.log_scores(queries), queries):
        items = np.arange(bayes_sets.n_items) if include_query else np.setdiff1d(np.arange(bayes_sets.n_items), query)
        answers.append(items[np.lexsort((items, -scores[items]))][:top_k])
    return answers


def test_batched_top_k_equals_the_full_scores_in_small_blocks(monkeypatch):
    """Tie-heavy data (few features, many items), chunks of 3 queries and blocks of a few items: the batched
    top-k holds exactly the items, scores and reasons read off the full score matrix and single queries."""
    from interpretable_zoo.inference import bayesian_sets

    X = scipy.sparse.csr_matrix(random_binary(11, 400, 9))
    bayes_sets = BayesianSets(X)
    rng = np.random.default_rng(12)
    queries = [rng.choice(400, rng.integers(1, 6), replace=False) for _ in range(8)]
    monkeypatch.setattr(bayesian_sets, "BATCH_BYTES", 2 * 8 * 9 * 3)  # 3 queries per chunk, 1 item per block
    tiny_blocks = bayes_sets.query(queries, top_k=7)
    monkeypatch.setattr(bayesian_sets, "BATCH_BYTES", 1 << 16)
    for include_query in (False, True):
        batch = bayes_sets.query(queries, top_k=7, include_query=include_query, n_reasons=2)
        full = bayes_sets.log_scores(queries)
        for b, expected in enumerate(full_score_top_k(bayes_sets, queries, 7, include_query)):
            assert batch.items[b].tolist() == expected.tolist()
            assert np.array_equal(batch.log_scores[b], full[b, expected])
            single = bayes_sets.query(queries[b], top_k=7, include_query=include_query, n_reasons=2)
            assert batch.reasons(b) == single.reasons
            assert batch.names(b) == tuple(bayes_sets.item_names[i] for i in expected)
        if not include_query:
            assert np.array_equal(tiny_blocks.items, batch.items) and np.array_equal(tiny_blocks.log_scores, batch.log_scores)
    assert len(batch) == 8 and "log score" in batch.explain(0)
    short = bayes_sets.query([[0, 1], [2]], top_k=399, n_reasons=0)  # fewer candidates than top_k: padded
    assert short.items[0, -1] == -1 and np.isneginf(short.log_scores[0, -1]) and short.items[1, -1] >= 0
    assert short.reason_features.shape == (2, 399, 0)


def skewed_binary(seed: int, n_items: int = 500, n_features: int = 30) -> np.ndarray:
    """Feature means from 0.005 to 0.5 (log-uniform), a constant feature of ones and one of zeros, and a
    tenth of the items with no ones at all: long and short columns, as in text and web data."""
    rng = np.random.default_rng(seed)
    means = np.exp(rng.uniform(np.log(0.005), np.log(0.5), n_features))
    X = (rng.random((n_items, n_features)) < means).astype(np.uint8)
    X[rng.random(n_items) < 0.1] = 0
    return np.column_stack([X, np.ones(n_items, np.uint8), np.zeros(n_items, np.uint8)])


def pruned_answers_match(bayes_sets, queries) -> bool:
    """Whether the batched top k equal the full score matrix's, items and scores to the last bit, for k from
    1 to past the number of items, with and without the query's own items."""
    full = bayes_sets.log_scores(queries)
    for top_k in (1, 7, bayes_sets.n_items + 3):
        for include_query in (False, True):
            batch = bayes_sets.query(queries, top_k=top_k, include_query=include_query, n_reasons=0)
            for b, expected in enumerate(full_score_top_k(bayes_sets, queries, top_k, include_query)):
                padded = np.full(top_k, -1)
                padded[: expected.size] = expected
                scores = np.full(top_k, -np.inf)
                scores[: expected.size] = full[b, expected]
                if not (np.array_equal(batch.items[b], padded) and np.array_equal(batch.log_scores[b], scores)):
                    return False
    return True


def test_pruned_top_k_is_exact_and_scores_few_items(monkeypatch):
    """The batch's pruned walk (``inference.bayesian_sets_top_k``) on skewed data: queries of 1 to 8 items,
    one of items without ones and one holding only the constant feature, give exactly the full score matrix's
    top k; run as plain Python with its exact sums counted, it scores under half of the items. Negative
    control: bounds lowered by 5 % of their magnitudes (a negative slack) lose items of the top k."""
    from interpretable_zoo.inference import bayesian_sets_top_k as pruned

    X = skewed_binary(21)
    bayes_sets = BayesianSets(scipy.sparse.csr_matrix(X))  # its products sum as the walk does (dense X: BLAS)
    rng = np.random.default_rng(22)
    no_ones = np.flatnonzero(X.sum(axis=1) == 1)[:3]  # items with only the constant feature
    queries = [rng.choice(len(X), rng.integers(1, 9), replace=False) for _ in range(14)] + [no_ones]
    assert no_ones.size == 3
    assert pruned_answers_match(bayes_sets, queries)

    exact_sums = []

    def counted_row_sum(row_starts, row_features, weights, item):
        exact_sums.append(item)
        return sum(weights[row_features[row_starts[item] : row_starts[item + 1]]].tolist())

    compiled = bayes_sets.query(queries, top_k=7, n_reasons=0)
    monkeypatch.setattr(pruned, "_top_k_of_range", pruned._top_k_of_range.py_func)
    monkeypatch.setattr(pruned, "_row_sum", counted_row_sum)
    assert np.array_equal(bayes_sets.query(queries, top_k=7, n_reasons=0).log_scores, compiled.log_scores)
    assert 0 < len(exact_sums) < 0.5 * len(queries) * len(X)

    monkeypatch.setattr(pruned, "BOUND_SLACK", -0.05)
    assert not pruned_answers_match(bayes_sets, queries)


def test_single_query_top_k_breaks_ties_by_index():
    X = np.zeros((30, 4), dtype=np.uint8)
    X[:, 0] = 1
    X[0], X[1] = 0, 1
    bayes_sets = BayesianSets(X)
    assert bayes_sets.query([5], top_k=4).items.tolist() == [2, 3, 4, 6]  # items 2..29 tie with each other
    assert bayes_sets.query([[5], [6]], top_k=4).items.tolist() == [[2, 3, 4, 6], [2, 3, 4, 5]]


def test_constant_features_contribute_nothing_and_are_the_limit_of_proper_priors():
    """Features with mean 0 or 1 have factor 1 in every item's score (the limit alpha or beta -> 0)."""
    X = random_binary(3)
    with_constants = np.column_stack([X[:, :3], np.zeros(N_ITEMS), X[:, 3:], np.ones(N_ITEMS)]).astype(np.uint8)
    bayes_sets = BayesianSets(scipy.sparse.csr_matrix(with_constants))
    np.testing.assert_array_equal(bayes_sets.informative, [True] * 3 + [False] + [True] * 4 + [False])
    alpha, beta = hyperparameters(Priors(), X)
    _, q = bayes_sets.score_coefficients([2, 5, 9])
    assert q[3] == q[8] == 0.0
    for query in QUERIES:
        scores = bayes_sets.log_scores(query)
        np.testing.assert_allclose(scores, brute_force_log_scores(X, query, alpha, beta), **TOLERANCE)
        epsilon = 1e-10
        proper_alpha = np.insert(np.append(alpha, 2.0 - epsilon), 3, epsilon)
        proper_beta = np.insert(np.append(beta, epsilon), 3, 2.0 - epsilon)
        proper = BayesianSets(with_constants, priors=Priors(alpha=proper_alpha, beta=proper_beta))
        np.testing.assert_allclose(proper.log_scores(query), scores, rtol=0, atol=1e-8)


def test_query_ranks_explains_and_carries_names():
    X = random_binary(4, 30, 10)
    items = [f"item {i}" for i in range(30)]
    features = [f"f{j}" for j in range(10)]
    bayes_sets = BayesianSets(X, item_names=items, feature_names=features)
    query = [4, 11, 17]
    scores = bayes_sets.log_scores(query)
    c, q = bayes_sets.score_coefficients(query)

    result = bayes_sets.query(query, top_k=8, n_reasons=3)
    candidates = np.setdiff1d(np.arange(30), query)
    expected = candidates[np.lexsort((candidates, -scores[candidates]))][:8]
    np.testing.assert_array_equal(result.items, expected)
    np.testing.assert_allclose(result.log_scores, scores[expected])
    assert not result.in_query.any() and result.names == tuple(items[i] for i in expected)
    assert result.query_names == ("item 4", "item 11", "item 17") and result.constant == pytest.approx(c)
    for item, reasons in zip(result.items, result.reasons):
        own = np.flatnonzero(X[item])
        top = own[np.argsort(-q[own], kind="stable")][:3]
        assert reasons == tuple((features[j], pytest.approx(q[j])) for j in top)
    assert result.defining_features[0] == (features[int(np.argmax(q))], pytest.approx(q.max()))

    included = bayes_sets.query(["item 4", "item 11", "item 17"], top_k=30, include_query=True)
    assert sorted(included.items[included.in_query]) == query
    np.testing.assert_array_equal(included.membership[included.in_query], 1.0)
    np.testing.assert_array_equal(included.items, np.lexsort((np.arange(30), -scores)))

    completed = bayes_sets.query(query, top_k=None, include_query=True)
    members = bayes_sets.query(query, top_k=None).items
    assert set(completed.items.tolist()) == set(members.tolist()) | set(query)
    assert completed.set_size == len(members)
    fixed = BayesianSets(X, priors=Priors(membership_rate=0.2)).query(query, top_k=26)
    np.testing.assert_allclose(fixed.membership, expit(fixed.log_scores + np.log(0.2 / 0.8)), rtol=1e-12)
    assert fixed.set_size == np.count_nonzero(fixed.membership >= 0.5)

    text = result.explain()
    assert "item 4, item 11, item 17" in text and items[expected[0]] in text and "f" in text
    assert text.count("\n") == 3 + 8 - 1

    frame = result.explain_frame()
    np.testing.assert_array_equal(frame["item"], expected)
    np.testing.assert_allclose(frame["log_score"], scores[expected])
    assert [list(zip(f, w)) for f, w in zip(frame["top_features"], frame["top_weights"])] == [list(r) for r in result.reasons]
    as_dict = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert [row["name"] for row in as_dict["items"]] == list(result.names) and as_dict["set_size"] == result.set_size
    assert as_dict["items"][0]["top_features"] == [f for f, _ in result.reasons[0]]
    assert "<table" in result._repr_html_()
    assert str(result).endswith(result.explain()) and repr(result).startswith("<Bayesian Sets: query: ")
    import matplotlib

    matplotlib.use("Agg")
    from interpretable_zoo.diagnostics import plot_set_completion

    ax = plot_set_completion(result)
    np.testing.assert_allclose([bar.get_width() for bar in ax.patches], result.log_scores)
    assert [t.get_text() for t in ax.get_yticklabels()] == list(result.names)


def sample_planted_clusters(sizes, n_features, seed):
    """Items of clusters drawn from the model, each cluster with its own theta from Beta(0.4, 0.4).

    theta is drawn with numpy (JAX's Beta sampler takes seconds to compile) and the items from the program.
    """
    rng = np.random.default_rng(seed)
    alpha = beta = np.full(n_features, 0.4)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(sizes))
    blocks = []
    for key, size in zip(keys, sizes):
        cluster = substitute(seed_handler(model, key), data={"theta": rng.beta(alpha, beta)})
        items = trace(cluster).get_trace(alpha, beta, max(sizes))["x"]["value"]  # one shape, one compilation
        blocks.append(np.asarray(items[:size]))
    return np.vstack(blocks).astype(np.uint8), np.repeat(np.arange(len(sizes)), sizes)


def test_set_size_rule_recovers_planted_clusters():
    """Clusters of 8 to 128 of 248 items: the completed set from 3 query items is about the rest of the cluster."""
    sizes = (8, 16, 32, 64, 128)
    X, labels = sample_planted_clusters(sizes, n_features=80, seed=1)
    bayes_sets = BayesianSets(scipy.sparse.csr_matrix(X))
    strict = BayesianSets(X, priors=Priors(membership_rate=1e-6))
    rng = np.random.default_rng(0)
    for cluster, size in enumerate(sizes):
        query = rng.choice(np.flatnonzero(labels == cluster), 3, replace=False)
        result = bayes_sets.query(query, top_k=None)
        assert result.set_size == len(result.items) and (result.membership >= 0.5).all()
        found = np.count_nonzero(labels[result.items] == cluster)
        assert found >= 0.9 * (size - 3), (cluster, result.set_size, found)
        assert result.set_size - found <= max(1, 0.05 * result.set_size), (cluster, result.set_size, found)
        true_rate = (size - 3) / (len(labels) - 3)
        assert abs(result.membership_rate - true_rate) <= 0.01 + 0.1 * true_rate
        # a smaller prior membership rate never returns a larger set
        assert strict.query(query, top_k=None).set_size <= result.set_size


def test_membership_rate_maximises_the_marginal_likelihood():
    rng = np.random.default_rng(0)
    log_scores = np.concatenate([rng.normal(8, 3, 30), rng.normal(-6, 3, 300)])
    rate = estimate_membership_rate(log_scores)
    grid = np.linspace(1e-4, 1 - 1e-4, 20001)
    likelihood = np.logaddexp(np.log(grid)[:, None] + log_scores, np.log1p(-grid)[:, None]).sum(axis=1)
    best = grid[np.argmax(likelihood)]
    assert rate == pytest.approx(best, abs=1e-4)
    assert estimate_membership_rate(np.full(10, -0.1)) == 0.0  # no item fits better than the background
    assert estimate_membership_rate(np.log([0.4, 1.5])) == 0.0  # mean score below 1
    assert estimate_membership_rate(np.full(10, 50.0)) == 1.0


def test_same_input_gives_the_same_answer():
    X = random_binary(5, 50, 9)
    first = BayesianSets(X).query([1, 2, 3], top_k=None)
    second = BayesianSets(X).query([1, 2, 3], top_k=None)
    np.testing.assert_array_equal(first.items, second.items)
    np.testing.assert_array_equal(first.log_scores, second.log_scores)
    assert first.membership_rate == second.membership_rate


@pytest.mark.parametrize(
    "query, message",
    [
        ([], "query: is empty"),
        ([0, 14], "out of range"),
        ([-1], "out of range"),
        ([2, 3, 2], "duplicate items \\[2\\]"),
        ([1.0], "integer indices"),
        ([True], "integer indices"),
        (["nobody"], "no item named 'nobody'"),
        (["twin"], "several items are named 'twin'"),
        (3, "expected a sequence"),
        ("item", "expected a sequence"),
        ([[0, 1], []], "query: is empty"),
    ],
)
def test_bad_queries_are_rejected(query, message):
    names = [f"item {i}" for i in range(N_ITEMS - 2)] + ["twin", "twin"]
    bayes_sets = BayesianSets(random_binary(0), item_names=names)
    with pytest.raises(ValueError, match=message):
        bayes_sets.log_scores(query)
    if not (isinstance(query, list) and query and isinstance(query[0], list)):
        with pytest.raises(ValueError, match=message):
            bayes_sets.query(query)


def test_bad_data_and_settings_are_rejected():
    X = random_binary(0)
    with pytest.raises(ValueError, match="X: must be binary"):
        BayesianSets(X * 2)
    with pytest.raises(ValueError, match="X: must be binary"):
        BayesianSets(scipy.sparse.csr_matrix(X * 0.5))
    with pytest.raises(ValueError, match="X: contains NaN"):
        BayesianSets(np.where(X == 1, np.nan, 0.0))
    with pytest.raises(ValueError, match="X: expected a 2-D"):
        BayesianSets(X[0])
    with pytest.raises(ValueError, match="X: expected numbers"):
        BayesianSets(X.astype(str))
    with pytest.raises(ValueError, match="X: needs at least 2 items"):
        BayesianSets(X[:1])
    with pytest.raises(ValueError, match="item_names: has 3 names"):
        BayesianSets(X, item_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="feature_names: has 1 names"):
        BayesianSets(X, feature_names=["a"])
    with pytest.raises(ValueError, match="priors: expected"):
        BayesianSets(X, priors={"kappa": 2})
    with pytest.raises(ValueError, match="priors.alpha: has 3 entries for 7 features"):
        BayesianSets(X, priors=Priors(alpha=[1, 1, 1], beta=[1, 1, 1]))
    with pytest.raises(ValueError, match="kappa: give either"):
        BayesianSets(X, priors=Priors(), kappa=2.0)
    with pytest.raises(ValueError, match="priors.kappa"):
        BayesianSets(X, kappa=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        BayesianSets(X).query([0], top_k=0)
    with pytest.raises(ValueError, match="query: the batch of queries is empty"):
        BayesianSets(X).log_scores(np.zeros((0, 2), dtype=int))
    for kwargs, message in [
        (dict(kappa=0.0), "priors.kappa"),
        (dict(kappa=float("nan")), "priors.kappa"),
        (dict(alpha=[1.0, 2.0]), "give both"),
        (dict(alpha=[1.0, -2.0], beta=[1.0, 1.0]), "priors.alpha: every entry"),
        (dict(alpha=[1.0, 2.0], beta=[1.0]), "lengths differ"),
        (dict(alpha=[[1.0]], beta=[[1.0]]), "priors.alpha: expected a non-empty 1-D"),
        (dict(membership_rate=1.0), "priors.membership_rate"),
    ]:
        with pytest.raises(ValueError, match=message):
            Priors(**kwargs)
    with pytest.raises(ValueError, match="log_scores: no candidates"):
        estimate_membership_rate([])


def test_cli_demo_completes_a_set_of_zeros():
    text = cli_demo()
    assert "Precision at 10 (digit 0): 1.00" in text
    assert "image 0 (digit 0)" in text and "because of pixel_" in text
