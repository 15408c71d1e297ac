"""Hyperpriors sampled within the chain (inference.hyperpriors). BCM's q ~ Beta and alpha ~ Gamma, sampled
together: the discrete state against exact enumeration with q integrated out (the Beta-Bernoulli marginal) and
alpha on a grid, and each hyperparameter's draws against its exact mixture, at beta = 1, at an intermediate
beta and under a tempering ladder; BCM's lam ~ Gamma and c ~ Gamma likewise, integrated out on a 2-D grid.
BRL's lam, eta and alpha ~ Gamma likewise: the lists against enumeration with all three integrated out on
grids, at beta = 0, 0.4 and 1 and through fit_brl's ladder. Negative controls: the
hyperparameters held near their prior means. Also the programs' hyperprior sites and the refusals, and the
slice sampler's step-out under vmap."""

import collections
import dataclasses
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
import scipy.integrate
import scipy.special
import scipy.stats
from numpyro.infer import Predictive
from numpyro.infer.util import log_density

from interpretable_zoo.diagnostics.exact import enumerate_posterior, exact_gof_test, state_index
from interpretable_zoo.diagnostics.loo import discrete_loo
from interpretable_zoo.inference import bcm_gibbs, brl_mh, convergence, hyperpriors
from interpretable_zoo.inference.checkpoint import load_result, save_result
from interpretable_zoo.inference.bcm import _kernel, fit_bcm
from interpretable_zoo.inference.brl import KERNEL as BRL_KERNEL
from interpretable_zoo.inference.target_check import ModelMismatchError
from interpretable_zoo.models import bayesian_sets, bcm, brl, mgm
from tests import test_brl_moves as brl_moves
from tests.test_bcm_exact import N_CLUSTERS, OTHER_PRIORS, X_TINY, enumerated_log_terms, label_free_statistics
from tests.test_brl_sampler import ANTECEDENTS, CARDINALITIES, all_lists, exact_log_joint, tiny_problem

A, B = 2.0, 0.7  # q ~ Beta(A, B): mean 0.74, far wider than any fixed q
ALPHA_A, ALPHA_B = 2.0, 2.0  # alpha ~ Gamma(ALPHA_A, rate ALPHA_B): mean 1 (OTHER_PRIORS.alpha), sd 0.7
HYPER_PRIORS = dataclasses.replace(OTHER_PRIORS, q=dist.Beta(A, B), alpha=dist.Gamma(ALPHA_A, ALPHA_B))
CELLS = N_CLUSTERS * X_TINY.shape[1]  # S P subspace indicators
KERNEL_WITH_Z = _kernel(store_z=True)
BETAS = jnp.array([1.0] * 8 + [0.4] * 8)  # 8 chains at the posterior, 8 at an intermediate rung
THIN = 10  # the q and alpha draws thinned for the KS test
ALPHA_GRID = np.linspace(1e-9, scipy.stats.gamma.ppf(1 - 1e-12, ALPHA_A, scale=1 / ALPHA_B), 20_001)


def row_counts_of(z):
    """(states, N, S) tokens of each observation in each cluster."""
    return (z[..., None] == np.arange(N_CLUSTERS)).sum(-2)


def log_row_term(alpha, row_counts):
    """log p(z | alpha) with pi_i ~ Dirichlet(alpha / S each) integrated out (eq. (1)), written out here:
    sum_i log B(alpha / S + n_i) - log B(alpha / S); ``alpha`` (grid,), ``row_counts`` (N, S); returns (grid,)."""
    alpha = np.asarray(alpha, float)[:, None]  # against the N rows
    a = alpha / N_CLUSTERS
    per_row = (scipy.special.gammaln(a[..., None] + row_counts).sum(-1) - scipy.special.gammaln(alpha + row_counts.sum(-1))
               - N_CLUSTERS * scipy.special.gammaln(a) + scipy.special.gammaln(alpha))
    return per_row.sum(-1)


@lru_cache
def exact_with_hyperprior(beta):
    """States, their exact probabilities under p(q) p(alpha) p(omega | q) p(z | alpha) ... L^beta with q
    and alpha integrated out, k = sum omega per state, the row counts of z that alpha's conditional reads
    (signatures) and alpha's CDF given each on ALPHA_GRID (grid, signature). omega's
    Bernoulli(q0) term of the enumeration is swapped for the Beta-Bernoulli marginal B(A + k, B + SP - k) /
    B(A, B); z's term at alpha0 for I(z) = integral of p(alpha) p(z | alpha) on ALPHA_GRID, and alpha | z
    has density p(alpha) p(z | alpha) / I(z)."""
    x = np.asarray(X_TINY, np.int64)
    states, log_prior, log_likelihood = enumerated_log_terms(OTHER_PRIORS, x.tobytes(), x.shape, N_CLUSTERS)
    active = states["omega"].sum((1, 2))
    q0, alpha0 = OTHER_PRIORS.q, OTHER_PRIORS.alpha
    marginal = scipy.special.betaln(A + active, B + CELLS - active) - scipy.special.betaln(A, B)
    signatures, of_state = np.unique(row_counts_of(states["z"]), axis=0, return_inverse=True)
    density = np.exp(scipy.stats.gamma.logpdf(ALPHA_GRID, ALPHA_A, scale=1 / ALPHA_B)[:, None]
                     + np.stack([log_row_term(ALPHA_GRID, n) for n in signatures], axis=1))
    cumulative = scipy.integrate.cumulative_trapezoid(density, ALPHA_GRID, axis=0, initial=0.0)  # (grid, signature)
    row_swap = np.log(cumulative[-1]) - np.array([log_row_term([alpha0], n)[0] for n in signatures])
    log_target = (log_prior - (active * np.log(q0) + (CELLS - active) * np.log1p(-q0)) + marginal
                  + row_swap[of_state.ravel()] + beta * log_likelihood)
    probs = enumerate_posterior(lambda index: log_target[index], list(range(len(log_target))), method="loop")
    return states, probs, active, signatures, cumulative / cumulative[-1]


def statistics(states):
    """The label-free statistics of the enumeration tests plus the indicator of each count of active omega,
    whose spread a fixed q gets wrong, and of each number of observations whose tokens sit in two
    clusters, whose spread a fixed alpha gets wrong."""
    stats = label_free_statistics(states)
    active = states["omega"].sum((1, 2))
    stats.update({f"active_omega_is_{k}": (active == k).astype(float) for k in range(CELLS + 1)})
    split = (row_counts_of(states["z"]).max(-1) < X_TINY.shape[1]).sum(-1)
    stats.update({f"split_rows_is_{k}": (split == k).astype(float) for k in range(len(X_TINY) + 1)})
    return stats


def q_cdf(q, probs, active):
    """The exact marginal CDF of q: the mixture over states of Beta(A + k, B + SP - k)."""
    weights = np.bincount(active, probs, CELLS + 1)
    return sum(w * scipy.stats.beta.cdf(q, A + k, B + CELLS - k) for k, w in enumerate(weights))


def alpha_given_z_pvalue(z, alpha, signatures, conditional_cdfs, least=50):
    """KS p-value, Bonferroni-corrected over the groups, of the alpha draws grouped by the row counts of the
    z drawn with them, each group of at least ``least`` draws against alpha's exact conditional given those
    counts: the joint of alpha and z, which the marginals alone barely test (on 6 tokens p(alpha | x) is
    close to p(alpha))."""
    counts = row_counts_of(np.asarray(z)).reshape(-1, signatures[0].size)
    group = (counts[:, None, :] == signatures.reshape(len(signatures), -1)[None]).all(-1).argmax(1)
    alpha = np.asarray(alpha).ravel()
    pvalues = [scipy.stats.kstest(alpha[group == g], partial(np.interp, xp=ALPHA_GRID, fp=conditional_cdfs[:, g])).pvalue
               for g in range(len(signatures)) if (group == g).sum() >= least]
    return min(1.0, len(pvalues) * min(pvalues))


def check(draws, values, beta):
    """(GOF of the discrete draws, name -> KS p-value: q's thinned draws against its exact marginal, alpha's
    against its exact conditional given z, :func:`alpha_given_z_pvalue`) against the exact target at
    ``beta``."""
    states, probs, active, signatures, conditional_cdfs = exact_with_hyperprior(beta)
    gof = exact_gof_test(state_index(draws, states), probs, statistics=statistics(states))
    q = np.asarray(values["q"])[:, ::THIN].ravel()
    ks = {"q": scipy.stats.kstest(q, partial(q_cdf, probs=probs, active=active)).pvalue,
          "alpha": alpha_given_z_pvalue(np.asarray(draws["z"])[:, ::THIN], np.asarray(values["alpha"])[:, ::THIN],
                                        signatures, conditional_cdfs)}
    return gof, ks


@partial(jax.jit, static_argnums=(0, 1, 5, 6))
def replica_draws(kernel, static, data, key, betas, n_steps, fields):
    """``n_steps`` steps of one replica per beta from the kernel's starts; ``fields(states)`` per step."""
    key_init, key_run = jax.random.split(key)
    states = jax.vmap(lambda k: kernel.init(static, data, k))(jax.random.split(key_init, len(betas)))

    def one(states, key):
        states, _ = kernel.step(static, data, states, jax.random.split(key, len(betas)), betas)
        return states, fields(states)

    return jax.lax.scan(one, states, jax.random.split(key_run, n_steps))[1]


def bcm_fields(states):
    return states.omega, states.prototype, states.z, states.values


def chains(priors, seed=0, num_warmup=200, num_samples=800, padded_rows=None):
    """16 chains (:data:`BETAS`) of the hyperprior kernel on X_TINY (padded to ``padded_rows`` rows, z
    returned for the observations) under ``priors``; per beta group the
    params and the hyperparameters (one compiled program for every pair of hyperpriors). Each draw pairs the
    params after a step with the hyperparameters drawn from them at the start of the next: the state between
    a step's two blocks, also a draw from the target, in which the hyperparameters' update shows in their
    joint with the params (a sweep drawn after them would give z close to its conditional on any alpha)."""
    inner = bcm_gibbs.make_target(X_TINY, N_CLUSTERS, hyperpriors.at_point(priors), padded_rows=padded_rows)
    static, data = hyperpriors.target(hyperpriors.BCM, inner, priors)
    kernel = hyperpriors.with_hyperpriors(KERNEL_WITH_Z)
    omega, prototype, z, values = replica_draws(kernel, static, data, jax.random.PRNGKey(seed), BETAS,
                                                num_warmup + num_samples, bcm_fields)
    omega, prototype, z = (np.swapaxes(np.asarray(v)[num_warmup:-1], 0, 1) for v in (omega, prototype, z))
    z = z[..., : len(X_TINY), :]
    values = {name: np.swapaxes(np.asarray(v)[num_warmup + 1:], 0, 1) for name, v in values.items()}
    return [({"omega": omega[g], "prototype": prototype[g], "z": z[g]}, {name: v[g] for name, v in values.items()})
            for g in (slice(0, 8), slice(8, 16))]


# ---------------------------------------------------------------------------------------------- slice sampling


def test_a_vmapped_slice_step_out_decides_from_one_evaluation_per_end():
    """Replicas' slice updates run vmapped, where a while loop evaluates its condition in its test and again
    in its body; two compilations of one float density can differ in the last bit, and a step-out whose
    condition re-evaluated the density would spin for ever at an end on the level (seen on CPU at XLA's
    default optimisation). Here the density's answers at a point alternate, above the level at its first
    evaluation and far below at its second: a step-out that evaluated an end in its test and again in its
    body would never end (stopped after ``max_calls``); one that decides once per end ends, and every
    replica moves."""
    max_calls = 10_000
    evaluations = collections.Counter()

    def host_density(u):
        evaluations[float(u)] += 1
        if evaluations.total() > max_calls:
            raise RuntimeError("the slice update keeps evaluating one point")
        return np.float32(0.0 if evaluations[float(u)] % 2 else -100.0)

    def density(u):
        return jax.pure_callback(host_density, jax.ShapeDtypeStruct((), jnp.float32), u, vmap_method="sequential")

    starts = jnp.array([-1.0, 0.0, 2.0])
    updates = jax.jit(jax.vmap(partial(hyperpriors._slice_update, density)))
    new = np.asarray(updates(starts, jax.random.split(jax.random.PRNGKey(0), len(starts))))
    assert np.isfinite(new).all() and not np.isin(new, starts).any()


# ---------------------------------------------------------------------------------------------- BCM's lam, c

G_GAMMAS = {"lam": (2.0, 4.0), "c": (2.0, 0.4)}  # Gamma(a, rate b): lam mean 0.5 (sd 0.35), c mean 5 (sd 3.5)
G_HYPER_PRIORS = dataclasses.replace(OTHER_PRIORS, **{name: dist.Gamma(a, b) for name, (a, b) in G_GAMMAS.items()})
G_GRIDS = {name: np.linspace(1e-9, scipy.stats.gamma.ppf(1 - 1e-9, a, scale=1 / b), 301)
           for name, (a, b) in G_GAMMAS.items()}


def cell_terms(states):
    """(states, S, P) index of each cell's term of p(x | z, omega, prototypes) and the (types, 3) table of
    what the term reads: the counts of values 0 and 1 among the cell's tokens, and the value whose g carries
    the prototype's extra weight c (-1 when omega_sj = 0)."""
    x = np.asarray(X_TINY)
    z = states["z"]  # (states, N, P)
    counts = np.stack([((z == s) & (x == v)).sum(1) for s in range(N_CLUSTERS) for v in (0, 1)], 1)
    counts = counts.reshape(len(z), N_CLUSTERS, 2, -1).transpose(0, 1, 3, 2)  # (states, S, P, 2)
    copied = np.where(states["omega"] == 1, x[states["prototype"]], -1)  # (states, S, P)
    kinds, index = np.unique(np.concatenate([counts, copied[..., None]], -1).reshape(-1, 3), axis=0,
                             return_inverse=True)
    return index.reshape(copied.shape), kinds


def log_cell_term(kinds, lam, c):
    """log B(g + n) - log B(g) of each kind of cell (:func:`cell_terms`) at every (lam, c) of the grids, written
    out here: g_v = lam (1 + c [v is the copied value]) (sec. 3); returns (kinds, lam, c)."""
    lam, c = lam[None, :, None], c[None, None, :]
    g = [lam * (1.0 + c * (kinds[:, 2] == v)[:, None, None]) for v in (0, 1)]
    n = [kinds[:, v][:, None, None] for v in (0, 1)]
    gammaln = scipy.special.gammaln
    return (gammaln(g[0] + n[0]) + gammaln(g[1] + n[1]) - gammaln(g[0] + g[1] + n[0] + n[1])
            - gammaln(g[0]) - gammaln(g[1]) + gammaln(g[0] + g[1]))


def term_counts(of_row, term, shape):
    """(rows, terms) the number of times each row uses each term, from the (row, term) pairs of its uses:
    a row's sum of its terms is then one product with the table of the terms."""
    counts = np.zeros(shape)
    np.add.at(counts, (of_row, term), 1.0)
    return counts


@lru_cache
def exact_with_lam_and_c(beta):
    """States, their exact probabilities under p(lam) p(c) p(omega) p(prototypes) p(z) L(lam, c)^beta with
    lam and c integrated out on G_GRIDS, the marginal CDFs of lam and c on their grids, and each state's log
    ratio of that target to the one with lam and c at their means (unnormalised). States that read
    the same kinds of cells share their likelihood surface, so it is integrated once per such signature."""
    x = np.asarray(X_TINY, np.int64)
    states, log_prior, log_likelihood = enumerated_log_terms(OTHER_PRIORS, x.tobytes(), x.shape, N_CLUSTERS)
    index, kinds = cell_terms(states)
    signatures, of_state = np.unique(np.sort(index.reshape(len(index), -1), 1), axis=0, return_inverse=True)
    of_state = of_state.ravel()
    terms = log_cell_term(kinds, G_GRIDS["lam"], G_GRIDS["c"])
    # each signature's sum of its cells' terms, as (signatures, kinds) counts times the terms (one product)
    occurrences = term_counts(np.repeat(np.arange(len(signatures)), signatures.shape[1]), signatures.ravel(),
                              (len(signatures), len(kinds)))
    log_hyperprior = sum(scipy.stats.gamma.logpdf(G_GRIDS[name], a, scale=1 / b)[(slice(None),) + (None,) * axis]
                         for axis, (name, (a, b)) in zip((1, 0), G_GAMMAS.items()))
    top, by_c, by_lam = [], [], []
    # in blocks of signatures, so that their (signatures, lam, c) surfaces are not all held at once
    for block in np.array_split(occurrences, max(1, len(signatures) // 64)):
        log_surface = beta * (block @ terms.reshape(len(kinds), -1)).reshape(-1, *terms.shape[1:])
        top.append(log_surface.max((1, 2)))
        density = np.exp(log_surface - top[-1][:, None, None] + log_hyperprior)
        by_c.append(scipy.integrate.trapezoid(density, G_GRIDS["c"], axis=2))  # (signatures, lam)
        by_lam.append(scipy.integrate.trapezoid(density, G_GRIDS["lam"], axis=1))  # (signatures, c)
    top, by_c, by_lam = (np.concatenate(parts) for parts in (top, by_c, by_lam))
    total = scipy.integrate.trapezoid(by_c, G_GRIDS["lam"], axis=1)
    integrated = (np.log(total) + top)[of_state]
    probs = enumerate_posterior(lambda i: log_prior[i] + integrated[i], list(range(len(log_prior))), method="loop")
    weight = np.bincount(of_state, probs, len(signatures)) / total
    cdfs = {name: scipy.integrate.cumulative_trapezoid(weight @ marginal, G_GRIDS[name], initial=0.0)
            for name, marginal in (("lam", by_c), ("c", by_lam))}
    return states, probs, cdfs, integrated - beta * log_likelihood


def g_statistics(states, log_ratio):
    """The label-free statistics plus the log ratio of each state's likelihood with lam and c integrated out
    to its likelihood at their prior means (the statistic that tells the two targets apart best)."""
    return {**label_free_statistics(states), "log_ratio_to_fixed_lam_and_c": log_ratio}


def check_lam_and_c(draws, values, beta):
    """(GOF of the discrete draws, name -> KS p-value of lam's and c's thinned draws against their exact
    marginals) against the exact target at ``beta``."""
    states, probs, cdfs, log_ratio = exact_with_lam_and_c(beta)
    gof = exact_gof_test(state_index(draws, states), probs, statistics=g_statistics(states, log_ratio))
    ks = {name: scipy.stats.kstest(np.asarray(values[name])[:, ::THIN].ravel(),
                                   partial(np.interp, xp=G_GRIDS[name], fp=cdfs[name] / cdfs[name][-1])).pvalue
          for name in G_GAMMAS}
    return gof, ks


BCM_CASES = {
    "q_and_alpha": (HYPER_PRIORS, dataclasses.replace(OTHER_PRIORS, q=dist.Beta(A * 1e5, B * 1e5),
                                                      alpha=dist.Gamma(ALPHA_A * 1e4, ALPHA_B * 1e4)), check),
    "lam_and_c": (G_HYPER_PRIORS, dataclasses.replace(OTHER_PRIORS, **{name: dist.Gamma(a * 1e4, b * 1e4)
                                                                       for name, (a, b) in G_GAMMAS.items()}),
                  check_lam_and_c),
}
"""Pairs of sampled hyperparameters: (their hyperpriors, the negative control's hyperpriors concentrated at
those means, the check against the exact target)."""


@pytest.mark.parametrize("case", BCM_CASES)
def test_sampled_bcm_hyperparameters_match_the_exact_posterior_at_each_beta(case):
    priors, _, check_against_exact = BCM_CASES[case]
    for (draws, values), beta in zip(chains(priors), (1.0, 0.4)):
        gof, ks = check_against_exact(draws, values, beta)
        assert gof.passed(alpha=1e-3), (beta, gof)
        assert min(ks.values()) > 1e-3, (beta, ks)


@pytest.mark.parametrize("case", BCM_CASES)
def test_sampled_bcm_hyperparameters_on_padded_observations_match_the_exact_posterior(case):
    """The same on X_TINY padded with 2 inert rows: the hyperparameters' updates (alpha's reads the row
    term, lam's and c's the cell counts) see the observations alone."""
    priors, _, check_against_exact = BCM_CASES[case]
    for (draws, values), beta in zip(chains(priors, padded_rows=len(X_TINY) + 2), (1.0, 0.4)):
        gof, ks = check_against_exact(draws, values, beta)
        assert gof.passed(alpha=1e-3), (beta, gof)
        assert min(ks.values()) > 1e-3, (beta, ks)


def stale_log_count_table(static, data, values):
    """``hyperpriors.BCM``'s tables at the hyperparameter values, but for the log table of the tempered
    z sweep's powers, left at the values the target was made with (a negative control)."""
    return hyperpriors.BCM.with_values(static, data, values)._replace(log_count_table=data.inner.log_count_table)


@pytest.mark.parametrize("rebuilt", [True, False], ids=["table_rebuilt", "table_at_the_means_must_differ"])
def test_the_tempered_sweeps_power_table_follows_sampled_lam_and_c(rebuilt):
    """With lam and c sampled, the tempered z sweep's table of powers is built from the log table that g,
    through them, rebuilds at every scan: over 30 steps its replicas draw what the powers computed from g
    draw (which never read the log table). Negative control: that log table left at lam's and c's prior
    means."""
    priors = BCM_CASES["lam_and_c"][0]
    table_model = hyperpriors.BCM if rebuilt else hyperpriors.BCM._replace(with_values=stale_log_count_table)
    draws = []
    for power_table, model in ((True, table_model), (False, hyperpriors.BCM)):
        inner = bcm_gibbs.make_target(X_TINY, N_CLUSTERS, hyperpriors.at_point(priors), power_table=power_table)
        static, data = hyperpriors.target(model, inner, priors)
        draws.append(replica_draws(hyperpriors.with_hyperpriors(KERNEL_WITH_Z), static, data, jax.random.PRNGKey(6),
                                   jnp.full(16, 0.4), 30, bcm_fields))
    (_, _, z_table, values), (_, _, z_computed, _) = jax.tree.map(np.asarray, draws)
    assert np.ptp(values["lam"]) > 0.5 and np.ptp(values["c"]) > 5  # lam and c do move
    assert np.any(z_table[1:] != z_table[:-1])  # z does move
    assert np.array_equal(z_table, z_computed) == rebuilt


@pytest.mark.parametrize("case", BCM_CASES)
def test_bcm_hyperparameters_held_at_their_prior_means_fail_the_same_check(case):
    """Negative control: hyperpriors concentrated at the hyperpriors' means (the hyperparameters nearly fixed)."""
    _, concentrated, check_against_exact = BCM_CASES[case]
    for (draws, values), beta in zip(chains(concentrated), (1.0, 0.4)):
        gof, ks = check_against_exact(draws, values, beta)
        assert not gof.passed(alpha=1e-3), (beta, gof)
        assert max(ks.values()) < 1e-3, (beta, ks)


@pytest.mark.parametrize("case", BCM_CASES)
def test_tempering_ladder_with_the_hyperpriors_matches_the_exact_posterior(case):
    """The engine's swaps between rungs whose replicas carry their own hyperparameters (log_prior includes
    their log hyperprior; with lam and c, the log likelihood is on the tables of the replica's own values),
    and the recorded pointwise log likelihood computed on those tables."""
    priors, _, check_against_exact = BCM_CASES[case]
    inner = bcm_gibbs.make_target(X_TINY, N_CLUSTERS, hyperpriors.at_point(priors))
    static, data = hyperpriors.target(hyperpriors.BCM, inner, priors)
    run = convergence.sample(hyperpriors.with_hyperpriors(KERNEL_WITH_Z), static, data, num_chains=8, seed=4,
                             n_temperatures=3, num_samples=800, tuning_rounds=1, scans_per_chunk=200,
                             progress_bar=False)
    assert run.n_temperatures == 3 and 0 < run.swap_accept.mean() < 1
    names = sorted(hyperpriors.hyperpriors_of(priors))
    gof, ks = check_against_exact({name: run.records[name] for name in ("omega", "prototype", "z")},
                                  {name: run.summaries[name] for name in names}, 1.0)
    assert gof.passed(alpha=1e-3), gof
    assert min(ks.values()) > 1e-3, ks
    draw = {name: run.records[name][0, -1] for name in ("omega", "prototype", "z")}
    at_draw = hyperpriors.BCM.with_values(static.inner, data, {name: jnp.float32(run.summaries[name][0, -1])
                                                               for name in names})
    state = jax.tree.map(lambda v: v[None], bcm_gibbs.state_from_params(static.inner, at_draw, **draw))
    expected = bcm_gibbs.pointwise_log_likelihood(static.inner, at_draw, state)[0]
    assert np.allclose(run.records["log_likelihood"][0, -1], expected, atol=1e-5)
    if case == "lam_and_c":  # the pointwise terms read g, which lam and c set
        at_means = bcm_gibbs.pointwise_log_likelihood(static.inner, inner[1], state)[0]
        assert not np.allclose(run.records["log_likelihood"][0, -1], at_means, atol=1e-3)


def test_the_likelihood_that_lam_and_c_read_is_the_collapsed_likelihood():
    """lam's and c's updates read p(x | z, omega, prototypes) from histograms of the cells' counts where that
    is cheaper: equal to the model file's sum over cells of log B(g + n) - log B(g), on features with 2 and 3
    values, at several (lam, c)."""
    rng = np.random.default_rng(0)
    n_values = np.array([3, 2] * 10)
    x = rng.integers(0, n_values, (4, 20))
    priors = dataclasses.replace(G_HYPER_PRIORS, alpha=1.0, q=0.5)
    inner = bcm_gibbs.make_target(x, 3, hyperpriors.at_point(priors), n_values)
    static, data = hyperpriors.target(hyperpriors.BCM, inner, priors)
    for seed in range(3):
        state = bcm_gibbs.init(static.inner, inner[1], jax.random.PRNGKey(seed))
        log_likelihood = jax.jit(lambda values, state=state: hyperpriors._bcm_log_likelihood_at(
            static.inner, data, state)(values))
        for lam, c in ((0.3, 5.0), (2.0, 0.5), (1.0, 50.0)):
            at = dataclasses.replace(priors, lam=lam, c=c)
            concentration = bcm.concentration_table(x[np.asarray(state.prototype)], state.omega, n_values, at)
            cells = bcm_gibbs.cells_by_cluster(static.inner, state.cell_counts)
            expected = bcm.log_polya(cells, concentration, bcm.value_mask(n_values)).sum()
            got = log_likelihood({"lam": jnp.float32(lam), "c": jnp.float32(c)})
            assert np.isclose(got, expected, rtol=1e-5, atol=1e-3), (seed, lam, c, got, expected)


def test_programs_draw_the_hyperprior_sites():
    """``Predictive`` draws q and alpha, then the rest; the collapsed density at a (q, alpha) equals the
    fixed-value density plus log Beta(q) + log Gamma(alpha)."""
    predictive = Predictive(bcm.model, num_samples=4)
    draws = jax.jit(lambda key: predictive(key, 3, np.array([2, 2]), 2, priors=HYPER_PRIORS))(jax.random.PRNGKey(0))
    assert draws["q"].shape == (4,) and np.all((draws["q"] > 0) & (draws["q"] < 1)) and draws["x"].shape == (4, 3, 2)
    assert draws["alpha"].shape == (4,) and np.all(draws["alpha"] > 0)
    params = {"q": jnp.float32(0.3), "alpha": jnp.float32(0.6), "omega": jnp.array([[1, 0], [1, 1]]),
              "prototype": jnp.array([0, 2]), "z": jnp.array([[0, 1], [1, 1], [0, 0]])}
    at_values = dataclasses.replace(OTHER_PRIORS, q=0.3, alpha=0.6)
    with_hyperprior, fixed = jax.jit(lambda params: (
        log_density(bcm.collapsed_model, (X_TINY, 2), {"priors": HYPER_PRIORS}, params)[0],
        log_density(bcm.collapsed_model, (X_TINY, 2), {"priors": at_values},
                    {k: v for k, v in params.items() if k not in ("q", "alpha")})[0]))(params)
    expected = dist.Beta(A, B).log_prob(0.3) + dist.Gamma(ALPHA_A, ALPHA_B).log_prob(0.6)
    assert np.isclose(with_hyperprior - fixed, expected, atol=1e-4)


RUN = {"num_samples": 4, "num_warmup": 4, "num_chains": 2, "n_temperatures": 1, "progress_bar": False}


def test_an_unsupported_hyperprior_is_refused_by_name():
    with pytest.raises(ValueError, match=r"priors\.lam: .* LogNormal hyperprior on lam; it samples q ~ Beta, alpha ~ "
                                         r"Gamma, lam ~ Gamma, c ~ Gamma, written models\.bcm\.Priors\(q=numpyro\."
                                         r"distributions\.Beta\(a, b\), alpha=numpyro\.distributions\.Gamma\(a, b\), "
                                         r"lam=numpyro\.distributions\.Gamma\(a, b\), c=numpyro"):
        fit_bcm(X_TINY, N_CLUSTERS, priors=bcm.Priors(lam=dist.LogNormal(0.0, 1.0)), **RUN)


def _lam_drawn_in_the_program(priors):
    return dataclasses.replace(priors, lam=numpyro.sample("lam", dist.Gamma(2.0, 2.0)))


def _q_drawn_in_the_program(priors, n_obs, n_features, n_clusters):
    q = numpyro.sample("q", dist.Beta(2.0, 2.0))
    omega = numpyro.sample("omega", dist.Bernoulli(probs=q).expand([n_clusters, n_features]).to_event(2))
    prototype = numpyro.sample("prototype", bcm.prototype_distribution(priors, n_obs, n_clusters).to_event(1))
    return omega, prototype


@pytest.mark.parametrize("name, edit, site", [
    ("sample_hyperparameters", _lam_drawn_in_the_program, "lam"),
    ("subspace_and_prototype_prior", _q_drawn_in_the_program, "q"),
], ids=["replace_with_a_traced_lam", "q_site_in_the_program"])
def test_a_hyperparameter_sampled_in_the_program_is_refused_with_how_to_write_it(monkeypatch, name, edit, site):
    """A traced value reaches Priors without a tracer error; the site is refused with the way to write it."""
    monkeypatch.setattr(bcm, name, edit)
    with pytest.raises(ModelMismatchError, match=rf"latent site '{site}' .* A hyperprior on {site} is written as a "
                                                 r"Priors field .*Priors\(q=numpyro\.distributions\.Beta"):
        fit_bcm(X_TINY, N_CLUSTERS, **RUN)


def test_brl_refuses_an_unsupported_hyperprior_by_name(monkeypatch):
    """BRL samples lam, eta and alpha ~ Gamma only: another family on any, a hyperprior on a per-class alpha, or
    a traced lam drawn in its program (no tracer error from Priors) is refused naming the field and how to write
    one."""
    from test_prior_edits import BRL_RUN, X, Y

    from interpretable_zoo.inference.brl import fit_brl

    written = (r"models\.brl\.Priors\(lam=numpyro\.distributions\.Gamma\(a, b\), "
               r"eta=numpyro\.distributions\.Gamma\(a, b\), alpha=numpyro\.distributions\.Gamma\(a, b\)\)")
    for name in ("lam", "eta", "alpha"):
        with pytest.raises(ValueError, match=rf"^priors\.{name}: .* LogNormal hyperprior on {name}; it samples "
                                             rf"lam ~ Gamma, eta ~ Gamma, alpha ~ Gamma, written {written}"):
            fit_brl(X, Y, priors=brl.Priors(**{name: dist.LogNormal(0.0, 1.0)}), **BRL_RUN)
    for name in ("lam", "alpha"):
        with pytest.raises(ValueError, match=rf"^priors\.{name}: a hyperprior must be a scalar distribution"):
            brl.Priors(**{name: dist.Gamma(jnp.ones(2), 1.0)})
    with pytest.raises(ValueError, match=r"^priors\.alpha: a hyperprior is one scalar distribution for every class"):
        brl.Priors(alpha=(dist.Gamma(1.0, 1.0), dist.Gamma(1.0, 1.0)))

    def lam_drawn_in_the_program(priors):
        return dataclasses.replace(priors, lam=numpyro.sample("lam", dist.Gamma(6.0, 2.0)))

    monkeypatch.setattr(brl, "sample_hyperparameters", lam_drawn_in_the_program)
    with pytest.raises(ModelMismatchError, match=rf"latent site 'lam' .* A hyperprior on lam is written as a Priors "
                                                 rf"field .*{written}"):
        fit_brl(X, Y, **BRL_RUN)


# ---------------------------------------------------------------------------------------------- BRL's lam, eta

GAMMAS = {"lam": (3.0, 1.0), "eta": (2.0, 1.0), "alpha": (2.0, 2.0)}  # h ~ Gamma(a, rate b): lam mean 3 (sd 1.7),
# eta mean 2 (sd 1.4), alpha mean 1 (sd 0.7)
BRL_HYPER_PRIORS = brl.Priors(**{name: dist.Gamma(a, b) for name, (a, b) in GAMMAS.items()})
BRL_BETAS = np.repeat([0.0, 0.4, 1.0], 8)  # 8 replicas at the reference, an intermediate rung, the posterior
GRIDS = {name: np.linspace(1e-9, scipy.stats.gamma.ppf(1 - 1e-12, a, scale=1 / b), 20_001)
         for name, (a, b) in GAMMAS.items()}
BRL_THIN = 20  # the hyperparameter draws thinned for the KS test (lag-20 autocorrelation below 0.05)


def log_hyperparameter_factors(states, grids):
    """name -> (grid, list) log of the factor of p(d | lam, eta) p(y | d, alpha) that reads the hyperparameter
    (Letham eqs. 2-3 and 5, written out here): lam's truncated Poisson of the length; eta's Poisson of each
    rule's cardinality renormalised over the cardinalities with unused antecedents before it; alpha's
    Dirichlet-multinomial of the labels each rule captures, theta_j ~ Dirichlet(alpha, alpha)."""
    m = np.arange(brl_moves.CAPACITY + 1)
    lam = grids["lam"][:, None]
    length = m * np.log(lam) - scipy.special.gammaln(m + 1)
    length = length - scipy.special.logsumexp(length, axis=1, keepdims=True)
    c = np.arange(1, CARDINALITIES.max() + 1)
    weights = c * np.log(grids["eta"][:, None]) - scipy.special.gammaln(c + 1)  # (grid, C)
    counts = np.bincount(CARDINALITIES, minlength=c.size + 1)[1:]
    truth_table, y = tiny_problem()
    # A rule's eta term depends on its cardinality and the cardinalities still available before it, its alpha
    # term on the labels it captures: each distinct term is computed once, and a list sums its rules' terms.
    eta_terms, label_terms = {}, {}  # term -> its column
    eta_uses, label_uses = [], []  # (column, list)
    for index, (rules, length_d) in enumerate(zip(states["rules"], states["length"])):
        used = np.zeros_like(counts)
        for rule in rules[:length_d]:
            term = (CARDINALITIES[rule], tuple(used < counts))
            eta_uses.append((eta_terms.setdefault(term, len(eta_terms)), index))
            used[term[0] - 1] += 1
        uncaught = np.ones(len(y), bool)
        for rule in [*rules[:length_d], None]:  # the default rule last
            caught = uncaught if rule is None else uncaught & truth_table[:, rule]
            term = tuple(np.bincount(y[caught], minlength=2))
            label_uses.append((label_terms.setdefault(term, len(label_terms)), index))
            uncaught &= ~caught
    eta_table = np.stack([weights[:, card - 1] - scipy.special.logsumexp(weights[:, np.array(available)], axis=1)
                          for card, available in eta_terms], 1)
    gammaln, alpha = scipy.special.gammaln, grids["alpha"][:, None]
    n = np.array(list(label_terms), float)  # (terms, 2)
    label_table = (gammaln(alpha + n[:, 0]) + gammaln(alpha + n[:, 1]) - 2 * gammaln(alpha)
                   - gammaln(2 * alpha + n.sum(1)) + gammaln(2 * alpha))

    def summed_by_list(table, uses):
        column, of_list = np.array(uses).T
        return (term_counts(of_list, column, (len(states["length"]), table.shape[1])) @ table.T).T  # (grid, list)

    cardinality, labels = summed_by_list(eta_table, eta_uses), summed_by_list(label_table, label_uses)
    return {"lam": length[:, states["length"]], "eta": cardinality, "alpha": labels}


@lru_cache
def exact_with_gamma_hyperpriors(beta):
    """(lists, their exact probabilities, name -> CDF on GRIDS[name]) at rung beta of the path
    p(lam) p(eta) p(alpha) r(d)^(1 - beta) (p(d | lam, eta) p(y | d, alpha))^beta with lam, eta and alpha
    integrated out: each enters one factor f_h(d, h) of the list prior or the likelihood, so a list's term beta log f_h(d, h0) at the fixed point h0 is
    swapped for log I_h(d), I_h(d) = integral of p(h) f_h(d, h)^beta dh, and h | d has density
    p(h) f_h(d, h)^beta / I_h(d)."""
    states = all_lists(len(CARDINALITIES), brl_moves.CAPACITY)
    point = {name: a / b for name, (a, b) in GAMMAS.items()}
    factors = log_hyperparameter_factors(states, GRIDS)
    at_point = log_hyperparameter_factors(states, {name: np.array([value]) for name, value in point.items()})
    correction, cumulative = np.zeros(len(states["length"])), {}
    for name, (a, b) in GAMMAS.items():
        density = np.exp(scipy.stats.gamma.logpdf(GRIDS[name], a, scale=1 / b)[:, None] + beta * factors[name])
        cumulative[name] = scipy.integrate.cumulative_trapezoid(density, GRIDS[name], axis=0, initial=0.0)
        correction += np.log(cumulative[name][-1]) - beta * at_point[name][0]
    truth_table, y = tiny_problem()
    log_joint = exact_log_joint(truth_table, y, 2, brl.Priors(**point), brl_moves.CAPACITY, beta)
    correction = jnp.asarray(correction)
    with jax.enable_x64():
        probs = enumerate_posterior(lambda state: log_joint(state) + correction[state["index"]],
                                    {**states, "index": np.arange(len(states["length"]))})
    return states, probs, {name: (cdf / cdf[-1]) @ probs for name, cdf in cumulative.items()}


def check_hyperparameters(draws, values, beta):
    """(GOF of the lists, name -> KS p-value of the thinned draws of each hyperparameter) against the exact
    rung ``beta``."""
    states, probs, cdfs = exact_with_gamma_hyperpriors(beta)
    lists, lengths = states["rules"], states["length"]
    statistics = {f"length={m}": (lengths == m) * 1.0 for m in range(brl_moves.CAPACITY + 1)}
    for a in range(len(CARDINALITIES)):
        statistics[f"first rule {a}"] = (lists[:, 0] == a) * 1.0
        statistics[f"{a} in list"] = (lists == a).any(axis=1) * 1.0
    gof = exact_gof_test(state_index(draws, states), probs, statistics=statistics)
    ks = {name: scipy.stats.kstest(np.asarray(values[name])[:, ::BRL_THIN].ravel(),
                                   partial(np.interp, xp=GRIDS[name], fp=cdfs[name])).pvalue for name in GAMMAS}
    return gof, ks


def brl_fields(states):
    return states.rules, states.length, states.values


def hyperparameter_chains(priors, n_warmup=50, n_calls=3000):
    """:data:`BRL_BETAS` replicas of the hyperprior kernel on test_brl_moves' tiny problem (per-chain
    proposal tables, one row per beta group); per beta group the lists and the hyperparameters."""
    static, data = hyperpriors.target(hyperpriors.BRL, brl_moves.target(hyperpriors.at_point(priors)), priors)
    data = data._replace(inner=brl_mh.per_chain(data.inner, 3))
    rules, length, values = replica_draws(hyperpriors.with_hyperpriors(BRL_KERNEL), static, data, jax.random.PRNGKey(3),
                                          jnp.asarray(BRL_BETAS), n_warmup + n_calls, brl_fields)
    rules, length = (np.swapaxes(np.asarray(v)[n_warmup:], 0, 1) for v in (rules, length))
    values = {name: np.swapaxes(np.asarray(v)[n_warmup:], 0, 1) for name, v in values.items()}
    return [({"rules": rules[group], "length": length[group]}, {name: v[group] for name, v in values.items()})
            for group in (slice(0, 8), slice(8, 16), slice(16, 24))]


def test_sampled_lam_and_eta_match_the_exact_brl_posterior_at_each_beta():
    """At beta = 0 (lam and eta from their priors, the list from the reference), 0.4 and 1."""
    for (draws, values), beta in zip(hyperparameter_chains(BRL_HYPER_PRIORS), np.unique(BRL_BETAS)):
        gof, ks = check_hyperparameters(draws, values, beta)
        assert gof.passed(alpha=1e-3), (beta, gof)
        assert min(ks.values()) > 1e-3, (beta, ks)


def test_lam_and_eta_held_at_their_prior_means_fail_the_same_brl_check():
    """Negative control: Gammas concentrated at the means of the hyperpriors (lam and eta nearly fixed)."""
    concentrated = brl.Priors(**{name: dist.Gamma(a * 30, b * 30) for name, (a, b) in GAMMAS.items()})
    for (draws, values), beta in list(zip(hyperparameter_chains(concentrated), np.unique(BRL_BETAS)))[1:]:
        gof, ks = check_hyperparameters(draws, values, beta)
        assert not gof.passed(alpha=1e-3), (beta, gof)
        assert max(ks.values()) < 1e-3, (beta, ks)


def test_fit_brl_with_hyperpriors_on_lam_eta_and_alpha_matches_the_exact_posterior(tmp_path):
    """``fit_brl`` end to end on the tiny problem: a 3-rung ladder whose replicas carry their own lam, eta and
    alpha (the swaps read log p(lam) p(eta) p(alpha) in log_prior and log_reference, and the log likelihood at
    the replica's alpha), chains learning their proposals in groups; then its explanations, and the result
    saved, loaded and extended."""
    from interpretable_zoo.inference.brl import fit_brl

    rng = np.random.default_rng(0)  # the columns of tiny_problem()
    X = rng.integers(0, 2, (14, 3))
    _, y = tiny_problem()
    result = fit_brl(X, y, antecedents=ANTECEDENTS, max_length=brl_moves.CAPACITY, priors=BRL_HYPER_PRIORS,
                     steps_per_scan=brl_moves.THIN, n_temperatures=3, num_chains=8, num_samples=1500,
                     num_warmup=300, seed=2, progress_bar=False)
    assert result.run.n_temperatures == 3 and 0 < result.run.swap_accept.mean() < 1
    values = {name: result.idata.posterior[name].values for name in GAMMAS}
    assert all(name in result.diagnostics.index and v.shape == (8, 1500) for name, v in values.items())
    gof, ks = check_hyperparameters({"rules": result.run.records["rules"], "length": result.run.records["length"]},
                                    values, 1.0)
    assert gof.passed(alpha=1e-3), gof
    assert min(ks.values()) > 1e-3, ks
    check_alpha_in_the_explanations(result)
    save_result(result, tmp_path / "brl.pkl")  # the target holds the hyperprior model: saved by name
    loaded = load_result(tmp_path / "brl.pkl")
    assert loaded.explain() == result.explain() and loaded.extend(10).run.records["length"].shape == (8, 10)


def check_alpha_in_the_explanations(result):
    """The BRL-point list's rule probabilities and credible intervals with alpha integrated out given the list
    (the quadrature of p(alpha) p(y | d, alpha) on GRIDS["alpha"], written out here), and each draw's pointwise
    log likelihood at the draw's own alpha."""
    rules = result.point_list()
    counts = result.rule_counts(rules).astype(float)  # (rows, 2)
    states = {"rules": np.array([list(rules) + [-1] * (brl_moves.CAPACITY - len(rules))]),
              "length": np.array([len(rules)])}
    alpha = GRIDS["alpha"]
    density = np.exp(scipy.stats.gamma.logpdf(alpha, *GAMMAS["alpha"][:1], scale=1 / GAMMAS["alpha"][1])
                     + log_hyperparameter_factors(states, GRIDS)["alpha"][:, 0])
    density /= scipy.integrate.trapezoid(density, alpha)
    a = alpha[:, None, None] + counts  # (grid, rows, 2): theta_jl | alpha ~ Beta(a_l, a_other)
    means = scipy.integrate.trapezoid(density[:, None, None] * a / a.sum(-1, keepdims=True), alpha, axis=0)
    np.testing.assert_allclose(result.rule_probabilities(rules), means, atol=1e-5)
    frame = result.explain_frame(level=0.9)
    for (position, row), rule_counts in zip(frame.iterrows(), a.transpose(1, 0, 2)):
        for label, name in enumerate(result.classes):
            cdf = [scipy.integrate.trapezoid(density * scipy.stats.beta.cdf(row[f"p_{name}_{end}"], rule_counts[:, label],
                                                                            rule_counts[:, 1 - label]), alpha)
                   for end in ("low", "high")]
            np.testing.assert_allclose(cdf, [0.05, 0.95], atol=1e-4)
    draw_alpha = result.idata.posterior["alpha"].values[0, -1]
    draw_rules, draw_length = result.run.records["rules"][0, -1], result.run.records["length"][0, -1]
    truth_table, y = tiny_problem()
    expected = brl.loo_log_predictive(truth_table, y, jnp.full(2, draw_alpha, jnp.float32), draw_rules, draw_length)
    np.testing.assert_allclose(result.idata.log_likelihood["y"].values[0, -1], expected, atol=1e-5)
    with pytest.raises(ValueError, match="declares no discrete state"):  # alpha is continuous: az.loo's case
        discrete_loo(result)


def _omega_varying_with_the_feature(priors, n_clusters, n_features):
    return dist.Bernoulli(probs=priors.q ** (1.0 + jnp.arange(n_features))).expand([n_clusters, n_features])


def test_a_hook_that_breaks_the_conjugate_update_is_refused(monkeypatch):
    monkeypatch.setattr(bcm, "omega_distribution", _omega_varying_with_the_feature)
    with pytest.raises(ValueError, match=r"^priors\.q: .*Bernoulli\(priors\.q\) in every cell"):
        fit_bcm(X_TINY, N_CLUSTERS, priors=HYPER_PRIORS, **RUN)


def _g_reading_alpha(prototype_value, omega, values, priors):
    copies_prototype = (jnp.asarray(omega)[..., None] == 1) & (jnp.asarray(prototype_value)[..., None] == values)
    return priors.lam * (1.0 + priors.alpha * copies_prototype)


def test_a_hook_reading_alpha_outside_z_concentration_is_refused(monkeypatch):
    """alpha's update rebuilds pi's concentration only: a likelihood hook reading alpha is refused by name."""
    monkeypatch.setattr(bcm, "g", _g_reading_alpha)
    with pytest.raises(ValueError, match=r"^priors\.alpha: .* enters z_concentration alone; the edited hooks g read it"):
        fit_bcm(X_TINY, N_CLUSTERS, priors=HYPER_PRIORS, **RUN)


def _length_prior_reading_lam_as_a_float(priors, max_length):
    m = np.arange(max_length + 1)
    weights = m * np.log(float(priors.lam)) - scipy.special.gammaln(m + 1)
    return jnp.asarray(weights - scipy.special.logsumexp(weights))


def _pi_concentration_reading_alpha_as_a_float(priors, n_clusters):
    return np.full(n_clusters, float(priors.alpha) / n_clusters)


@pytest.mark.parametrize("module, hook, edit, field", [
    (brl, "log_length_prior", _length_prior_reading_lam_as_a_float, "lam"),
    (bcm, "z_concentration", _pi_concentration_reading_alpha_as_a_float, "alpha"),
], ids=["brl-lam", "bcm-alpha"])
def test_a_hook_that_cannot_take_a_traced_hyperparameter_is_refused_by_name(monkeypatch, module, hook, edit, field):
    """A sampled hyperparameter reaches the hooks traced, in every step: a hook that converts it to a float is
    refused naming the field before anything is sampled, not met by a JAX tracer error."""
    from test_prior_edits import BRL_RUN, X, Y

    from interpretable_zoo.inference.brl import fit_brl

    monkeypatch.setattr(module, hook, edit)
    pattern = rf"^priors\.{field}: a hyperprior on {field} is sampled by evaluating .* at traced values of {field}"
    with pytest.raises(ValueError, match=pattern):
        if module is brl:
            fit_brl(X, Y, priors=brl.Priors(lam=dist.Gamma(3.0, 1.0)), **BRL_RUN)
        else:
            fit_bcm(X_TINY, N_CLUSTERS, priors=dataclasses.replace(OTHER_PRIORS, alpha=dist.Gamma(2.0, 2.0)), **RUN)


def test_the_numpyro_kernels_refuse_a_hyperprior_by_name():
    """NumPyro's MCMC runs the kernels with the hyperparameters fixed: a hyperprior is refused, naming the field
    and the fit that samples it."""
    from numpyro.infer import MCMC

    from interpretable_zoo.inference.bcm_gibbs import BCMGibbs
    from interpretable_zoo.inference.brl_mh import BRLMetropolisHastings

    with pytest.raises(ValueError, match=r"^priors\.alpha: BCMGibbs \(a NumPyro kernel\) takes a number, not a "
                                         r"hyperprior \(Gamma\); fit_bcm samples q, alpha, lam and c within the chain"):
        MCMC(BCMGibbs(), num_warmup=2, num_samples=2, progress_bar=False).run(
            jax.random.PRNGKey(0), X_TINY, N_CLUSTERS, priors=dataclasses.replace(OTHER_PRIORS, alpha=dist.Gamma(2., 2.)))
    truth_table, y = tiny_problem()
    with pytest.raises(ValueError, match=r"^priors\.eta: BRLMetropolisHastings \(a NumPyro kernel\) takes a number"):
        MCMC(BRLMetropolisHastings(), num_warmup=2, num_samples=2, progress_bar=False).run(
            jax.random.PRNGKey(0), truth_table, CARDINALITIES, 2, y, priors=brl.Priors(eta=dist.Gamma(2.0, 2.0)))


@pytest.mark.parametrize("module, field", [(mgm, "rho"), (bayesian_sets, "kappa")])
def test_variational_and_closed_form_fits_refuse_a_hyperprior_by_name(module, field):
    with pytest.raises(ValueError, match=rf"priors\.{field}: .* takes a number, not a hyperprior \(Gamma\)"):
        module.Priors(**{field: dist.Gamma(2.0, 1.0)})
