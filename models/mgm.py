"""Mind the Gap Model (Kim, Shah, Doshi-Velez 2015, sec. 2): priors and the generative process.

Data: N observations of D binary dimensions ``w[n, d]``. Dimensions are consolidated into groups by
logical formulas (feature extraction) and a group is *important* when its presence probabilities across
clusters have a gap (feature selection). With a weak-limit truncation of the Dirichlet process to
``n_groups`` (G) groups and K clusters the process (:func:`model`) is::

    pi_l ~ Dirichlet(alpha_l / G, ..., alpha_l / G)        l_d ~ Categorical(pi_l)          (dims)
    pi_f ~ Dirichlet(alpha_f)                              f_g ~ Categorical(pi_f)          (0 OR, 1 AND)
    y_g ~ Bernoulli(rho)                                   gamma_g ~ Beta(sigma1, sigma2)
    t_gk ~ Bernoulli(gamma_g)
    beta_gk ~ Beta(alpha_u, beta_u)                        if y_g = 0   (uni-modal)
            ~ Beta(alpha_b, beta_b) if t_gk = 0, Beta(alpha_t, beta_t) if t_gk = 1   if y_g = 1 (bi-modal)
    pi ~ Dirichlet(alpha_z, ..., alpha_z)                  z_n ~ Categorical(pi)
    i_ng ~ Bernoulli(beta_{g z_n})
    w_n. | i, f, l   by the AND/OR emission (eq. 2, or its relaxed OR, eq. 3).

The emission is :func:`group_log_likelihood`, which both the NumPyro program and the inference
(``interpretable_zoo.inference.mgm_vi``) use. The inference integrates ``pi_l`` and ``pi_f`` out; their
collapsed prior over a partition of the dimensions and its formulas is :func:`log_structure_prior`.

Editing priors: the coordinate-ascent updates follow :class:`Priors` (its defaults too) and the hooks
:func:`beta_parameters` and :func:`log_structure_prior`, which get the values as arrays (the compiled
search takes them as arguments, so a new value compiles nothing): use ``jnp`` and ``jax.scipy`` on them,
not ``math``. Any other edit of :func:`model` is refused: the updates are closed forms of this one program.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln
from numpyro.distributions import constraints

from interpretable_zoo.inference import hyperpriors

OR, AND = 0, 1
FORMULA_NAMES = ("OR", "AND")


@dataclass(frozen=True)
class Priors:
    """Hyperparameters of sec. 2 (the paper gives no values). Defaults make a gap a real gap: the bi-modal
    components Beta(1, 9) and Beta(9, 1) have means 0.1 and 0.9 and put only 2^-9 (0.2 %) of their mass
    beyond 0.5, while the uni-modal Beta(2, 2) peaks at 0.5.

    Attributes:
        alpha_l: DP concentration of the group assignments l_d (pi_l ~ DP(alpha_l), weak limit
            Dirichlet(alpha_l / G)). Larger values favour more, smaller groups (about
            alpha_l log(1 + D / alpha_l) groups a priori). Default 20: with few observations and many
            dimensions the prior's pull towards few groups competes with the data. At 1 (recipes, 56 x 147)
            the search merges rare ingredients into groups that carry no category, and a search started
            from the four categories ends far below one started from k-means; at 20 about as high. With
            many observations (USPS) the data dominate either way.
        alpha_f: Dirichlet concentration of the formula proportions pi_f over (OR, AND).
        rho: prior probability that a group is important, y_g ~ Bernoulli(rho).
        sigma1, sigma2: gamma_g ~ Beta(sigma1, sigma2), the share of clusters in the high mode of an
            important group (t_gk ~ Bernoulli(gamma_g)).
        alpha_u, beta_u: uni-modal Beta of beta_gk for an unimportant group (y_g = 0).
        alpha_b, beta_b: low ("bottom") component of the bi-modal mixture (y_g = 1, t_gk = 0).
        alpha_t, beta_t: high ("top") component of the bi-modal mixture (y_g = 1, t_gk = 1).
        alpha_z: symmetric Dirichlet concentration of the cluster proportions pi.
        s: probability that a member of a present OR group is 1 under the relaxed OR of eq. 3. Default
            2/3, the probability that a given member of a present two-member group shows under the exact
            OR of eq. 2 (uniform over the 3 non-empty configurations), the groups every merge forms first;
            1/2 is eq. 2's limit for large groups, and under it a merge of two dimensions pays only log 2
            per observation showing one of them, so that on USPS merges go on until the clusters lose
            what tells the digits apart.
    """

    alpha_l: float = 20.0
    alpha_f: tuple[float, float] = (1.0, 1.0)
    rho: float = 0.5
    sigma1: float = 1.0
    sigma2: float = 1.0
    alpha_u: float = 2.0
    beta_u: float = 2.0
    alpha_b: float = 1.0
    beta_b: float = 9.0
    alpha_t: float = 9.0
    beta_t: float = 1.0
    alpha_z: float = 1.0
    s: float = 2 / 3

    def __post_init__(self) -> None:
        hyperpriors.refuse_hyperpriors(
            self, "Mind the Gap's coordinate-ascent fit",
            "give it a number (to weigh values by evidence, compare the fits' ELBO over a grid of values)")
        positive = ("alpha_l", "sigma1", "sigma2", "alpha_u", "beta_u", "alpha_b", "beta_b", "alpha_t",
                    "beta_t", "alpha_z")  # fmt: skip
        for name in positive:
            value = getattr(self, name)
            if not (_is_number(value) and value > 0 and math.isfinite(value)):
                raise ValueError(f"priors.{name}: must be positive and finite, got {value!r}")
        alpha_f = () if isinstance(self.alpha_f, str) or not isinstance(self.alpha_f, Iterable) else tuple(self.alpha_f)
        if len(alpha_f) != 2 or not all(_is_number(a) and a > 0 and math.isfinite(a) for a in alpha_f):
            raise ValueError(f"priors.alpha_f: must be two positive finite numbers (OR, AND), got {self.alpha_f!r}")
        object.__setattr__(self, "alpha_f", tuple(float(a) for a in alpha_f))  # hashable: compiled searches key on it
        for name in ("rho", "s"):
            value = getattr(self, name)
            if not (_is_number(value) and 0 < value < 1):
                raise ValueError(f"priors.{name}: must lie strictly between 0 and 1, got {value!r}")

    def beta_components(self) -> tuple[tuple[float, float], ...]:
        """Beta parameters of beta_gk: uni-modal (y=0), bottom (y=1, t=0), top (y=1, t=1)."""
        return ((self.alpha_u, self.beta_u), (self.alpha_b, self.beta_b), (self.alpha_t, self.beta_t))


def _is_number(value) -> bool:
    """A real number (Python or NumPy), not a bool, a string or None."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def component_weights(y, t):
    """(..., 3) weights of beta_gk's Beta components (uni-modal, bottom, top) given y_g and t_gk (broadcast):
    (1 - y, y (1 - t), y t), one-hot for 0/1 values; for the probabilities q(y_g = 1), q(t_gk = 1) of a
    factorised q, the components' probabilities under q."""
    y, t = jnp.broadcast_arrays(y, t)
    return jnp.stack([1 - y, y * (1 - t), y * t], -1)


def beta_parameters(y, t, priors: Priors):
    """(..., 2) parameters of the Beta prior of beta_gk given y_g and t_gk: the uni-modal component when
    y_g = 0, the bottom (t_gk = 0) or top (t_gk = 1) one when y_g = 1. ``model`` draws beta_gk from it; the
    ELBO and its updates read it at the four values (y_g, t_gk) in {0, 1}^2 (int32, as ``model`` draws them)
    and weight them by q(y_g) q(t_gk), so an edit may be any function of the two binary values."""
    weights = component_weights(y, t)
    return weights @ jnp.asarray(priors.beta_components(), jnp.result_type(weights.dtype, float))


def group_log_likelihood(ones, size, present, formula, s, exact_or=False):
    """log p(w_{n, members of g} | i_ng, f_g, l) from the group's count of ones (eq. 2; eq. 3 if not exact_or).

    All arguments broadcast: ``ones`` c_ng, ``size`` m_g, ``present`` i_ng, ``formula`` f_g (OR 0, AND 1).
    Per observation n and group g with m_g member dimensions of which c_ng are 1 (eq. 2-3)::

        i_ng = 0:           every member is 0                      log p = 0 if c_ng = 0 else -inf
        i_ng = 1, AND:      every member is 1                      log p = 0 if c_ng = m_g else -inf
        i_ng = 1, OR exact: uniform over the 2^m_g - 1 non-empty configurations (eq. 2)
                                                                   log p = -log(2^m_g - 1) if c_ng > 0 else -inf
        i_ng = 1, OR relaxed (eq. 3): members independently 1 with probability s
                                                                   log p = c_ng log s + (m_g - c_ng) log(1 - s)
    """
    ones = jnp.asarray(ones)
    size = jnp.asarray(size, dtype=jnp.result_type(float))
    if exact_or:
        # log(2^m - 1) = m log 2 + log1p(-2^-m), stable for large m
        or_present = jnp.where(ones > 0, -(size * jnp.log(2.0) + jnp.log1p(-jnp.exp2(-size))), -jnp.inf)
    else:
        or_present = ones * jnp.log(s) + (size - ones) * jnp.log1p(-s)
    and_present = jnp.where(ones == size, 0.0, -jnp.inf)
    when_present = jnp.where(formula == AND, and_present, or_present)
    when_absent = jnp.where(ones == 0, 0.0, -jnp.inf)
    return jnp.where(present, when_present, when_absent)


def log_structure_prior(group_sizes, formulas, priors: Priors, n_groups: int):
    """log p(partition of the dimensions, formulas of its groups) with pi_l and pi_f integrated out.

    ``group_sizes`` (G',) member counts (0 for empty groups), ``formulas`` (G',) OR/AND codes (ignored
    for empty groups, whose formulas are integrated out); ``n_groups`` G, a number or a traced scalar
    array holding a whole number (the compiled search passes D = sum of the sizes, a float, so that fits of
    other numbers of dimensions share one program), with G' >= G slots given. With m occupied groups, D dimensions and
    a = alpha_l / G, summing the collapsed Dirichlet-categorical over the G! / (G - m)! labelings::

        log G!/(G-m)! + log Gamma(alpha_l) - log Gamma(alpha_l + D) + sum_g [log Gamma(a + n_g) - log Gamma(a)]

    and the Dirichlet-categorical over the formulas of the m occupied groups::

        log Gamma(A) - log Gamma(A + m) + sum_f [log Gamma(alpha_f + m_f) - log Gamma(alpha_f)],  A = sum alpha_f.
    """
    group_sizes = jnp.asarray(group_sizes)
    occupied = group_sizes > 0
    m = occupied.sum()
    n_dims = group_sizes.sum()
    a = priors.alpha_l / n_groups
    labelings = gammaln(n_groups + 1.0) - gammaln(n_groups - m + 1.0)
    partition = (
        gammaln(priors.alpha_l) - gammaln(priors.alpha_l + n_dims)
        + jnp.sum(jnp.where(occupied, gammaln(a + group_sizes) - gammaln(a), 0.0))
    )  # fmt: skip
    alpha_or, alpha_and = priors.alpha_f
    n_or = jnp.sum(occupied & (formulas == OR))
    n_and = jnp.sum(occupied & (formulas == AND))
    formula_term = (
        gammaln(alpha_or + alpha_and) - gammaln(alpha_or + alpha_and + m)
        + gammaln(alpha_or + n_or) - gammaln(alpha_or) + gammaln(alpha_and + n_and) - gammaln(alpha_and)
    )  # fmt: skip
    return labelings + partition + formula_term


class GroupEmission(dist.Distribution):
    """w_n. given present groups i_n. (N, G), formulas f (G,) and assignments l (D,): eq. 2 / eq. 3."""

    support = constraints.independent(constraints.boolean, 1)

    def __init__(self, present, formula, assignment, s, exact_or=False, validate_args=None):
        self.present = jnp.asarray(present)
        self.formula = jnp.asarray(formula)
        self.assignment = jnp.asarray(assignment)
        self.s = s
        self.exact_or = exact_or
        n_groups = self.formula.shape[-1]
        self._membership = jax.nn.one_hot(self.assignment, n_groups)  # (D, G)
        super().__init__(
            batch_shape=self.present.shape[:-1], event_shape=self.assignment.shape, validate_args=validate_args
        )

    def sample(self, key, sample_shape=()):
        present = jnp.broadcast_to(self.present, sample_shape + self.batch_shape + self.present.shape[-1:])
        dim_present = present[..., self.assignment]  # (..., D)
        dim_and = (self.formula == AND)[self.assignment]
        if not self.exact_or:
            prob = jnp.where(dim_and, 1.0, self.s)
            draw = jax.random.bernoulli(key, prob, dim_present.shape)
            return (dim_present & draw).astype(jnp.int32)

        # exact OR: uniform over non-empty configurations, by redrawing OR groups that came out empty
        def empty_groups(draw):
            ones = (dim_present & draw).astype(jnp.float32) @ self._membership
            occupied = self._membership.sum(0) > 0
            return (ones == 0) & present.astype(bool) & (self.formula == OR) & occupied

        def redraw(carry):
            key, draw = carry
            key, sub = jax.random.split(key)
            fresh = jax.random.bernoulli(sub, 0.5, draw.shape)
            redo = empty_groups(draw)[..., self.assignment]
            return key, jnp.where(redo, fresh, draw)

        key, sub = jax.random.split(key)
        first = jax.random.bernoulli(sub, 0.5, dim_present.shape) | dim_and
        _, draw = jax.lax.while_loop(lambda c: empty_groups(c[1]).any(), redraw, (key, first))
        return (dim_present & draw).astype(jnp.int32)

    def log_prob(self, value):
        """log p(w_n. | i_n., f, l): the sum over the occupied groups of :func:`group_log_likelihood`."""
        ones = jnp.asarray(value, dtype=jnp.float32) @ self._membership  # (..., G) c_ng
        size = self._membership.sum(0)
        cell = group_log_likelihood(ones, size, self.present.astype(bool), self.formula, self.s, self.exact_or)
        return jnp.sum(jnp.where(size > 0, cell, 0.0), axis=-1)


def model(n_obs, n_dims, n_clusters, priors: Priors = Priors(), n_groups=None, w=None, exact_or=False):
    """The generative process of sec. 2 with the DP truncated to ``n_groups`` (default ``n_dims``) groups.

    Sites: pi_l, pi_f, l (D,), f, y, gamma (G,), t, beta (K, G), pi (K,), z (N,), i (N, G), w (N, D).
    ``exact_or=False`` emits OR groups by the relaxed eq. 3 (the inference's model), True by eq. 2.

    ``t_gk`` is drawn for every group (it only matters when ``y_g = 1``); this leaves the marginal of
    ``beta`` unchanged and gives the variational family of sec. 3 its ``q(t_gk)`` for every group. An edit
    of this program other than of :class:`Priors` and the hooks (another family, a parameter written
    inline, a new site) is refused by ``fit_mgm`` with ``inference.target_check.ModelMismatchError`` naming
    the site; ``fit_mgm`` also checks that the ELBO's expected log prior of y, gamma, t and beta is this
    program's log density at point masses (``inference.mgm_vi.check_expected_log_prior``).
    """
    n_groups = n_dims if n_groups is None else n_groups
    pi_l = numpyro.sample("pi_l", dist.Dirichlet(jnp.full(n_groups, priors.alpha_l / n_groups)))
    pi_f = numpyro.sample("pi_f", dist.Dirichlet(jnp.asarray(priors.alpha_f)))
    with numpyro.plate("dims", n_dims):
        l = numpyro.sample("l", dist.Categorical(pi_l))
    with numpyro.plate("groups", n_groups, dim=-1):
        f = numpyro.sample("f", dist.Categorical(pi_f))
        y = numpyro.sample("y", dist.Bernoulli(priors.rho))
        gamma = numpyro.sample("gamma", dist.Beta(priors.sigma1, priors.sigma2))
        with numpyro.plate("clusters", n_clusters, dim=-2):
            t = numpyro.sample("t", dist.Bernoulli(gamma))
            parameters = beta_parameters(y, t, priors)
            beta = numpyro.sample("beta", dist.Beta(parameters[..., 0], parameters[..., 1]))
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.full(n_clusters, priors.alpha_z)))
    with numpyro.plate("obs", n_obs, dim=-1):
        z = numpyro.sample("z", dist.Categorical(pi))
        i = numpyro.sample("i", dist.Bernoulli(beta[z]).to_event(1))
        numpyro.sample("w", GroupEmission(i, f, l, priors.s, exact_or), obs=w)
