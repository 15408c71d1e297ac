"""Hyperpriors sampled within the chain (inference.hyperpriors): BCM's q ~ Beta against exact enumeration of
the discrete state with q integrated out (the Beta-Bernoulli marginal) and the q draws against their exact
mixture-of-Betas distribution, at beta = 1, at an intermediate beta and under a tempering ladder; negative
control: q held at its prior mean; the programs' hyperprior site; refusals. BRL's lam ~ Gamma likewise: the
lists against enumeration with lam integrated out on a grid, lam against its exact mixture, at beta = 0, 0.4
and 1 and through fit_brl's ladder; negative control: lam held at its prior mean."""

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
from interpretable_zoo.inference import bcm_gibbs, brl_mh, convergence, hyperpriors
from interpretable_zoo.inference.bcm import _kernel, fit_bcm
from interpretable_zoo.inference.brl import KERNEL as BRL_KERNEL
from interpretable_zoo.inference.target_check import ModelMismatchError
from interpretable_zoo.models import bayesian_sets, bcm, brl, mgm
from tests import test_brl_moves as brl_moves
from tests.test_bcm_exact import N_CLUSTERS, OTHER_PRIORS, X_TINY, enumerated_log_terms, label_free_statistics
from tests.test_brl_sampler import ANTECEDENTS, CARDINALITIES, all_lists, exact_log_joint, tiny_problem

A, B = 2.0, 0.7  # q ~ Beta(A, B): mean 0.74, far wider than any fixed q
HYPER_PRIORS = dataclasses.replace(OTHER_PRIORS, q=dist.Beta(A, B))
CELLS = N_CLUSTERS * X_TINY.shape[1]  # S P subspace indicators
KERNEL_WITH_Z = _kernel(store_z=True)
BETAS = jnp.array([1.0] * 8 + [0.4] * 8)  # 8 chains at the posterior, 8 at an intermediate rung
THIN = 10  # the q draws thinned for the KS test


def exact_with_hyperprior(beta):
    """States, their exact probabilities under p(q) p(omega | q) ... L^beta with q integrated out
    (omega's Bernoulli(q0) term of the enumeration swapped for the Beta-Bernoulli marginal
    B(A + k, B + SP - k) / B(A, B), k = sum omega), and k per state."""
    x = np.asarray(X_TINY, np.int64)
    states, log_prior, log_likelihood = enumerated_log_terms(OTHER_PRIORS, x.tobytes(), x.shape, N_CLUSTERS)
    active = states["omega"].sum((1, 2))
    q0 = OTHER_PRIORS.q
    marginal = scipy.special.betaln(A + active, B + CELLS - active) - scipy.special.betaln(A, B)
    log_target = log_prior - (active * np.log(q0) + (CELLS - active) * np.log1p(-q0)) + marginal + beta * log_likelihood
    probs = enumerate_posterior(lambda index: log_target[index], list(range(len(log_target))), method="loop")
    return states, probs, active


def statistics(states):
    """The label-free statistics of the enumeration tests plus the indicator of each count of active omega,
    whose spread a fixed q gets wrong."""
    stats = label_free_statistics(states)
    active = states["omega"].sum((1, 2))
    stats.update({f"active_omega_is_{k}": (active == k).astype(float) for k in range(CELLS + 1)})
    return stats


def q_cdf(q, probs, active):
    """The exact marginal CDF of q: the mixture over states of Beta(A + k, B + SP - k)."""
    weights = np.bincount(active, probs, CELLS + 1)
    return sum(w * scipy.stats.beta.cdf(q, A + k, B + CELLS - k) for k, w in enumerate(weights))


def check(draws, q, beta):
    """(GOF of the discrete draws, KS p-value of the thinned q draws) against the exact target at ``beta``."""
    states, probs, active = exact_with_hyperprior(beta)
    gof = exact_gof_test(state_index(draws, states), probs, statistics=statistics(states))
    ks = scipy.stats.kstest(np.asarray(q)[:, ::THIN].ravel(), partial(q_cdf, probs=probs, active=active))
    return gof, ks.pvalue


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
    return states.omega, states.prototype, states.z, states.values["q"]


def chains(priors, seed=0, num_warmup=200, num_samples=800):
    """16 chains (:data:`BETAS`) of the hyperprior kernel on X_TINY under ``priors``; per beta group the
    params and q (one compiled program for every hyperprior)."""
    inner = bcm_gibbs.make_target(X_TINY, N_CLUSTERS, hyperpriors.at_point(priors))
    static, data = hyperpriors.target(hyperpriors.BCM, inner, priors)
    kernel = hyperpriors.with_hyperpriors(KERNEL_WITH_Z)
    out = replica_draws(kernel, static, data, jax.random.PRNGKey(seed), BETAS, num_warmup + num_samples, bcm_fields)
    omega, prototype, z, q = (np.swapaxes(np.asarray(v)[num_warmup:], 0, 1) for v in out)
    return [({"omega": omega[g], "prototype": prototype[g], "z": z[g]}, q[g]) for g in (slice(0, 8), slice(8, 16))]


def test_sampled_q_matches_the_exact_posterior_at_each_beta():
    for (draws, q), beta in zip(chains(HYPER_PRIORS), (1.0, 0.4)):
        gof, ks = check(draws, q, beta)
        assert gof.passed(alpha=1e-3), (beta, gof)
        assert ks > 1e-3, (beta, ks)


def test_q_held_at_its_prior_mean_fails_the_same_check():
    """Negative control: a hyperprior concentrated at the mean of Beta(A, B) (q nearly fixed there)."""
    concentrated = dataclasses.replace(OTHER_PRIORS, q=dist.Beta(A * 1e5, B * 1e5))
    for (draws, q), beta in zip(chains(concentrated), (1.0, 0.4)):
        gof, ks = check(draws, q, beta)
        assert not gof.passed(alpha=1e-3), (beta, gof)
        assert ks < 1e-3, (beta, ks)


def test_tempering_ladder_with_the_hyperprior_matches_the_exact_posterior():
    """The engine's swaps between rungs whose replicas carry their own q (log_prior includes log p(q))."""
    inner = bcm_gibbs.make_target(X_TINY, N_CLUSTERS, hyperpriors.at_point(HYPER_PRIORS))
    static, data = hyperpriors.target(hyperpriors.BCM, inner, HYPER_PRIORS)
    run = convergence.sample(hyperpriors.with_hyperpriors(KERNEL_WITH_Z), static, data, num_chains=8, seed=4,
                             n_temperatures=3, num_samples=800, tuning_rounds=1, scans_per_chunk=200,
                             progress_bar=False)
    assert run.n_temperatures == 3 and 0 < run.swap_accept.mean() < 1
    gof, ks = check({name: run.records[name] for name in ("omega", "prototype", "z")}, run.summaries["q"], 1.0)
    assert gof.passed(alpha=1e-3), gof
    assert ks > 1e-3, ks


def test_programs_draw_the_hyperprior_site():
    """``Predictive`` draws q then the rest; the collapsed density at a q equals the fixed-q density plus
    log Beta(q)."""
    predictive = Predictive(bcm.model, num_samples=4)
    draws = jax.jit(lambda key: predictive(key, 3, np.array([2, 2]), 2, priors=HYPER_PRIORS))(jax.random.PRNGKey(0))
    assert draws["q"].shape == (4,) and np.all((draws["q"] > 0) & (draws["q"] < 1)) and draws["x"].shape == (4, 3, 2)
    params = {"q": jnp.float32(0.3), "omega": jnp.array([[1, 0], [1, 1]]), "prototype": jnp.array([0, 2]),
              "z": jnp.array([[0, 1], [1, 1], [0, 0]])}
    with_hyperprior, fixed = jax.jit(lambda params: (
        log_density(bcm.collapsed_model, (X_TINY, 2), {"priors": HYPER_PRIORS}, params)[0],
        log_density(bcm.collapsed_model, (X_TINY, 2), {"priors": dataclasses.replace(OTHER_PRIORS, q=0.3)},
                    {k: v for k, v in params.items() if k != "q"})[0]))(params)
    assert np.isclose(with_hyperprior - fixed, dist.Beta(A, B).log_prob(0.3), atol=1e-4)


RUN = {"num_samples": 4, "num_warmup": 4, "num_chains": 2, "n_temperatures": 1, "progress_bar": False}


def test_an_unsupported_hyperprior_is_refused_by_name():
    with pytest.raises(ValueError, match=r"priors\.lam: .* Gamma hyperprior on lam; it samples q ~ Beta, written "
                                         r"models\.bcm\.Priors\(q=numpyro\.distributions\.Beta\(a, b\)\)"):
        fit_bcm(X_TINY, N_CLUSTERS, priors=bcm.Priors(lam=dist.Gamma(2.0, 2.0)), **RUN)


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
    """BRL samples lam ~ Gamma only: another family on lam, a hyperprior on eta or alpha, or a traced lam
    drawn in its program (no tracer error from Priors) is refused naming the field and how to write lam's."""
    from test_prior_edits import BRL_RUN, X, Y

    from interpretable_zoo.inference.brl import fit_brl

    written = r"models\.brl\.Priors\(lam=numpyro\.distributions\.Gamma\(a, b\)\)"
    with pytest.raises(ValueError, match=rf"^priors\.lam: .* LogNormal hyperprior on lam; it samples lam ~ Gamma, "
                                         rf"written {written}"):
        fit_brl(X, Y, priors=brl.Priors(lam=dist.LogNormal(0.0, 1.0)), **BRL_RUN)
    with pytest.raises(ValueError, match=r"^priors\.eta: .* Gamma hyperprior on eta; it samples lam ~ Gamma"):
        fit_brl(X, Y, priors=brl.Priors(eta=dist.Gamma(2.0, 2.0)), **BRL_RUN)
    with pytest.raises(ValueError, match=r"^priors\.alpha: the BRL sampler samples no hyperprior on alpha"):
        brl.Priors(alpha=dist.Gamma(2.0, 2.0))
    with pytest.raises(ValueError, match=r"^priors\.lam: a hyperprior must be a scalar distribution"):
        brl.Priors(lam=dist.Gamma(jnp.ones(2), 1.0))

    def lam_drawn_in_the_program(priors):
        return dataclasses.replace(priors, lam=numpyro.sample("lam", dist.Gamma(6.0, 2.0)))

    monkeypatch.setattr(brl, "sample_hyperparameters", lam_drawn_in_the_program)
    with pytest.raises(ModelMismatchError, match=rf"latent site 'lam' .* A hyperprior on lam is written as a Priors "
                                                 rf"field .*{written}"):
        fit_brl(X, Y, **BRL_RUN)


# ---------------------------------------------------------------------------------------------- BRL's lam

LAM_A, LAM_B = 3.0, 1.0  # lam ~ Gamma(LAM_A, rate LAM_B): mean 3, sd 1.7
LAM_PRIORS = brl.Priors(lam=dist.Gamma(LAM_A, LAM_B))
LAM_BETAS = np.repeat([0.0, 0.4, 1.0], 8)  # 8 replicas at the reference, an intermediate rung, the posterior
LAM_GRID = np.linspace(1e-9, scipy.stats.gamma.ppf(1 - 1e-12, LAM_A, scale=1 / LAM_B), 100_001)
LAM_THIN = 20  # the lam draws thinned for the KS test (lag-20 autocorrelation below 0.05)


@lru_cache
def exact_with_lam(beta):
    """(lists, their exact probabilities, the CDF of lam on LAM_GRID) at rung beta of the path
    p(lam) r(d)^(1 - beta) (p(d | lam) p(y | d))^beta with lam integrated out on LAM_GRID: lam enters the
    length prior alone, so a list's term beta log p(m | lam0) at the fixed lam0 is swapped for log I_m,
    I_m = integral of p(lam) p(m | lam)^beta, and lam | m has density p(lam) p(m | lam)^beta / I_m."""
    lam0 = float(LAM_PRIORS.lam.mean)
    m = np.arange(brl_moves.CAPACITY + 1)

    def log_length(lam):  # the truncated Poisson of Letham eq. 2
        weights = m * np.log(lam)[..., None] - scipy.special.gammaln(m + 1)
        return weights - scipy.special.logsumexp(weights, axis=-1, keepdims=True)

    density = np.exp(scipy.stats.gamma.logpdf(LAM_GRID, LAM_A, scale=1 / LAM_B)[:, None] + beta * log_length(LAM_GRID))
    cumulative = scipy.integrate.cumulative_trapezoid(density, LAM_GRID, axis=0, initial=0.0)  # (grid, m)
    correction = jnp.asarray(np.log(cumulative[-1]) - beta * log_length(np.array(lam0)))
    fixed = dataclasses.replace(LAM_PRIORS, lam=lam0)
    truth_table, y = tiny_problem()
    log_joint = exact_log_joint(truth_table, y, 2, fixed, brl_moves.CAPACITY, beta)
    states = all_lists(len(CARDINALITIES), brl_moves.CAPACITY)
    with jax.enable_x64():
        probs = enumerate_posterior(lambda state: log_joint(state) + correction[state["length"]], states)
    weights = np.bincount(states["length"], probs, m.size)
    return states, probs, (cumulative / cumulative[-1]) @ weights


def check_lam(draws, lam, beta):
    """(GOF of the lists, KS p-value of the thinned lam draws) against the exact rung ``beta``."""
    states, probs, cdf = exact_with_lam(beta)
    lists, lengths = states["rules"], states["length"]
    statistics = {f"length={m}": (lengths == m) * 1.0 for m in range(brl_moves.CAPACITY + 1)}
    for a in range(len(CARDINALITIES)):
        statistics[f"first rule {a}"] = (lists[:, 0] == a) * 1.0
        statistics[f"{a} in list"] = (lists == a).any(axis=1) * 1.0
    gof = exact_gof_test(state_index(draws, states), probs, statistics=statistics)
    ks = scipy.stats.kstest(np.asarray(lam)[:, ::LAM_THIN].ravel(), lambda x: np.interp(x, LAM_GRID, cdf))
    return gof, ks.pvalue


def brl_fields(states):
    return states.rules, states.length, states.values["lam"]


def lam_chains(priors, n_warmup=50, n_calls=3000):
    """:data:`LAM_BETAS` replicas of the hyperprior kernel on test_brl_moves' tiny problem (per-chain
    proposal tables, one row per beta group); per beta group the lists and lam."""
    static, data = hyperpriors.target(hyperpriors.BRL, brl_moves.target(hyperpriors.at_point(priors)), priors)
    data = data._replace(inner=brl_mh.per_chain(data.inner, 3))
    out = replica_draws(hyperpriors.with_hyperpriors(BRL_KERNEL), static, data, jax.random.PRNGKey(3),
                        jnp.asarray(LAM_BETAS), n_warmup + n_calls, brl_fields)
    rules, length, lam = (np.swapaxes(np.asarray(v)[n_warmup:], 0, 1) for v in out)
    return [({"rules": rules[group], "length": length[group]}, lam[group])
            for group in (slice(0, 8), slice(8, 16), slice(16, 24))]


def test_sampled_lam_matches_the_exact_brl_posterior_at_each_beta():
    """At beta = 0 (lam from p(lam), the list from the reference), 0.4 and 1."""
    for (draws, lam), beta in zip(lam_chains(LAM_PRIORS), np.unique(LAM_BETAS)):
        gof, ks = check_lam(draws, lam, beta)
        assert gof.passed(alpha=1e-3), (beta, gof)
        assert ks > 1e-3, (beta, ks)


def test_lam_held_at_its_prior_mean_fails_the_same_brl_check():
    """Negative control: a Gamma concentrated at the mean of Gamma(LAM_A, LAM_B) (lam nearly fixed there)."""
    concentrated = brl.Priors(lam=dist.Gamma(LAM_A * 30, LAM_B * 30))  # sd 0.32, against 1.7
    for (draws, lam), beta in list(zip(lam_chains(concentrated), np.unique(LAM_BETAS)))[1:]:
        gof, ks = check_lam(draws, lam, beta)
        assert not gof.passed(alpha=1e-3), (beta, gof)
        assert ks < 1e-3, (beta, ks)


def test_fit_brl_with_a_lam_hyperprior_matches_the_exact_posterior():
    """``fit_brl`` end to end on the tiny problem: a 3-rung ladder whose replicas carry their own lam (the
    swaps read log p(lam) in log_prior and log_reference), chains learning their proposals in groups."""
    from interpretable_zoo.inference.brl import fit_brl

    rng = np.random.default_rng(0)  # the columns of tiny_problem()
    X = rng.integers(0, 2, (14, 3))
    _, y = tiny_problem()
    result = fit_brl(X, y, antecedents=ANTECEDENTS, max_length=brl_moves.CAPACITY, priors=LAM_PRIORS,
                     steps_per_scan=brl_moves.THIN, n_temperatures=3, num_chains=8, num_samples=1500,
                     num_warmup=300, seed=2, progress_bar=False)
    assert result.run.n_temperatures == 3 and 0 < result.run.swap_accept.mean() < 1
    lam = result.idata.posterior["lam"].values
    assert "lam" in result.diagnostics and lam.shape == (8, 1500)
    gof, ks = check_lam({"rules": result.run.records["rules"], "length": result.run.records["length"]}, lam, 1.0)
    assert gof.passed(alpha=1e-3), gof
    assert ks > 1e-3, ks


def _omega_varying_with_the_feature(priors, n_clusters, n_features):
    return dist.Bernoulli(probs=priors.q ** (1.0 + jnp.arange(n_features))).expand([n_clusters, n_features])


def test_a_hook_that_breaks_the_conjugate_update_is_refused(monkeypatch):
    monkeypatch.setattr(bcm, "omega_distribution", _omega_varying_with_the_feature)
    with pytest.raises(ValueError, match=r"^priors\.q: .*Bernoulli\(priors\.q\) in every cell"):
        fit_bcm(X_TINY, N_CLUSTERS, priors=HYPER_PRIORS, **RUN)


@pytest.mark.parametrize("module, field", [(mgm, "rho"), (bayesian_sets, "kappa")])
def test_variational_and_closed_form_fits_refuse_a_hyperprior_by_name(module, field):
    with pytest.raises(ValueError, match=rf"priors\.{field}: .* takes a number, not a hyperprior \(Gamma\)"):
        module.Priors(**{field: dist.Gamma(2.0, 1.0)})
