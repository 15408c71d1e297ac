"""Prior edits to the model files, as a researcher makes them: each is followed exactly by the BRL or BCM
fit (its draws pass the exact test against enumeration of the edited model and fail it against the
original model) or refused at fit time with a ModelMismatchError naming the site; MGM's coordinate ascent
and Bayesian Sets' closed form follow their Priors and hooks and refuse any other edit of their programs. Edits are applied by
replacing the model module's hooks, ``Priors`` or programs (``monkeypatch``), or by a handler that changes
one site's distribution inside a program."""

import copy
import re
from dataclasses import dataclass

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
from interpretable_zoo.inference.brl import BayesianRuleListClassifier, fit_brl
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
    def edited(*args, **kwargs):
        return EditSite(program, pattern, edit)(*args, **kwargs)

    edited.__name__, edited.__module__ = program.__name__, program.__module__
    return edited


def masked_like(old, new_base):
    return new_base.mask(old._mask) if isinstance(old, dist.MaskedDistribution) else new_base


# ---------------------------------------------------------------- BRL


def brl_draws(seed=3, **options):
    result = fit_brl(X, Y, seed=seed, **BRL_RUN, **options)
    posterior = result.idata.posterior
    return {"rules": posterior["rules"].values, "length": posterior["length"].values}


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


def classifier_gof(result, priors):
    """The exact test of a classifier's draws against enumeration of every list of its antecedents."""
    cardinalities = np.array([len(a) for a in result.antecedents])
    capacity = result.idata.posterior.sizes["position"]
    table, y = result.train_table.astype(bool), result.train_labels

    def log_joint(state):
        rule_counts, default_counts = brl.capture_counts(table, y, 2, state["rules"], state["length"])
        return brl.log_prior(state["rules"], state["length"], cardinalities, priors, capacity) + (
            brl.log_marginal_likelihood(rule_counts, default_counts, state["length"], priors.alpha_vector(2)))

    states = all_lists(cardinalities.size, capacity)
    with enable_x64():
        probs = enumerate_posterior(log_joint, states)
    posterior = result.idata.posterior
    indices = state_index({"rules": posterior["rules"].values, "length": posterior["length"].values}, states)
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


@pytest.mark.parametrize(
    "name, value, site",
    [
        ("collapsed_model", gamma_hyperprior_on_lam, "'lam'"),
        ("collapsed_model", edited_program(brl.collapsed_model, "length", _length_in_program), "length"),
        ("collapsed_model", edited_program(brl.collapsed_model, r"antecedent_\d+", _uneven_antecedents), "antecedent"),
        ("model", edited_program(brl.model, "theta", _default_rule_alpha), "theta"),
        ("log_prior", log_prior_plus_length, "log_prior"),
    ],
    ids=["gamma_hyperprior_on_lam", "length_prior_in_the_program", "uneven_antecedent_choice",
         "default_rule_alpha_in_model_only", "log_prior_edited"],
)
def test_brl_refuses(monkeypatch, name, value, site):
    monkeypatch.setattr(brl, name, value)
    with pytest.raises(ModelMismatchError, match=site):
        fit_brl(X, Y, **BRL_RUN)


# ---------------------------------------------------------------- BCM


def bcm_draws(priors, seed=2):
    result = fit_bcm(X_TINY, N_CLUSTERS, priors=priors, seed=seed, **BCM_RUN)
    return {name: result.idata.posterior[name].values for name in ("omega", "prototype", "z")}


def bcm_followed(monkeypatch, priors):
    """The fit under the edit (``priors``, None for the model file's defaults) against enumeration of the
    edited model, then of the original one."""
    draws = bcm_draws(priors)
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


@pytest.mark.parametrize(
    "name, value, site",
    [
        ("subspace_and_prototype_prior", beta_hyperprior_on_q, "'q'"),
        ("collapsed_model", edited_program(bcm.collapsed_model, "omega", _omega_point_three), "omega"),
        ("model", edited_program(bcm.model, "omega", _omega_point_three), "omega"),
        ("model", edited_program(bcm.model, "pi", _pi_doubled), "pi"),
    ],
    ids=["beta_hyperprior_on_q", "omega_in_collapsed_model_only", "omega_in_model_only", "pi_in_model_only"],
)
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
