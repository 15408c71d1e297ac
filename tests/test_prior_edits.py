"""Prior edits to the model files, as a researcher makes them: each is followed exactly by the BRL or BCM
fit (its draws pass the exact test against enumeration of the edited model and fail it against the
original model) or refused at fit time with a ModelMismatchError naming the site (NumPyro's MCMC with the
kernels refuses what the fits refuse); MGM's coordinate ascent and Bayesian Sets' closed form follow their
Priors and hooks (checked against closed forms of the edited model) and refuse any other edit of their
programs. Edits are applied by
replacing the model module's hooks, ``Priors`` or programs (``monkeypatch``), or by a handler that changes
one site's distribution inside a program."""

import copy
import functools
import re
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pandas as pd
import pytest
from jax import enable_x64
from jax.scipy.special import logsumexp

from interpretable_zoo.diagnostics.exact import enumerate_posterior, exact_gof_test, state_index
from interpretable_zoo.inference.bayesian_sets import BayesianSets
from interpretable_zoo.inference.bcm import fit_bcm
from interpretable_zoo.inference.bcm_gibbs import BCMGibbs
from interpretable_zoo.inference.brl import BayesianRuleListClassifier, fit_brl
from interpretable_zoo.inference.brl_mh import BRLMetropolisHastings
from interpretable_zoo.inference.mcmc import run_mcmc
from interpretable_zoo.inference.mgm import fit_mgm
from interpretable_zoo.inference.target_check import ModelMismatchError, base_distribution
from interpretable_zoo.models import bayesian_sets, bcm, brl, mgm
from tests.test_bcm_exact import N_CLUSTERS, X_TINY, enumerated_log_terms, exact_probabilities, gof_of_draws
from tests.test_brl_sampler import ANTECEDENTS, all_lists, gof_against_enumeration, tiny_posterior, tiny_problem

TRUTH_TABLE, Y = tiny_problem()
X = TRUTH_TABLE[:, :3].astype(int)  # antecedents 0, 1, 2 are the columns themselves
BRL_RUN = {"antecedents": ANTECEDENTS, "n_temperatures": 1, "num_chains": 8, "num_samples": 3072, "num_warmup": 100,
           "progress_bar": False}
BCM_RUN = {"n_temperatures": 1, "num_chains": 8, "num_samples": 1500, "num_warmup": 100, "store_z": True,
           "progress_bar": False}


class EditSite(numpyro.primitives.Messenger):
    """Replace the distribution of the sites named ``pattern`` (regex) by ``edit(old distribution)``: an
    edit written inside a program rather than through a hook."""

    def __init__(self, fn, pattern, edit):
        self.pattern, self.edit = pattern, edit
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and re.fullmatch(self.pattern, msg["name"]):
            msg["fn"] = self.edit(msg["fn"])


def edited_program(program, pattern, edit):
    """``program`` with the site matching ``pattern`` edited, under the program's name and signature (an edit
    in the model file keeps them)."""

    @functools.wraps(program)
    def edited(*args, **kwargs):
        return EditSite(program, pattern, edit)(*args, **kwargs)

    return edited


def masked_like(old, new_base):
    return new_base.mask(old._mask) if isinstance(old, dist.MaskedDistribution) else new_base


# ---------------------------------------------------------------- BRL


def brl_draws(seed=3, **options):
    result = fit_brl(X, Y, seed=seed, **BRL_RUN, **options)
    return {"rules": result.idata.posterior_sites["rules"].values, "length": result.idata.posterior["length"].values}


def brl_followed(monkeypatch, priors_of):
    """The fit under the edit against enumeration of the edited model, then of the original one."""
    draws = brl_draws()
    tiny_posterior.cache_clear()
    edited = gof_against_enumeration(draws, priors_of())
    monkeypatch.undo()
    tiny_posterior.cache_clear()
    original = gof_against_enumeration(draws, priors_of())
    tiny_posterior.cache_clear()
    return edited, original


@dataclass(frozen=True)
class BRLPriorsLam1(brl.Priors):
    lam: float = 1.0


@dataclass(frozen=True)
class BRLPriorsAlpha(brl.Priors):
    alpha: tuple = (0.3, 3.0)


def geometric_length_prior(priors, max_length):
    """log p(m) proportional to -1.5 m."""
    weights = -1.5 * jnp.arange(max_length + 1)
    return weights - logsumexp(weights)


def pairs_favoured(priors, available):
    """log p(c | available) proportional to 2 c, renormalised over the available cardinalities (with 5
    rules the three single-item antecedents run out)."""
    c = jnp.arange(1, available.shape[-1] + 1)
    weights = jnp.where(available, 2.0 * c, -jnp.inf)
    norm = logsumexp(weights, axis=-1, keepdims=True)
    return jnp.where(available, weights - jnp.where(jnp.isfinite(norm), norm, 0.0), -jnp.inf)


@pytest.mark.parametrize(
    "name, value",
    [("Priors", BRLPriorsLam1), ("Priors", BRLPriorsAlpha), ("log_length_prior", geometric_length_prior),
     ("log_cardinality_prior", pairs_favoured)],
    ids=["Priors_default_lam", "Priors_default_alpha", "length_hook", "cardinality_hook_running_out"],
)
def test_brl_follows(monkeypatch, name, value):
    monkeypatch.setattr(brl, name, value)
    edited, original = brl_followed(monkeypatch, lambda: brl.Priors())
    assert edited.passed(alpha=1e-3), edited
    assert not original.passed(alpha=1e-3), original


ALPHA_GRID = np.linspace(1e-6, 3.0, 4001)
"""Trapezoid nodes on which :func:`classifier_gof` integrates a Gamma hyperprior on alpha out (mass beyond 3 of
the Gamma(2, 20) below: 1e-24)."""


def classifier_gof(result, priors):
    """The exact test of a classifier's draws against enumeration of every list of its antecedents; a hyperprior
    on alpha integrated out of each list's likelihood on :data:`ALPHA_GRID`."""
    cardinalities = np.array([len(a) for a in result.antecedents])
    capacity = result.idata.posterior_sites.sizes["position"]
    table, y = result.train_table.astype(bool), result.train_labels

    def log_likelihood(rule_counts, default_counts, length):
        if not isinstance(priors.alpha, dist.Distribution):
            return brl.log_marginal_likelihood(rule_counts, default_counts, length, priors.alpha_vector(2))
        spacing = ALPHA_GRID[1] - ALPHA_GRID[0]
        log_weights = priors.alpha.log_prob(ALPHA_GRID) + np.log(np.r_[0.5, np.ones(len(ALPHA_GRID) - 2), 0.5] * spacing)
        per_alpha = jax.vmap(lambda a: brl.log_marginal_likelihood(rule_counts, default_counts, length,
                                                                   jnp.full(2, a)))(jnp.asarray(ALPHA_GRID))
        return logsumexp(per_alpha + log_weights)

    def log_joint(state):
        rule_counts, default_counts = brl.capture_counts(table, y, 2, state["rules"], state["length"])
        return brl.log_prior(state["rules"], state["length"], cardinalities, priors, capacity) + (
            log_likelihood(rule_counts, default_counts, state["length"]))

    states = all_lists(cardinalities.size, capacity)
    with enable_x64():
        probs = enumerate_posterior(log_joint, states)
    indices = state_index({"rules": result.idata.posterior_sites["rules"].values,
                           "length": result.idata.posterior["length"].values}, states)
    statistics = {f"length={m}": (states["length"] == m) * 1.0 for m in range(capacity + 1)}
    statistics.update({f"first rule {a}": (states["rules"][:, 0] == a) * 1.0 for a in range(cardinalities.size)})
    return exact_gof_test(indices, probs, statistics=statistics)


def test_brl_classifier_follows_the_priors_default(monkeypatch):
    """priors=None in the classifier is the model file's Priors(), edited here (lam = 1); its two binary
    columns mine 6 antecedents (4 items, 2 pairs), the tiny problem's compiled shapes."""
    monkeypatch.setattr(brl, "Priors", BRLPriorsLam1)
    frame = pd.DataFrame(X[:, :2], columns=["a", "b"])
    options = {key: BRL_RUN[key] for key in ("n_temperatures", "num_chains", "num_samples", "num_warmup", "progress_bar")}
    classifier = BayesianRuleListClassifier(min_support=0.3, max_length=5, seed=3, **options).fit(frame, Y)
    assert len(classifier.result_.antecedents) == 6
    edited = classifier_gof(classifier.result_, brl.Priors())
    monkeypatch.undo()
    original = classifier_gof(classifier.result_, brl.Priors())
    assert edited.passed(alpha=1e-3), edited
    assert not original.passed(alpha=1e-3), original


def test_brl_classifier_follows_a_hyperprior_on_alpha():
    """priors=Priors(alpha=Gamma(2, 20)) through the classifier: its lists against enumeration with alpha
    integrated out; the unedited model (alpha = 1) must fail the same test."""
    frame = pd.DataFrame(X[:, :2], columns=["a", "b"])
    options = {key: BRL_RUN[key] for key in ("n_temperatures", "num_chains", "num_samples", "num_warmup", "progress_bar")}
    priors = brl.Priors(alpha=dist.Gamma(2.0, 20.0))
    classifier = BayesianRuleListClassifier(min_support=0.3, max_length=5, seed=3, priors=priors, **options).fit(frame, Y)
    assert classifier.result_.idata.posterior["alpha"].shape == (options["num_chains"], options["num_samples"])
    edited, original = classifier_gof(classifier.result_, priors), classifier_gof(classifier.result_, brl.Priors())
    assert edited.passed(alpha=1e-3), edited
    assert not original.passed(alpha=1e-3), original


def length_prior_reading_alpha(priors, max_length):
    """A length prior whose mean grows with alpha: p(m) Poisson(lam + alpha)."""
    m = jnp.arange(max_length + 1)
    weights = m * jnp.log(priors.lam + jnp.mean(jnp.asarray(priors.alpha))) - jax.scipy.special.gammaln(m + 1)
    return weights - logsumexp(weights)


def test_brl_refuses_a_hyperprior_on_alpha_that_a_prior_hook_reads(monkeypatch):
    """alpha's update reads the likelihood alone: a list-prior hook that reads alpha leaves it inexact."""
    monkeypatch.setattr(brl, "log_length_prior", length_prior_reading_alpha)
    with pytest.raises(ValueError, match=r"^priors\.alpha: a hyperprior on alpha is followed only when alpha enters "
                                         r"theta's Dirichlet alone; the edited hooks .*log_length_prior.* read it too"):
        fit_brl(X, Y, priors=brl.Priors(alpha=dist.Gamma(2.0, 2.0)), **BRL_RUN)


def gamma_hyperprior_on_lam(truth_table, cardinalities, n_classes, y, *, priors=brl.Priors(), max_length=None):
    edited = copy.copy(priors)
    object.__setattr__(edited, "lam", numpyro.sample("lam", dist.Gamma(3.0, 1.0)))
    return ORIGINAL_BRL_COLLAPSED(truth_table, cardinalities, n_classes, y, priors=edited, max_length=max_length)


ORIGINAL_BRL_COLLAPSED = brl.collapsed_model


def _length_in_program(fn):
    return dist.Categorical(logits=-1.5 * jnp.arange(fn.logits.shape[-1]))


def _uneven_antecedents(fn):
    base = fn.base_dist
    return masked_like(fn, dist.Categorical(logits=base.logits - 0.7 * jnp.arange(base.logits.shape[-1])))


def _default_rule_alpha(fn):
    base = fn.base_dist
    while isinstance(base, (dist.ExpandedDistribution, dist.MaskedDistribution)):
        base = base.base_dist
    concentration = jnp.broadcast_to(base.concentration, fn.batch_shape + fn.event_shape)
    return masked_like(fn, dist.Dirichlet(concentration.at[-1].add(1.0)))


def log_prior_plus_length(rules, length, cardinalities, priors, max_length):
    return ORIGINAL_LOG_PRIOR(rules, length, cardinalities, priors, max_length) - 0.5 * length


ORIGINAL_LOG_PRIOR = brl.log_prior


BRL_REFUSED = [
    pytest.param("collapsed_model", gamma_hyperprior_on_lam, "'lam'", id="gamma_hyperprior_on_lam"),
    pytest.param("collapsed_model", edited_program(brl.collapsed_model, "length", _length_in_program), "length",
                 id="length_prior_in_the_program"),
    pytest.param("collapsed_model", edited_program(brl.collapsed_model, r"antecedent_\d+", _uneven_antecedents),
                 "antecedent", id="uneven_antecedent_choice"),
    pytest.param("model", edited_program(brl.model, "theta", _default_rule_alpha), "theta",
                 id="default_rule_alpha_in_model_only"),
    pytest.param("log_prior", log_prior_plus_length, "log_prior", id="log_prior_edited"),
]
"""(hook or program, its edit, the site or hook the refusal names): edits every BRL entry point refuses."""


@pytest.mark.parametrize("name, value, site", BRL_REFUSED)
def test_brl_refuses(monkeypatch, name, value, site):
    monkeypatch.setattr(brl, name, value)
    with pytest.raises(ModelMismatchError, match=site):
        fit_brl(X, Y, **BRL_RUN)


# ---------------------------------------------------------------- BCM


def bcm_draws(priors, seed=2, kernel="collapsed"):
    result = fit_bcm(X_TINY, N_CLUSTERS, priors=priors, seed=seed, kernel=kernel, **BCM_RUN)
    return {name: result.idata.posterior_sites[name].values for name in ("omega", "prototype", "z")}


def bcm_followed(monkeypatch, priors, kernel="collapsed"):
    """The fit by ``kernel`` under the edit (``priors``, None for the model file's defaults) against
    enumeration of the edited model, then of the original one."""
    draws = bcm_draws(priors, kernel=kernel)
    enumerated_log_terms.cache_clear()
    edited = gof_of_draws(draws, *exact_probabilities(priors or bcm.Priors()))
    enumerated_log_terms.cache_clear()
    monkeypatch.undo()
    priors = priors or bcm.Priors()
    if priors not in ORIGINAL_BCM_POSTERIORS:  # the unedited model's enumeration, shared by the cases
        ORIGINAL_BCM_POSTERIORS[priors] = exact_probabilities(priors)
        enumerated_log_terms.cache_clear()
    return edited, gof_of_draws(draws, *ORIGINAL_BCM_POSTERIORS[priors])


ORIGINAL_BCM_POSTERIORS = {}


@dataclass(frozen=True)
class BCMPriorsEdited(bcm.Priors):
    alpha: float = 1.0
    q: float = 0.3


def g_with_a_tenth_of_c(prototype_value, omega, values, priors):
    copies = (jnp.asarray(omega)[..., None] == 1) & (jnp.asarray(prototype_value)[..., None] == jnp.asarray(values))
    return priors.lam * (1.0 + 0.1 * priors.c * copies)


def alpha_per_cluster(priors, n_clusters):
    """A symmetric Dirichlet with alpha for each cluster (not alpha / S)."""
    return np.ones(n_clusters) * priors.alpha


def uneven_z_concentration(priors, n_clusters):
    """A Dirichlet for pi favouring the second cluster: alpha * [1, 2] / 3."""
    return priors.alpha * np.array([1.0, 2.0]) / 3.0


def omega_varying_with_the_feature(priors, n_clusters, n_features):
    return dist.Bernoulli(probs=priors.q ** (1.0 + 2.0 * jnp.arange(n_features))).expand([n_clusters, n_features])


def prototype_favouring_early_observations(priors, n_obs, n_clusters):
    return dist.Categorical(logits=-1.0 * jnp.arange(n_obs)).expand([n_clusters])


OTHER_PRIORS = bcm.Priors(alpha=1.0, lam=0.5, c=5.0, q=0.3)


@pytest.mark.parametrize(
    "name, value, priors",
    [("Priors", BCMPriorsEdited, None), ("g", g_with_a_tenth_of_c, OTHER_PRIORS),
     ("z_concentration", alpha_per_cluster, OTHER_PRIORS), ("z_concentration", uneven_z_concentration, OTHER_PRIORS),
     ("omega_distribution", omega_varying_with_the_feature, OTHER_PRIORS),
     ("prototype_distribution", prototype_favouring_early_observations, OTHER_PRIORS)],
    ids=["Priors_defaults_alpha_q", "g", "symmetric_z_concentration", "uneven_z_concentration",
         "omega_q_power_feature", "prototype_prior"],
)
def test_bcm_follows(monkeypatch, name, value, priors):
    monkeypatch.setattr(bcm, name, value)
    edited, original = bcm_followed(monkeypatch, priors)
    assert edited.passed(alpha=1e-3), edited
    assert not original.passed(alpha=1e-3), original


@pytest.mark.parametrize("name, value", [("g", g_with_a_tenth_of_c), ("z_concentration", uneven_z_concentration)],
                         ids=["g", "uneven_z_concentration"])
def test_bcm_partially_collapsed_kernel_follows(monkeypatch, name, value):
    """``kernel="partially_collapsed"`` reads the model file's hooks through the same tables."""
    monkeypatch.setattr(bcm, name, value)
    edited, original = bcm_followed(monkeypatch, OTHER_PRIORS, kernel="partially_collapsed")
    assert edited.passed(alpha=1e-3), edited
    assert not original.passed(alpha=1e-3), original


def beta_hyperprior_on_q(priors, n_obs, n_features, n_clusters):
    q = numpyro.sample("q", dist.Beta(2.0, 2.0))
    omega = numpyro.sample("omega", dist.Bernoulli(probs=q).expand([n_clusters, n_features]).to_event(2))
    prototype = numpyro.sample("prototype", bcm.prototype_distribution(priors, n_obs, n_clusters).to_event(1))
    return omega, prototype


def _omega_point_three(fn):
    return dist.Bernoulli(probs=0.3 * jnp.ones(fn.batch_shape + fn.event_shape)).to_event(2)


def _pi_doubled(fn):
    base = fn
    while isinstance(base, (dist.Independent, dist.ExpandedDistribution)):
        base = base.base_dist
    return dist.Dirichlet(2.0 * base.concentration).expand(fn.batch_shape + fn.event_shape[:-1]).to_event(1)


def prototype_favouring_a_share_of_the_observations(priors, n_obs, n_clusters):
    """Logits that depend on the number of observations: the padded sampler cannot follow them."""
    return dist.Categorical(logits=-4.0 * jnp.arange(n_obs) / n_obs).expand([n_clusters])


BCM_REFUSED = [
    pytest.param("subspace_and_prototype_prior", beta_hyperprior_on_q, "'q'", id="beta_hyperprior_on_q"),
    pytest.param("prototype_distribution", prototype_favouring_a_share_of_the_observations, "prototype",
                 id="prototype_logits_depending_on_N"),
    pytest.param("collapsed_model", edited_program(bcm.collapsed_model, "omega", _omega_point_three), "omega",
                 id="omega_in_collapsed_model_only"),
    pytest.param("model", edited_program(bcm.model, "omega", _omega_point_three), "omega", id="omega_in_model_only"),
    pytest.param("model", edited_program(bcm.model, "pi", _pi_doubled), "pi", id="pi_in_model_only"),
]
"""(hook or program, its edit, the site the refusal names): edits every BCM entry point refuses."""


@pytest.mark.parametrize("name, value, site", BCM_REFUSED)
def test_bcm_refuses(monkeypatch, name, value, site):
    monkeypatch.setattr(bcm, name, value)
    with pytest.raises(ModelMismatchError, match=site):
        fit_bcm(X_TINY, N_CLUSTERS, **BCM_RUN)


# ---- MGM and Bayesian Sets: the programs their closed-form updates assume ----

W_TINY = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1], [0, 0, 1]])


def _kumaraswamy(fn):
    return dist.Kumaraswamy(base_distribution(fn).concentration1, base_distribution(fn).concentration0)


def _shifted_beta(fn, shift):
    return dist.Beta(base_distribution(fn).concentration1 + shift, base_distribution(fn).concentration0 + shift)


@pytest.mark.parametrize(
    "edit, site",
    [
        (edited_program(mgm.model, "beta", _kumaraswamy), "'beta' is Kumaraswamy"),
        (edited_program(mgm.model, "gamma", lambda fn: _shifted_beta(fn, 2.0)), "'gamma' has a concentration"),
        (edited_program(mgm.model, "y", lambda fn: dist.Bernoulli(0.9)), "'y' has a probs"),
    ],
    ids=["beta_kumaraswamy", "gamma_shifted", "y_inline_probability"],
)
def test_mgm_refuses(monkeypatch, edit, site):
    monkeypatch.setattr(mgm, "model", edit)
    with pytest.raises(ModelMismatchError, match=site):
        fit_mgm(W_TINY, 2)


def test_mgm_accepts_its_own_program_and_priors():
    """Control: the check passes the model file as it is, for other Priors too (no search is run here)."""
    from interpretable_zoo.inference import target_check

    target_check.check_mgm(mgm.Priors(), False)
    target_check.check_mgm(mgm.Priors(rho=0.2, sigma1=3.0, alpha_l=5.0), True)


def test_bayesian_sets_refuses_a_shifted_beta(monkeypatch):
    shifted = edited_program(bayesian_sets.model, "theta", lambda fn: _shifted_beta(fn, 1.0))
    BayesianSets(W_TINY)  # control: the model file as it is
    monkeypatch.setattr(bayesian_sets, "model", shifted)
    with pytest.raises(ModelMismatchError, match="'theta' has a concentration"):
        BayesianSets(W_TINY)


ORIGINAL_BETA_HYPERPARAMETERS = bayesian_sets.beta_hyperparameters


def smoothed_hyperparameters(priors, feature_means):
    """alpha_j = kappa m_j + 1/2, beta_j = kappa (1 - m_j) + 1/2: every feature proper, the constant ones too."""
    alpha, beta = ORIGINAL_BETA_HYPERPARAMETERS(priors, feature_means)
    return alpha + 0.5, beta + 0.5


def closed_form_log_scores(X, query, alpha, beta, features):
    """log p(D_c + x) - log p(D_c) - log p(x) of every item (eq. 9) over the given features."""
    X, alpha, beta = X[:, features], alpha[features], beta[features]
    ones = X[list(query)].sum(0)
    return (bayesian_sets.log_marginal(ones + X, len(query) + 1, alpha, beta)
            - bayesian_sets.log_marginal(ones, len(query), alpha, beta) - bayesian_sets.log_marginal(X, 1, alpha, beta))


def test_bayesian_sets_follows_a_smoothed_beta_hyperparameters(monkeypatch):
    """Under +1/2 smoothing the features no item has and those every item has enter the score: the edited
    model's closed form over every feature, not the unedited model's (which leaves them out)."""
    X = np.column_stack([W_TINY, np.zeros(4), np.ones(4)]).astype(int)
    monkeypatch.setattr(bayesian_sets, "beta_hyperparameters", smoothed_hyperparameters)
    sets = BayesianSets(X)
    alpha, beta = smoothed_hyperparameters(bayesian_sets.Priors(), X.mean(0))
    query = [0, 2]
    scores = sets.log_scores(query)
    np.testing.assert_allclose(scores, closed_form_log_scores(X, query, alpha, beta, np.arange(5)), rtol=1e-10)
    old_mask = closed_form_log_scores(X, query, alpha, beta, np.arange(3))
    assert not np.allclose(scores, old_mask, rtol=1e-3), "the unedited mask must not match the edited model"
    monkeypatch.undo()
    assert not np.allclose(BayesianSets(X).log_scores(query), scores, rtol=1e-3)


def test_bayesian_sets_refuses_a_hook_that_returns_an_improper_prior(monkeypatch):
    """alpha_j = 0 on a feature some item has: no limit of proper priors gives it a finite score."""
    monkeypatch.setattr(bayesian_sets, "beta_hyperparameters", lambda priors, means: (np.zeros(3), np.ones(3)))
    with pytest.raises(ValueError, match=r"beta_hyperparameters: .*features \[0, 1, 2\]"):
        BayesianSets(W_TINY)


NUMPYRO_KERNELS = {"brl": (brl, BRLMetropolisHastings, (TRUTH_TABLE, np.array([len(a) for a in ANTECEDENTS]), 2, Y)),
                   "bcm": (bcm, BCMGibbs, (X_TINY, N_CLUSTERS))}


@pytest.mark.parametrize("kernel_name, name, value, site", [
    pytest.param(kernel_name, *edit.values, id=f"{kernel_name}_{edit.id}")
    for kernel_name, refused in (("brl", BRL_REFUSED), ("bcm", BCM_REFUSED)) for edit in refused
])
def test_numpyro_kernels_refuse_what_the_fits_refuse(monkeypatch, kernel_name, name, value, site):
    """NumPyro's MCMC with the kernel runs the fit's check before its first draw: every edit the fit refuses."""
    module, kernel, model_args = NUMPYRO_KERNELS[kernel_name]
    monkeypatch.setattr(module, name, value)
    with pytest.raises(ModelMismatchError, match=site):
        run_mcmc(kernel(), num_warmup=0, num_samples=1, num_chains=1, model_args=model_args, progress_bar=False)


ORIGINAL_BETA_PARAMETERS = mgm.beta_parameters


def top_component_four_one(y, t, priors):
    """The top component of beta_gk (y_g = t_gk = 1) Beta(4, 1) instead of Beta(alpha_t, beta_t)."""
    top = (jnp.asarray(y) * jnp.asarray(t) == 1)[..., None]
    return jnp.where(top, jnp.array([4.0, 1.0]), ORIGINAL_BETA_PARAMETERS(y, t, priors))


def mgm_elbo_and_updates(params, ext, priors):
    """The ELBO and the updates U2 (phi), U3 (lam), U5 (eta) at ``params``, compiled anew (so under the
    model file's hooks as they are now)."""
    from interpretable_zoo.inference import mgm_vi

    def evaluate(params):
        counts = mgm_vi.cluster_counts(params.nu, ext.present)
        elb, elb1, _ = mgm_vi._beta_stats(params.phi)
        elg, elg1, _ = mgm_vi._beta_stats(params.ell)
        return (mgm_vi.elbo(params, ext, priors), mgm_vi._update_phi(params.lam, params.eta, *counts, priors),
                mgm_vi._update_lam(elb, elb1, params.eta, elg, elg1, priors),
                mgm_vi._update_eta(elb, elb1, params.lam, priors))  # fmt: skip

    return [np.asarray(value) for value in jax.jit(evaluate)(params)]


def test_mgm_follows_an_edited_beta_parameters(monkeypatch):
    """Under the top component Beta(4, 1) the fit's checks pass, and the ELBO and the updates U2, U3, U5
    move from the original model's by the closed form of eq. E1: at q(y_g = 1) = eta, q(t_gk = 1) = lam, the
    prior term changes by sum_gk eta lam D_gk, D = (4 - 9) E log beta - log B(4, 1) + log B(9, 1); phi by
    eta lam (4 - 9, 0); logit lam by eta D; logit eta by sum_k lam D. The original model is the control."""
    from scipy.special import betaln, digamma, logit

    from interpretable_zoo.inference import mgm_vi, target_check
    from tests.test_mgm_vi import data_with_an_and_group, random_state

    rng = np.random.default_rng(4)
    priors = mgm.Priors()
    with enable_x64():
        W = data_with_an_and_group(rng, 6, 3)
        ext = mgm_vi.make_extraction(W, jnp.array([0, 1, 2]), jnp.array([mgm.AND, mgm.OR, mgm.OR]))
        params = random_state(rng, 6, 3, 2)
        original = mgm_elbo_and_updates(params, ext, priors)
        monkeypatch.setattr(mgm, "beta_parameters", top_component_four_one)
        target_check.check_mgm(priors, False)
        mgm_vi.check_expected_log_prior(priors)
        edited = mgm_elbo_and_updates(params, ext, priors)
    phi, lam, eta = (np.asarray(value) for value in (params.phi, params.lam, params.eta))
    change = (4 - 9) * (digamma(phi[..., 0]) - digamma(phi.sum(-1))) - betaln(4, 1) + betaln(9, 1)  # (G, K)
    expected = [np.sum(eta[:, None] * lam * change), np.stack([eta[:, None] * lam * (4 - 9), 0 * lam], -1),
                eta[:, None] * change, np.sum(lam * change, -1)]  # fmt: skip
    transforms = [lambda v: v, lambda v: v, logit, logit]
    for name, new, old, closed_form, transform in zip(("ELBO", "phi", "lam", "eta"), edited, original, expected,
                                                       transforms):  # fmt: skip
        assert np.abs(closed_form).max() > 0.1, name  # the edit matters here: the original model fails
        np.testing.assert_allclose(transform(new) - transform(old), closed_form, rtol=1e-7, atol=1e-9, err_msg=name)


def test_mgm_refuses_an_elbo_that_does_not_read_the_program(monkeypatch):
    """Negative control of the check: an ELBO whose prior of beta_gk reads Priors.beta_components, not the
    edited hook that ``model`` draws beta_gk with, is refused naming the site."""
    from interpretable_zoo import compiled_hooks
    from interpretable_zoo.inference import mgm_vi

    read_by_the_elbo = mgm_vi.prior_tables

    def components_not_the_hook(priors):
        corners = jnp.asarray(mgm.Priors.beta_components(priors))[jnp.array([0, 0, 1, 2])]
        return read_by_the_elbo(priors)._replace(
            corners=corners, corner_log_b=jax.scipy.special.betaln(corners[:, 0], corners[:, 1]))

    # compiled anew (the cached check keys on the model file only); the edit read by both passes in
    # test_mgm_follows_an_edited_beta_parameters
    monkeypatch.setattr(compiled_hooks, "evaluate", lambda model, function, priors: jax.jit(lambda: function(priors))())
    monkeypatch.setattr(mgm, "beta_parameters", top_component_four_one)
    monkeypatch.setattr(mgm_vi, "prior_tables", components_not_the_hook)
    with pytest.raises(ModelMismatchError, match="site 'beta'.*beta_parameters"):
        mgm_vi.check_expected_log_prior(mgm.Priors())
