"""diagnostics.discrete_loo against brute-force leave-one-out refits: for every sample n, the BRL posterior
enumerated over all 326 lists of the tiny problem without n, and its predictive of y_n. The exact method over
every list must match to float32 precision, a fit's draws within their Monte Carlo error; the in-sample
predictive (y_n counted twice) must not match."""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import enable_x64
from test_brl_sampler import ANTECEDENTS, CARDINALITIES, OTHER_PRIORS, all_lists, tiny_problem

from interpretable_zoo import fit_brl
from interpretable_zoo.diagnostics import discrete_loo, enumerate_posterior
from interpretable_zoo.diagnostics.loo import LOG_JOINT_ATTR, STATE_ATTR
from interpretable_zoo.models import brl

CAPACITY = len(ANTECEDENTS)
N_CLASSES = 2


def log_joint_fn(truth_table, y):
    """log p(d) + log p(y | d) from the model file's formulas, in float64 under enable_x64."""
    alpha = jnp.asarray(OTHER_PRIORS.alpha_vector(N_CLASSES))

    def log_joint(state):
        counts = brl.capture_counts(truth_table, y, N_CLASSES, state["rules"], state["length"])
        return (brl.log_prior(state["rules"], state["length"], CARDINALITIES, OTHER_PRIORS, CAPACITY)
                + brl.log_marginal_likelihood(*counts, state["length"], alpha))

    return log_joint


def label_predictive(truth_table, y, x_row, label):
    """state -> p(label | x_row, d, y): the Dirichlet posterior predictive of the rule that captures x_row,
    given the labels ``y`` of the samples ``truth_table``."""
    alpha = jnp.asarray(OTHER_PRIORS.alpha_vector(N_CLASSES))

    def predictive(state):
        rule_counts, default_counts = brl.capture_counts(truth_table, y, N_CLASSES, state["rules"], state["length"])
        counts = jnp.concatenate([rule_counts, default_counts[None]]) + alpha
        rule = brl.capture_index(x_row[None], state["rules"], state["length"])[0]
        return counts[rule, label] / counts[rule].sum()

    return predictive


def predictive_by_refits(truth_table, y, leave_out=True) -> np.ndarray:
    """log p(y_n | x_n, y_-n) for every n, each from the posterior enumerated over every list with sample n
    left out; with ``leave_out`` False, the in-sample log p(y_n | x_n, y) instead."""
    lists = all_lists(len(ANTECEDENTS), CAPACITY)
    out = []
    with enable_x64():
        for n in range(len(y)):
            keep = np.arange(len(y)) != n if leave_out else np.ones(len(y), bool)
            probs = enumerate_posterior(log_joint_fn(truth_table[keep], y[keep]), lists)
            predictive = label_predictive(truth_table[keep], y[keep], truth_table[n], y[n])
            out.append(np.log(np.sum(probs * np.asarray(jax.vmap(predictive)(lists)))))
    return np.array(out)


@pytest.fixture(scope="module")
def problem():
    truth_table, y = tiny_problem()
    return truth_table, y, predictive_by_refits(truth_table, y), predictive_by_refits(truth_table, y, leave_out=False)


def idata_of_every_list(truth_table, y):
    """An InferenceData holding each of the 326 lists once, as a fit's would: float32 log joints and
    pointwise terms, the state declared."""
    lists = all_lists(len(ANTECEDENTS), CAPACITY)
    with enable_x64():
        log_joint = np.asarray(jax.vmap(log_joint_fn(truth_table, y))(lists))
    alpha = jnp.asarray(OTHER_PRIORS.alpha_vector(N_CLASSES), jnp.float32)
    pointwise = jax.vmap(lambda rules, length: brl.loo_log_predictive(truth_table, y, alpha, rules, length))(
        lists["rules"], lists["length"])
    idata = az.from_dict(
        posterior={"rules": lists["rules"][None], "length": lists["length"][None],
                   "log_posterior": log_joint[None].astype(np.float32)},
        log_likelihood={"y": np.asarray(pointwise, np.float32)[None]},
        dims={"y": ["observation"]},
    )
    idata.posterior.attrs.update({STATE_ATTR: ["rules", "length"], LOG_JOINT_ATTR: "log_posterior"})
    return idata


def test_exact_weights_over_every_list_equal_the_refits(problem):
    truth_table, y, by_refits, in_sample = problem
    loo = discrete_loo(idata_of_every_list(truth_table, y), method="exact")
    np.testing.assert_allclose(loo.loo_i.values, by_refits, atol=1e-4)
    assert np.all(np.abs(in_sample - by_refits) > 0.05)  # the control, y_n counted twice, is far off
    assert loo.elpd_loo == pytest.approx(by_refits.sum(), abs=1e-3)
    assert loo.n_states == 326
    assert loo.missing_mass == 1.0 and loo.warning  # each list held once, as if drawn once: flagged, not trusted


@pytest.fixture(scope="module")
def fitted(problem):
    truth_table, y, by_refits, in_sample = problem
    X = tiny_problem_features()
    assert np.array_equal(np.stack([X[:, list(a)].all(axis=1) for a in ANTECEDENTS], axis=1), truth_table)
    # enough draws that the lists never visited hold too little mass to move the exact method 0.08 nats
    result = fit_brl(X, y, antecedents=ANTECEDENTS, max_length=CAPACITY, priors=OTHER_PRIORS, num_samples=8000,
                     num_chains=4, n_temperatures=1, seed=3, progress_bar=False)
    return result, by_refits, in_sample


def tiny_problem_features(n=14, seed=0):
    """The binary X behind :func:`tiny_problem`'s truth table (its antecedents index these columns)."""
    return np.random.default_rng(seed).integers(0, 2, (n, 3)).astype(np.int32)


def unvisited_mass_bound(missing_mass, n_samples):
    """How far, in nats, states of posterior mass ``missing_mass`` left out can move log p(y_n | y_-n): by
    at most log(1 + m / (1 - m) * max r / min r), r = 1 / p(y_n | d, y_-n) between 1 and
    (sum alpha + n - 1) / min alpha."""
    alpha = OTHER_PRIORS.alpha_vector(N_CLASSES)
    return np.log1p(missing_mass / (1 - missing_mass) * (alpha.sum() + n_samples - 1) / alpha.min())


def test_a_fit_s_draws_match_the_refits_within_their_monte_carlo_error(fitted):
    """The default method within 4 Monte Carlo standard errors of the refits, the exact method within the
    bound of the mass it left unvisited; the in-sample predictive (the control) within neither."""
    result, by_refits, in_sample = fitted
    loo = discrete_loo(result)
    assert 0 < loo.mcse_elpd_loo < 0.5  # the draws do carry Monte Carlo error, and 32,000 of them keep it small
    for truth, matches in ((by_refits, True), (in_sample, False)):
        within = np.abs(loo.loo_i.values - truth) <= 4 * loo.mcse_loo_i.values + 1e-4
        assert within.all() if matches else not within.any(), (loo.loo_i.values - truth, loo.mcse_loo_i.values)
        assert (abs(loo.elpd_loo - truth.sum()) <= 4 * loo.mcse_elpd_loo + 1e-3) == matches
    exact = discrete_loo(result, method="exact")
    assert not exact.warning and exact.n_states > 10  # a spread posterior, so the weights matter
    bound = unvisited_mass_bound(exact.missing_mass, len(by_refits))
    assert bound < 0.08  # the control lies 0.089 nats or more from the refits
    assert np.all(np.abs(exact.loo_i.values - by_refits) <= bound + 1e-4)
    assert not np.any(np.abs(exact.loo_i.values - in_sample) <= bound + 1e-4)


def test_az_compare_takes_the_result_and_labels_the_observations(fitted):
    result, _, _ = fitted
    loo = discrete_loo(result)
    assert list(loo.loo_i.dims) == ["observation"] and loo.loo_i.sizes["observation"] == 14
    assert "pareto_k" not in loo and np.isfinite(loo.se)
    table = az.compare({"discrete": loo, "again": discrete_loo(result)})
    assert table["elpd_diff"].max() == 0.0 and "warning" in table


def test_a_posterior_without_a_declared_discrete_state_is_refused():
    idata = az.from_dict(posterior={"mu": np.zeros((2, 10))}, log_likelihood={"y": np.zeros((2, 10, 3))})
    with pytest.raises(ValueError, match="declares no discrete state"):
        discrete_loo(idata)
    with pytest.raises(ValueError, match="method"):
        discrete_loo(idata, method="psis")
