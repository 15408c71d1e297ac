"""Bayesian Case Model (Kim, Rudin, Shah 2014): priors, the generative process and its collapsed density.

Notation of the paper (sec. 3): N observations with P categorical features, feature j taking V_j values
coded 0..V_j-1; S clusters. Cluster s has a prototype p_s (one of the N observations), a subspace
omega_s in {0,1}^P, and per feature a distribution phi_sj over the V_j values drawn from
Dirichlet(g(p_sj, omega_sj)); observation i mixes clusters with weights pi_i and each of its tokens
x_ij comes from cluster z_ij.

Conventions, used by every sampler: pi_i ~ Dirichlet(alpha / S, ..., alpha / S), the alpha / S of eq. (1)
(:func:`z_concentration`); the priors of omega and the prototypes are written once, in
:func:`subspace_and_prototype_prior` (hooks :func:`omega_distribution` and :func:`prototype_distribution`),
and the Gibbs sampler evaluates the same distributions; arrays of values are padded to V = max_j V_j,
entries v >= V_j never contributing (:func:`value_mask`). The process of sec. 3 is circular, the prototype
being one of the observations the clusters generate: :func:`model` conditions it so that integrating pi
and phi out gives exactly :func:`collapsed_model`, the target of ``inference.bcm_gibbs``. The
concentration function :func:`g` is the one place its formula appears: replace it by the paper's
thresholded or loss-based variants and both the NumPyro programs and the Gibbs sampler follow.

Editing priors: the fast sampler follows :class:`Priors` (its defaults and hyperpriors too), :func:`g`,
:func:`omega_distribution`, :func:`prototype_distribution` and :func:`z_concentration`. It refuses, with
``inference.target_check.ModelMismatchError`` naming the site, a program it cannot sample: a new site, another
family, a distribution written in a program instead of its hook, or :func:`model` and :func:`collapsed_model`
stating different priors. Check an edit by fitting (the check runs on every fit) and by the enumeration
tests of the edited model, as in tests/test_prior_edits.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln
from numpyro.distributions import constraints

from interpretable_zoo.inference import hyperpriors
from interpretable_zoo.inference.validation import check_float32_positive


@dataclass(frozen=True)
class Priors:
    """Hyperparameters of BCM; defaults are the paper's sec. 4.1 settings.

    alpha: total concentration of pi_i ~ Dirichlet(alpha / S each), the alpha of eq. (1).
    lam: base concentration lambda of g (sec. 3), entering eqs. (1) and (2).
    c: the prototype's extra weight in g, lambda * (1 + c) on the prototype's value.
    q: prior probability that a feature is in a cluster's subspace, omega_sj ~ Bernoulli(q), eq. (2).

    A field may hold a NumPyro distribution instead, a hyperprior: ``Priors(q=dist.Beta(2, 2))``. The
    programs draw it as the site named after the field (:func:`sample_hyperparameters`) and the sampler
    draws it within the chain (``inference.hyperpriors``: q ~ Beta, conjugately; alpha, lam and c ~ Gamma,
    by slice sampling).
    """

    alpha: float | dist.Distribution = 0.01
    lam: float | dist.Distribution = 1.0
    c: float | dist.Distribution = 50.0
    q: float | dist.Distribution = 0.8

    def __post_init__(self):
        values = hyperpriors.concrete_values(self)  # hyperpriors and traced draws are checked where sampled
        for name in ("alpha", "lam"):
            if name in values and values[name] <= 0:
                raise ValueError(f"priors.{name} must be positive, got {values[name]}")
        if values.get("c", 0.0) < 0:
            raise ValueError(f"priors.c must be non-negative, got {self.c}")
        for name in ("alpha", "lam", "c"):
            if values.get(name, 0.0) > 0:  # c = 0 is allowed: no copying of the prototype
                check_float32_positive(values[name], f"priors.{name}")
        if "q" in values and not 0 < values["q"] < 1:
            raise ValueError(f"priors.q must lie strictly between 0 and 1, got {self.q}")


def g(prototype_value, omega, values, priors: Priors):
    """The concentration g_{p_sj, omega_sj, lambda}(v) = lambda * (1 + c * 1[omega_sj = 1 and p_sj = v]) (sec. 3).

    ``prototype_value`` and ``omega`` broadcast to a shape B; ``values`` are the candidate outcomes v,
    shape (V,). Returns shape B + (V,). A replacement (the paper's thresholded or loss-based variants) must
    keep g independent of the prototype value when omega_sj = 0, as all the paper's do.
    """
    prototype_value = jnp.asarray(prototype_value)[..., None]
    omega = jnp.asarray(omega)[..., None]
    copies_prototype = (omega == 1) & (prototype_value == jnp.asarray(values))
    return priors.lam * (1.0 + priors.c * copies_prototype)


def z_concentration(priors: Priors, n_clusters: int) -> np.ndarray:
    """The Dirichlet concentration of pi_i, one value per cluster, shape (S,): alpha / S each (eq. (1)).

    Any positive vector is allowed, uneven values too (a Dirichlet favouring some clusters); every sampler
    reads this vector.
    """
    return np.ones(n_clusters) * (priors.alpha / n_clusters)


def omega_distribution(priors: Priors, n_clusters: int, n_features: int) -> dist.Distribution:
    """Prior of the subspace indicators, omega_sj ~ Bernoulli(q) (sec. 3, eq. (2)): independent cells,
    batch shape (S, P). An edit must keep one independent Bernoulli per cell (e.g. probabilities varying
    with the feature, ``Bernoulli(priors.q ** (1 + jnp.arange(n_features)))``)."""
    return dist.Bernoulli(probs=priors.q).expand([n_clusters, n_features])


def prototype_distribution(priors: Priors, n_obs: int, n_clusters: int) -> dist.Distribution:
    """Prior of the prototypes, p_s uniform over the N observations (sec. 3): batch shape (S,), values
    0..N-1. An edit must keep the clusters independent (any logits per cluster and observation), and the
    logits of observation i must not depend on N: the fast sampler evaluates this hook over its observations
    padded with inert rows and keeps the observations' part (the fit refuses an edit that breaks this)."""
    return dist.Categorical(logits=jnp.zeros(n_obs)).expand([n_clusters])


def sample_hyperparameters(priors: Priors) -> Priors:
    """``priors`` with each hyperprior field drawn as the site named after it (e.g. ``q``), the first lines of
    :func:`model` and :func:`collapsed_model`; a program that samples a field as a site of its own instead is
    refused by the sampler with the way to write it."""
    return hyperpriors.sample_hyperparameters(priors)


def subspace_and_prototype_prior(priors: Priors, n_obs: int, n_features: int, n_clusters: int):
    """The sites ``omega`` (S, P) and ``prototype`` (S,), drawn from :func:`omega_distribution` and
    :func:`prototype_distribution`: the prior sub-program shared by :func:`model` and :func:`collapsed_model`."""
    omega = numpyro.sample("omega", omega_distribution(priors, n_clusters, n_features).to_event(2))
    prototype = numpyro.sample("prototype", prototype_distribution(priors, n_obs, n_clusters).to_event(1))
    return omega, prototype


def value_mask(n_values) -> np.ndarray:
    """(P, V) booleans, True where value v < V_j exists for feature j (V = max V_j)."""
    n_values = np.asarray(n_values)
    return np.arange(int(n_values.max()))[None, :] < n_values[:, None]


def concentration_table(prototype_values, omega, n_values, priors: Priors):
    """g for every cluster, feature and value: shape (..., S, P, V), zero on padded values."""
    mask = value_mask(n_values)
    table = g(prototype_values, omega, jnp.arange(mask.shape[1]), priors)
    return jnp.where(mask, table, 0.0)


def log_multivariate_beta(concentration, mask=None):
    """log B(a) = sum_v log Gamma(a_v) - log Gamma(sum_v a_v) over the last axis, skipping masked-out v."""
    if mask is None:
        mask = jnp.ones(jnp.shape(concentration)[-1], bool)
    safe = jnp.where(mask, concentration, 1.0)
    return jnp.sum(jnp.where(mask, gammaln(safe), 0.0), -1) - gammaln(jnp.sum(jnp.where(mask, safe, 0.0), -1))


def log_polya(counts, concentration, mask=None):
    """log B(a + n) - log B(a): probability of one sequence of categorical draws with counts n when the
    probabilities ~ Dirichlet(a) are integrated out (the ratio in eq. (2))."""
    return log_multivariate_beta(concentration + counts, mask) - log_multivariate_beta(concentration, mask)


class PolyaCategorical(dist.Distribution):
    """Categorical tokens grouped by ``group``, each group's probabilities ~ Dirichlet(``concentration[group]``)
    integrated out: log p(value) = sum_groups log_polya(counts of the group's values, its concentration).

    ``group``: integer array of any shape (the event shape), entries in 0..G-1; ``concentration``: (G, K),
    zero where ``mask`` (G, K) is False. Values are in 0..K-1.
    """

    arg_constraints = {}
    pytree_data_fields = ("group", "concentration", "mask")

    def __init__(self, group, concentration, mask=None, *, validate_args=None):
        self.group = jnp.asarray(group)
        self.concentration = jnp.asarray(concentration)
        self.mask = jnp.ones(self.concentration.shape, bool) if mask is None else jnp.asarray(mask)
        super().__init__(batch_shape=(), event_shape=self.group.shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.concentration.shape[-1] - 1)

    def group_counts(self, value):
        """(G, K) number of tokens of each group taking each value."""
        counts = jnp.zeros(self.concentration.shape, jnp.int32)
        return counts.at[self.group.ravel(), jnp.asarray(value).ravel()].add(1)

    def log_prob(self, value):
        """log p(value): the sum over groups of :func:`log_polya` of the group's value counts."""
        return jnp.sum(log_polya(self.group_counts(value), self.concentration, self.mask))

    def sample(self, key, sample_shape=()):
        key_phi, key_value = jax.random.split(key)
        shape = tuple(sample_shape) + self.concentration.shape
        log_gamma = jax.random.loggamma(key_phi, jnp.where(self.mask, self.concentration, 1.0), shape)
        logits = jnp.where(self.mask, log_gamma, -jnp.inf)
        token_logits = jnp.take(logits, self.group, axis=-2)
        return jax.random.categorical(key_value, token_logits)


def resolve_n_values(x, n_values):
    """Number of values per feature (a concrete array): given, or 1 + the largest code seen in ``x``."""
    if n_values is None:
        return np.asarray(x).max(axis=0).astype(np.int64) + 1
    return np.asarray(n_values, np.int64)


def model(n_obs: int, n_values, n_clusters: int, priors: Priors | None = None, x=None):
    """The generative process of sec. 3: omega, prototype, phi, pi, z, x.

    ``n_values``: (P,) number of values of each feature. With ``x`` (N, P) observed, the prototype's
    values are the observation's, ``prototype_value = x[prototype]``.

    The process of sec. 3 is circular: the prototype is one of the observations the clusters generate.
    We read it as: draw each prototype's values uniformly, generate all observations, and condition on
    the event that observation p_s carries the values of prototype s. With x observed this only fixes
    ``prototype_value = x[prototype]`` (a constant factor), so integrating pi and phi out of this program
    gives exactly :func:`collapsed_model`. ``Predictive(model)`` draws the process before the
    conditioning; ``datasets.smiley_faces.conditioned_model`` is a program whose draws are exact draws of
    the conditioned process.
    """
    priors = sample_hyperparameters(priors or Priors())
    n_values = np.asarray(n_values, np.int64)
    n_features, mask = n_values.shape[0], value_mask(n_values)
    omega, prototype = subspace_and_prototype_prior(priors, n_obs, n_features, n_clusters)
    prototype_value = numpyro.sample(
        "prototype_value",
        dist.Categorical(logits=jnp.where(mask, 0.0, -jnp.inf)).expand([n_clusters, n_features]).to_event(2),
        obs=None if x is None else jnp.asarray(x)[prototype],
    )
    concentration = concentration_table(prototype_value, omega, n_values, priors)
    # Padded values get concentration 1 and are dropped below: the valid entries renormalised are
    # exactly Dirichlet(g over v < V_j) (aggregation property of the Dirichlet).
    phi = numpyro.sample("phi", dist.Dirichlet(jnp.where(mask, concentration, 1.0)).to_event(2))
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.asarray(z_concentration(priors, n_clusters))).expand([n_obs]).to_event(1))
    z = numpyro.sample(
        "z", dist.Categorical(probs=jnp.broadcast_to(pi[:, None, :], (n_obs, n_features, n_clusters))).to_event(2)
    )
    token_phi = phi[..., z, jnp.arange(n_features), :]
    token_phi = jnp.where(mask, token_phi, 0.0)
    token_phi = token_phi / token_phi.sum(-1, keepdims=True)
    numpyro.sample("x", dist.Categorical(probs=token_phi).to_event(2), obs=x)


def collapsed_model(x, n_clusters: int, priors: Priors | None = None, n_values=None):
    """:func:`model` with pi and phi integrated out: its ``log_density`` over (omega, prototype, z) is the
    exact target of the collapsed Gibbs sampler (eqs. (1), (2) and the prototype conditional).

    log p = sum_sj log Bernoulli(omega_sj; q) + const
            + sum_i log B(alpha/S + n_{.,i,.}) - log B(alpha/S)                    (pi integrated)
            + sum_sj log B(g_sj + n_{s,.,j,.}) - log B(g_sj),  g_sj = g(x_{p_s j}, omega_sj)   (phi integrated)
    """
    priors = sample_hyperparameters(priors or Priors())
    n_values = resolve_n_values(x, n_values)
    x = jnp.asarray(x)
    n_obs, n_features = x.shape
    omega, prototype = subspace_and_prototype_prior(priors, n_obs, n_features, n_clusters)
    rows = jnp.broadcast_to(jnp.arange(n_obs)[:, None], (n_obs, n_features))
    row_concentration = jnp.broadcast_to(jnp.asarray(z_concentration(priors, n_clusters)), (n_obs, n_clusters))
    z = numpyro.sample("z", PolyaCategorical(rows, row_concentration))
    concentration = concentration_table(x[prototype], omega, n_values, priors)
    mask = value_mask(n_values)
    cells = z * n_features + jnp.arange(n_features)
    numpyro.sample(
        "x",
        PolyaCategorical(cells, concentration.reshape(n_clusters * n_features, -1), np.tile(mask, (n_clusters, 1))),
        obs=x,
    )
