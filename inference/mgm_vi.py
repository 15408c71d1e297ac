"""Variational inference for the Mind the Gap Model (sec. 3): ELBO, coordinate ascent, agglomerative search.

Notation as in ``interpretable_zoo.models.mgm``; psi is the digamma function, B the Beta function. The
extraction variables (l, f, i) take point masses (:class:`Extraction`): a partition of the dimensions into
groups, one formula per group, and i_ng = SAT(g; w_n, f_g). The selection variables take the factorised
family of sec. 3 (:class:`VariationalParams`). The ELBO (:func:`elbo`) is the extraction's terms, the
global terms of pi and z, and a term L_g per occupied group (:func:`group_terms`). Coordinate ascent
updates each block to the exact maximiser of the ELBO in it, all others fixed: (U1) :func:`update_tau`,
(U2)-(U5) the blocks of each group (``_update_group_blocks``), (U6) :func:`update_nu`. Deterministic
annealing (Ueda & Nakano 1998; Katahira, Watanabe & Okada 2008) climbs the annealed objective F_b
(:func:`annealed_objective`) for inverse temperatures b rising to 1, with (U6b) in place of (U6).

Search, one restart (sec. 3, :func:`search_batch`): every dimension its own OR group, a k-means clustering as
q(z) (the paper's "vanilla k-means" behind the data-driven proposals), U1-U5 fitted to it, then annealing
over a geometric schedule of b. Then cluster moves, split-merge rounds (Ueda, Nakano, Ghahramani & Hinton
2000) at a fixed number of clusters (:func:`cluster_moves`); merge iterations, each scoring
``n_proposals`` merges of two groups exactly with nu fixed (:func:`evaluate_merge`) and accepting the best
non-overlapping set (:func:`select_merges`), until ``max_iter`` or until an iteration's ELBO gain falls
below ``rel_tol`` (the paper's 0.1) times the first iteration's gain (:class:`SearchConfig`); and cluster
moves on the final extraction. From the end of the annealing on, every step raises the ELBO. A data set
padded to size buckets with rows that are not observations and columns that are not dimensions has the
ELBO of its observations and dimensions alone (:func:`begin`), so fits of nearby sizes share the
compiled programs. The merge iterations run in compiled calls bounded in time, so that Ctrl-C is prompt.
"""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import digamma, entr, gammaln
from numpyro import handlers

from interpretable_zoo import compiled_hooks
from interpretable_zoo.inference import convergence
from interpretable_zoo.inference.target_check import ModelMismatchError
from interpretable_zoo.models import mgm
from interpretable_zoo.models.mgm import AND, OR, Priors, group_log_likelihood


class Extraction(NamedTuple):
    """Point-mass extraction: group slot of each dimension, formulas, and the group summaries of the data.

    The extraction variables (l, f, i) take point masses: a partition of the dimensions into groups (spread
    uniformly over the G!/(G-m)! labelings of its m groups, which the collapsed prior of
    ``log_structure_prior`` counts), one formula per group, and i_ng = SAT(g; w_n, f_g): OR present when a
    member is 1, AND present when all are. For the ELBO only the group summaries matter: I (N, G) = i, and
    c_ng the number of ones among the members of g in observation n.
    """

    assignment: jax.Array  # (D,) l_d
    formula: jax.Array  # (G,) f_g, OR 0 / AND 1
    sizes: jax.Array  # (G,) m_g, 0 for empty slots
    ones: jax.Array  # (N, G) c_ng
    present: jax.Array  # (N, G) I_ng = SAT(g; w_n, f_g), float
    observed: jax.Array  # (N,) 1.0 for an observation, 0.0 for a padding row (module docstring)


class VariationalParams(NamedTuple):
    """The factorised family of the selection variables (sec. 3)::

        q(y_g) = Bern(eta_g)   q(gamma_g) = Beta(ell_g1, ell_g2)   q(t_gk) = Bern(lam_gk)
        q(beta_gk) = Beta(phi_gk1, phi_gk2)   q(z_n) = Cat(nu_n)   q(pi) = Dirichlet(tau)

    Expected logs: Elb = E log beta = psi(phi1) - psi(phi1 + phi2), Elb1 = E log(1 - beta) = psi(phi2) -
    psi(phi1 + phi2); Elg, Elg1 likewise from ell; Elpi_k = psi(tau_k) - psi(sum tau).
    """

    nu: jax.Array  # (N, K) q(z_n)
    tau: jax.Array  # (K,) q(pi)
    phi: jax.Array  # (G, K, 2) q(beta_gk)
    lam: jax.Array  # (G, K) q(t_gk)
    eta: jax.Array  # (G,) q(y_g)
    ell: jax.Array  # (G, 2) q(gamma_g)
    active: jax.Array | None = None
    """(K,) bool, the clusters in use, or None for all. The others are padding, with nu = 0 there; they add
    nothing to the ELBO, so one compiled search serves every number of clusters up to K."""


def satisfied(ones, sizes, formula):
    """i = SAT(g; w, f_g) from group counts: OR present when c > 0, AND when c = m (empty slots absent)."""
    return (jnp.where(formula == AND, ones == sizes, ones > 0) & (sizes > 0)).astype(ones.dtype)


def make_extraction(W, assignment, formula, observed=None):
    """Group summaries of the data W (N, D) for assignments l (D,) into G = len(formula) slots; ``observed``
    (N,) marks the rows that are observations (None: all)."""
    membership = jax.nn.one_hot(assignment, formula.shape[0], dtype=W.dtype)
    ones = W @ membership
    sizes = membership.sum(0)
    observed = jnp.ones(W.shape[0], W.dtype) if observed is None else jnp.asarray(observed, W.dtype)
    return Extraction(assignment, formula, sizes, ones, satisfied(ones, sizes, formula), observed)


def singleton_extraction(W, observed=None, features=None):
    """The search's start: every dimension its own OR group; a padding column (``features`` (D,) 0) belongs
    to no group (None: every column is a dimension)."""
    n_dims = W.shape[1]
    slots = jnp.arange(n_dims)
    assignment = slots if features is None else jnp.where(features > 0, slots, n_dims)  # n_dims: no slot
    return make_extraction(W, assignment, jnp.full(n_dims, OR), observed)


def n_dimensions(ext: Extraction):
    """D, the number of dimensions (padding columns belong to no group): the model's G group slots."""
    return ext.sizes.sum()


def _beta_stats(params):
    """(E log x, E log(1 - x), entropy) of Beta(params[..., 0], params[..., 1])."""
    a, b = params[..., 0], params[..., 1]
    args = jnp.concatenate([params, params.sum(-1, keepdims=True)], -1)
    psi, lg = digamma(args), gammaln(args)
    entropy = lg[..., 0] + lg[..., 1] - lg[..., 2] - (a - 1) * psi[..., 0] - (b - 1) * psi[..., 1]
    entropy += (a + b - 2) * psi[..., 2]
    return psi[..., 0] - psi[..., 2], psi[..., 1] - psi[..., 2], entropy


def _log_beta_function(a, b):
    """log B(a, b) of hyperparameters."""
    return gammaln(a) + gammaln(b) - gammaln(a + b)


CORNER_Y, CORNER_T = (0, 0, 1, 1), (0, 1, 0, 1)
"""The four values (y_g, t_gk) of the corners c = 00, 01, 10, 11 at which the hook
``models.mgm.beta_parameters`` gives the Beta prior of beta_gk."""


class PriorTables(NamedTuple):
    """What the ELBO and its updates read of the prior of beta_gk and gamma_g: ``corners`` (4, 2) the
    Beta parameters (a_c, b_c) of beta_gk at the corners (y, t) of :data:`CORNER_Y`, :data:`CORNER_T`
    (the hook ``beta_parameters``, the function ``model`` draws beta_gk with), ``corner_log_b`` (4,) their
    log B(a_c, b_c), and ``gamma_log_b`` log B(sigma1, sigma2)."""

    corners: jax.Array
    corner_log_b: jax.Array
    gamma_log_b: jax.Array


def prior_tables(priors: Priors) -> PriorTables:
    """:class:`PriorTables` of ``priors`` (precomputed once per search for ``_SearchPriors``)."""
    if isinstance(priors, _SearchPriors):
        return priors.tables
    y, t = jnp.asarray(CORNER_Y, jnp.int32), jnp.asarray(CORNER_T, jnp.int32)
    corners = jnp.asarray(mgm.beta_parameters(y, t, priors), jnp.result_type(float))
    return PriorTables(corners, _log_beta_function(corners[:, 0], corners[:, 1]),
                       _log_beta_function(priors.sigma1, priors.sigma2))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _SearchPriors(Priors):
    """:class:`Priors` with traced values and their :class:`PriorTables` computed once per search: the
    search calls the group terms in many loop bodies, and each call would otherwise expand the hook and
    log Gamma anew in the compiled program."""

    tables: PriorTables | None = None


def _corner_log_densities(elb, elb1, priors: Priors):
    """(..., K, 4) E_c of (E1) at the corners, from E log beta and E log(1 - beta) (each (..., K))."""
    tables = prior_tables(priors)
    a, b = tables.corners[:, 0], tables.corners[:, 1]
    return (a - 1) * elb[..., None] + (b - 1) * elb1[..., None] - tables.corner_log_b


def _bernoulli_entropy(p):
    return entr(p) + entr(1 - p)


def _sum_clusters(x, active):
    """Sum over the last (cluster) axis, of the active clusters only."""
    return jnp.sum(x if active is None else jnp.where(active, x, 0.0), -1)


def _log_prior_y(eta, priors: Priors):
    return eta * jnp.log(priors.rho) + (1 - eta) * jnp.log1p(-priors.rho)


def _log_prior_gamma(elg, elg1, priors: Priors):
    return (priors.sigma1 - 1) * elg + (priors.sigma2 - 1) * elg1 - prior_tables(priors).gamma_log_b


def _log_prior_t(elg, elg1, lam):
    """(..., K) E log p(t_gk | gamma_g)."""
    return lam * elg[..., None] + (1 - lam) * elg1[..., None]


def _log_prior_beta(elb, elb1, lam, eta, priors: Priors):
    """(..., K) E log p(beta_gk | y_g, t_gk) = sum_c w_c E_c, as (1 - eta) (E_00 + lam (E_01 - E_00)) + eta
    ((1 - lam) E_10 + lam E_11): where the hook ignores t_gk given y_g = 0 (the paper's model) the first term
    is E_00 to the last bit."""
    e = _corner_log_densities(elb, elb1, priors)
    eta_k = eta[..., None]
    return (1 - eta_k) * (e[..., 0] + lam * (e[..., 1] - e[..., 0])) + eta_k * ((1 - lam) * e[..., 2] + lam * e[..., 3])


def expected_log_prior(elb, elb1, elg, elg1, lam, eta, priors: Priors, active=None) -> dict:
    """The ELBO's E_q log p of the sites y, gamma, t, beta of every group (leading dims of eta), by site,
    summed over the active clusters, from q's expectations Elb, Elb1 (..., K), Elg, Elg1 (...,) and
    q(t_gk = 1) = lam, q(y_g = 1) = eta. Each is affine in the expected logs and multilinear in lam and eta,
    so at a point (Elb = log beta, Elb1 = log(1 - beta), Elg = log gamma, ..., lam = t, eta = y) it is the
    log density of ``models.mgm.model`` at that point (:func:`check_expected_log_prior`). :func:`group_terms`
    adds the same terms."""
    return {
        "y": _log_prior_y(eta, priors),
        "gamma": _log_prior_gamma(elg, elg1, priors),
        "t": _sum_clusters(_log_prior_t(elg, elg1, lam), active),
        "beta": _sum_clusters(_log_prior_beta(elb, elb1, lam, eta, priors), active),
    }


def group_terms(phi, lam, eta, ell, n1, n0, priors: Priors, active=None):
    """L_g for every group (leading dims of eta), summed over the active clusters::

        L_g = eta log rho + (1 - eta) log(1 - rho)                                        E log p(y_g)
            + (sigma1 - 1) Elg + (sigma2 - 1) Elg1 - log B(sigma1, sigma2)                 E log p(gamma_g)
            + sum_k [lam Elg + (1 - lam) Elg1]                                            E log p(t_gk | gamma_g)
            + sum_k sum_c w_c E_c                                                         E log p(beta_gk | y, t), (E1)
            + sum_k [n1 Elb + n0 Elb1]                                                    E log p(i_.g | beta, z)
            + H[Bern(eta)] + H[Beta(ell)] + sum_k H[Bern(lam)] + sum_k H[Beta(phi)].

    n1, n0 are the expected present and absent counts (:func:`cluster_counts`) and Elb, Elb1, Elg, Elg1 the
    expected logs of :class:`VariationalParams`. For a Beta(a, b) density::

        E_q log Beta(beta; a, b) = (a - 1) Elb + (b - 1) Elb1 - log B(a, b)                               (E1)

    The prior of beta_gk is Beta(a_c, b_c) at the corner c = (y_g, t_gk) in {00, 01, 10, 11}, (a_c, b_c) =
    ``models.mgm.beta_parameters(y, t)`` (the hook ``model`` draws beta_gk with; by default (alpha_u, beta_u)
    for c = 00, 01, (alpha_b, beta_b) for 10 and (alpha_t, beta_t) for 11); E_c is (E1) at (a_c, b_c), and
    w_c = q(y_g, t_gk) = (1 - eta)(1 - lam), (1 - eta) lam, eta (1 - lam), eta lam.
    """
    elb, elb1, entropy_beta = _beta_stats(phi)
    elg, elg1, entropy_gamma = _beta_stats(ell)
    per_cluster = (
        _log_prior_t(elg, elg1, lam) + _log_prior_beta(elb, elb1, lam, eta, priors)
        + n1 * elb + n0 * elb1  # E log p(i_.g | beta, z)
        + _bernoulli_entropy(lam) + entropy_beta
    )  # fmt: skip
    log_prior = _log_prior_y(eta, priors) + _log_prior_gamma(elg, elg1, priors)
    return log_prior + _bernoulli_entropy(eta) + entropy_gamma + _sum_clusters(per_cluster, active)


EXPECTED_LOG_PRIOR_POINT = {
    "y": (0, 0, 1, 1),
    "t": ((0, 1, 0, 1), (1, 0, 1, 0)),
    "gamma": (0.2, 0.45, 0.7, 0.9),
    "beta": ((0.15, 0.4, 0.6, 0.85), (0.3, 0.55, 0.1, 0.95)),
}
"""Values of y_g, t_gk, gamma_g and beta_gk for 4 groups and 2 clusters at which
:func:`check_expected_log_prior` compares the ELBO with the program: (y_g, t_gk) takes every corner."""
EXPECTED_LOG_PRIOR_RTOL = 1e-4
"""Float32 rounding of a few log Gamma and log terms; a prior edit moves them by far more."""


def _expected_log_prior_gaps(priors: Priors) -> dict:
    """Per site (y, gamma, t, beta), the largest difference, relative to 1 + its size, between
    :func:`expected_log_prior` at the point masses of :data:`EXPECTED_LOG_PRIOR_POINT` and the site's log
    density in ``models.mgm.model`` there (its other sites fixed at a point of their support)."""
    point = {name: jnp.asarray(value, jnp.int32 if name in ("y", "t") else jnp.result_type(float))
             for name, value in EXPECTED_LOG_PRIOR_POINT.items()}  # fmt: skip
    n_clusters, n_groups = point["t"].shape
    fixed = {"pi_l": jnp.full(n_groups, 1.0 / n_groups), "pi_f": jnp.full(2, 0.5), "l": jnp.arange(n_groups),
             "f": jnp.zeros(n_groups, jnp.int32), "pi": jnp.full(n_clusters, 1.0 / n_clusters),
             "z": jnp.zeros(1, jnp.int32), "i": jnp.zeros((1, n_groups), jnp.int32)}  # fmt: skip
    program = handlers.seed(handlers.substitute(mgm.model, {**fixed, **point}), 0)
    trace = handlers.trace(program).get_trace(1, n_groups, n_clusters, priors, n_groups,
                                              w=jnp.zeros((1, n_groups), jnp.int32))  # fmt: skip
    program_terms = {}
    for site in ("y", "gamma", "t", "beta"):
        log_prob = trace[site]["fn"].log_prob(trace[site]["value"])
        program_terms[site] = log_prob.sum(0) if log_prob.ndim == 2 else log_prob  # (G,): clusters summed
    beta, gamma = point["beta"].T, point["gamma"]
    elbo_terms = expected_log_prior(jnp.log(beta), jnp.log1p(-beta), jnp.log(gamma), jnp.log1p(-gamma),
                                    point["t"].T.astype(beta.dtype), point["y"].astype(beta.dtype), priors)  # fmt: skip
    return {site: jnp.max(jnp.abs(elbo_terms[site] - value) / (1 + jnp.abs(value)))
            for site, value in program_terms.items()}


def check_expected_log_prior(priors: Priors) -> None:
    """Raise ModelMismatchError unless the ELBO's expected log prior of y, gamma, t and beta
    (:func:`expected_log_prior`, which the ELBO and the updates U2-U5 evaluate) equals, at point masses
    over every corner (y_g, t_gk), the log density of ``models.mgm.model``: an edit of the program that the
    ELBO does not read is refused rather than climbed. One compiled program per binding of the model file."""
    gaps = compiled_hooks.evaluate(mgm, _expected_log_prior_gaps, priors)
    for site, gap in gaps.items():
        if not float(gap) <= EXPECTED_LOG_PRIOR_RTOL:
            raise ModelMismatchError(
                f"models.mgm.model: the log density of site {site!r} differs from the ELBO's expected log prior "
                f"at point masses by up to {float(gap):.3g} (relative). MGM's coordinate ascent reads the prior of "
                "beta_gk from the hook beta_parameters(y, t, priors) at y, t in {0, 1}, and those of y, gamma and t "
                "from Priors (rho, sigma1, sigma2); write the edit there."
            )


def _dirichlet_stats(tau, active=None, alpha_z=1.0):
    """Over the active clusters of q(pi) = Dirichlet(tau): (Elpi (K,) = E log pi_k, log B(tau), and
    log Gamma(K alpha_z), the prior's normaliser, K the number of active clusters)."""
    n_clusters = tau.shape[0] if active is None else active.sum()
    total = _sum_clusters(tau, active)
    args = jnp.concatenate([tau, jnp.stack([total, n_clusters * alpha_z])])
    psi, lg = digamma(args), gammaln(args)
    elpi = psi[:-2] - psi[-2]
    return elpi, _sum_clusters(lg[:-2], active) - lg[-2], lg[-1]


def global_terms(nu, tau, priors: Priors, active=None):
    """E log p(pi) + sum_nk nu_nk Elpi_k + H[q(pi)] + H[q(z)], over the active clusters."""
    n_clusters = tau.shape[0] if active is None else active.sum()
    elpi, log_b, log_gamma_prior = _dirichlet_stats(tau, active, priors.alpha_z)
    log_p_pi = log_gamma_prior - n_clusters * gammaln(priors.alpha_z)
    log_p_pi += (priors.alpha_z - 1) * _sum_clusters(elpi, active)
    # H[Dirichlet(tau)] = log B(tau) + (total - K) psi(total) - sum_k (tau_k - 1) psi(tau_k) = log B(tau) - sum_k (tau_k - 1) Elpi_k
    entropy_pi = log_b - _sum_clusters((tau - 1) * elpi, active)
    return log_p_pi + _sum_clusters(nu.sum(0) * elpi, active) + entropy_pi + entr(nu).sum()


def _sum_observed(cells, observed):
    """Sum over the observations (axis 0) of per-observation terms (N, ...), padding rows left out."""
    return jnp.sum(jnp.where(observed.reshape(-1, *[1] * (cells.ndim - 1)) > 0, cells, 0.0), 0)


def group_emissions(ext: Extraction, priors: Priors, exact_or=False):
    """sum_n log p(w_{n,g} | i_ng, f_g) per group slot (G,); 0 for empty slots."""
    cells = group_log_likelihood(ext.ones, ext.sizes, ext.present > 0, ext.formula, priors.s, exact_or)
    return jnp.where(ext.sizes > 0, _sum_observed(cells, ext.observed), 0.0)


def cluster_counts(nu, present):
    """(n1, n0), each (G, K): expected present / absent counts of every group in every cluster."""
    n1 = (nu.T @ present).T
    return n1, nu.sum(0)[None, :] - n1


def extraction_terms(ext: Extraction, priors: Priors, exact_or=False):
    """The ELBO's terms that depend on the extraction only: log p(partition, f) + sum log p(w | i, f, l)."""
    structure = mgm.log_structure_prior(ext.sizes, ext.formula, priors, n_dimensions(ext))
    return structure + jnp.sum(group_emissions(ext, priors, exact_or))


def _selection_terms(params: VariationalParams, ext: Extraction, counts, priors: Priors):
    """The ELBO's remaining (global and group) terms, given ``counts`` = cluster_counts(params.nu, ext.present)."""
    groups = group_terms(params.phi, params.lam, params.eta, params.ell, *counts, priors, params.active)
    return global_terms(params.nu, params.tau, priors, params.active) + jnp.sum(jnp.where(ext.sizes > 0, groups, 0.0))


def elbo(params: VariationalParams, ext: Extraction, priors: Priors, exact_or=False):
    """The evidence lower bound::

        ELBO = log p(partition, f)                                   [log_structure_prior, pi_l, pi_f collapsed]
             + sum_g sum_n log p(w_{n,g} | i_ng, f_g)                 [group_log_likelihood, eq. 2/3; constant in q]
             + E log p(pi) + sum_nk nu_nk Elpi_k + H[q(pi)] + H[q(z)]   [global terms]
             + sum_g L_g(n1_g, n0_g)                                  [group terms, occupied groups only]

    where n1_gk = sum_n nu_nk I_ng, n0_gk = sum_n nu_nk (1 - I_ng) (:func:`cluster_counts`) and L_g is
    :func:`group_terms`. Empty groups carry no data: their selection variables keep their prior, adding
    exactly 0.
    """
    counts = cluster_counts(params.nu, ext.present)
    return extraction_terms(ext, priors, exact_or) + _selection_terms(params, ext, counts, priors)


# ---- coordinate-ascent updates (U1-U6); the group blocks act on any leading shape ----


def _update_phi(lam, eta, n1, n0, priors: Priors):
    """(U2) phi_gk = (sum_c w_c a_c + n1_gk, sum_c w_c b_c + n0_gk): the ELBO is linear in Elb, Elb1. The
    weights of the corners 00, 10, 11 as ``models.mgm.component_weights`` and the corner 01 as its
    difference from 00 (exactly 0 where the hook ignores t_gk given y_g = 0)."""
    corners = prior_tables(priors).corners
    eta_k = eta[..., None]
    prior = mgm.component_weights(eta_k, lam) @ corners[jnp.array([0, 2, 3])]
    prior += ((1 - eta_k) * lam)[..., None] * (corners[1] - corners[0])
    return prior + jnp.stack([n1, n0], -1)


def _update_lam(elb, elb1, eta, elg, elg1, priors: Priors):
    """(U3) logit lam = Elg - Elg1 + (1 - eta) (E_01 - E_00) + eta (E_11 - E_10)."""
    e = _corner_log_densities(elb, elb1, priors)
    eta_k = eta[..., None]
    return jax.nn.sigmoid((elg - elg1)[..., None] + (1 - eta_k) * (e[..., 1] - e[..., 0]) + eta_k * (e[..., 3] - e[..., 2]))


def _update_ell(lam, priors: Priors, active=None):
    """(U4) ell_g = (sigma1 + sum_k lam_gk, sigma2 + sum_k (1 - lam_gk)), over the active clusters."""
    return jnp.stack([priors.sigma1 + _sum_clusters(lam, active), priors.sigma2 + _sum_clusters(1 - lam, active)], -1)


def _update_eta(elb, elb1, lam, priors: Priors, active=None):
    """(U5) logit eta = logit rho + sum_k [(1 - lam) (E_10 - E_00) + lam (E_11 - E_01)], over the active
    clusters."""
    e = _corner_log_densities(elb, elb1, priors)
    logit_rho = jnp.log(priors.rho) - jnp.log1p(-priors.rho)
    gap = (1 - lam) * e[..., 2] + lam * e[..., 3] - (e[..., 0] + lam * (e[..., 1] - e[..., 0]))
    return jax.nn.sigmoid(logit_rho + _sum_clusters(gap, active))


def _update_group_blocks(params, counts, priors: Priors):
    """(U2)-(U5) in sweep order, given ``counts`` = cluster_counts(params.nu, present)."""
    phi = _update_phi(params.lam, params.eta, *counts, priors)
    elb, elb1, _ = _beta_stats(phi)
    elg, elg1, _ = _beta_stats(params.ell)
    lam = _update_lam(elb, elb1, params.eta, elg, elg1, priors)
    ell = _update_ell(lam, priors, params.active)
    eta = _update_eta(elb, elb1, lam, priors, params.active)
    return params._replace(phi=phi, lam=lam, ell=ell, eta=eta)


def update_tau(params, ext, priors):
    """(U1) tau_k = alpha_z + sum_n nu_nk."""
    return params._replace(tau=priors.alpha_z + params.nu.sum(0))


def cluster_logits(phi, tau, present, occupied, active=None):
    """Unnormalised log nu of (U6), (N, K); -inf for inactive clusters."""
    elb, elb1, _ = _beta_stats(phi)
    elb = jnp.where(occupied[:, None], elb, 0.0)
    elb1 = jnp.where(occupied[:, None], elb1, 0.0)
    elpi, _, _ = _dirichlet_stats(tau, active)
    logits = elpi + elb1.sum(0) + present @ (elb - elb1)
    return logits if active is None else jnp.where(active, logits, -jnp.inf)


def update_nu(params, ext, priors, inverse_temperature=1.0):
    """(U6); for an inverse temperature b < 1, the maximiser (U6b) of the annealed objective F_b
    (:func:`annealed_objective`)::

        log nu_nk = Elpi_k + sum_g [I_ng Elb_gk + (1 - I_ng) Elb1_gk] + const                             (U6)
        log nu_nk = b (Elpi_k + sum_g [I_ng Elb_gk + (1 - I_ng) Elb1_gk]) + const                         (U6b)

    At b = 1, U6b is U6. Padding rows keep nu = 0."""
    logits = cluster_logits(params.phi, params.tau, ext.present, ext.sizes > 0, params.active)
    return params._replace(nu=jax.nn.softmax(inverse_temperature * logits, -1) * ext.observed[:, None])


def annealed_objective(params, ext, priors, inverse_temperature, exact_or=False):
    """F_b = ELBO + (1 / b - 1) H[q(z)]: the entropy of q(z) weighted by the temperature 1 / b (the ELBO at
    b = 1), which deterministic annealing climbs for inverse temperatures b rising to 1 (:func:`anneal`).
    U1-U5 do not involve H[q(z)] and stay its block maximisers; in q(z) its maximiser is (U6b)
    (:func:`update_nu`)."""
    return elbo(params, ext, priors, exact_or) + (1 / inverse_temperature - 1) * entr(params.nu).sum()


def _sweep_with_counts(params, ext, priors, counts, inverse_temperature=1.0):
    """One sweep of (U1)-(U6) in order (U6b at ``inverse_temperature``) given the counts of the current nu;
    returns the new params and the counts of the new nu, so that a sweep and the ELBO after it share one
    (N, G) x (N, K) product."""
    params = update_tau(params, ext, priors)
    params = update_nu(_update_group_blocks(params, counts, priors), ext, priors, inverse_temperature)
    return params, cluster_counts(params.nu, ext.present)


def initial_params(nu, n_groups, priors: Priors, active=None) -> VariationalParams:
    """Group blocks at their prior means (eta = rho, lam = 1/2, ell = sigma); phi and tau come from the first sweep."""
    n_clusters = nu.shape[1]
    dtype = nu.dtype
    return VariationalParams(
        nu=nu,
        tau=jnp.full(n_clusters, priors.alpha_z, dtype) + nu.sum(0),
        phi=jnp.ones((n_groups, n_clusters, 2), dtype),
        lam=jnp.full((n_groups, n_clusters), 0.5, dtype),
        eta=jnp.full(n_groups, priors.rho, dtype),
        ell=jnp.tile(jnp.array([priors.sigma1, priors.sigma2], dtype), (n_groups, 1)),
        active=active,
    )


WARM_UP_SWEEPS = 20


def fit_groups_given_clusters(params, ext, priors, sweeps=WARM_UP_SWEEPS):
    """Sweeps of every block but q(z) (U1-U5): fits the selection variables to a starting clustering, so the
    first q(z) update does not see prior-mean presence probabilities (which pull everything into one cluster)."""
    params = update_tau(params, ext, priors)
    counts = cluster_counts(params.nu, ext.present)
    return jax.lax.fori_loop(0, sweeps, lambda _, params: _update_group_blocks(params, counts, priors), params)


def _varying_with(reference, tree):
    """``tree``, unchanged, but varying with the scalar ``reference`` under ``vmap``. A loop whose carry starts
    with a constant that its body makes vary (a vmapped loop condition makes all of it vary) is batched twice
    when vmapped, and each pass batches the nested loops of its body again; a carry that starts as it comes
    out of the body takes one pass (the search traces about twice as fast)."""
    same = reference == reference
    return jax.tree.map(lambda leaf: jnp.where(same, leaf, leaf), tree)


def run_cavi(params, ext, priors, *, tol, max_sweeps, exact_or=False):
    """Sweeps until the relative ELBO change is below ``tol`` or ``max_sweeps``; returns (params, elbo)."""
    constant = extraction_terms(ext, priors, exact_or)

    def sweep(params, counts):
        params, counts = _sweep_with_counts(params, ext, priors, counts)
        return params, counts, constant + _selection_terms(params, ext, counts, priors)

    def cond(carry):
        _, _, value, previous, sweeps = carry
        return (sweeps < max_sweeps) & (jnp.abs(value - previous) > tol * jnp.abs(value))

    def body(carry):
        params, counts, value, _, sweeps = carry
        params, counts, new_value = sweep(params, counts)
        return params, counts, new_value, value, sweeps + 1

    params, counts, value = sweep(params, cluster_counts(params.nu, ext.present))
    init = (params, counts, value, *_varying_with(value, (jnp.array(jnp.inf, value.dtype), jnp.array(1))))
    params, _, value, _, _ = jax.lax.while_loop(cond, body, init)
    return params, value


# ---- starts: k-means++ seeding and Lloyd iterations, then annealing ----


def _hamming(W, centre):
    """Hamming distance of every row of W (N, D) to a 0/1 vector (D,): the squared Euclidean distance."""
    return W @ (1 - centre) + (1 - W) @ centre


def kmeans_plus_plus(key, W, observed, active):
    """k-means++ seeding (Arthur & Vassilvitskii 2007): centre k is an observation drawn with probability
    proportional to its squared distance to the nearest earlier centre (uniform for the first, and when every
    observation is a centre); padding rows (``observed`` 0) are never drawn. Slot k draws with
    ``fold_in(key, k)`` and inactive slots do not count as centres, so the centres of the active prefix do not
    depend on the padding of the clusters. Returns (width, D)."""

    def pick(nearest, k):
        usable = jnp.isfinite(nearest).all() & (nearest.sum() > 0)  # inf before the first active centre
        index = jax.random.categorical(jax.random.fold_in(key, k), jnp.log(jnp.where(usable, nearest, observed)))
        nearest = jnp.where(active[k], jnp.minimum(nearest, _hamming(W, W[index])), nearest)
        return nearest, index

    start = jnp.where(observed > 0, jnp.inf, 0.0).astype(W.dtype)  # padding rows stay at 0
    _, indices = jax.lax.scan(pick, start, jnp.arange(active.shape[0]))
    return W[indices]


def nearest_centres(W, centres, active):
    """One-hot (N, width) of each observation's nearest active centre in squared Euclidean distance."""
    distance = (centres**2).sum(1) - 2 * W @ centres.T  # up to sum_d w_nd, the same for every centre
    return jax.nn.one_hot(jnp.argmin(jnp.where(active, distance, jnp.inf), 1), active.shape[0], dtype=W.dtype)


def kmeans(key, W, observed, active, iterations):
    """Hard k-means clustering (N, width) one-hot of the observations (padding rows: all 0): k-means++
    seeding, then ``iterations`` Lloyd steps (an emptied cluster keeps its centre)."""

    def assigned(centres):
        return nearest_centres(W, centres, active) * observed[:, None]

    def lloyd(centres, _):
        hard = assigned(centres)
        counts = hard.sum(0)[:, None]
        return jnp.where(counts > 0, hard.T @ W / jnp.maximum(counts, 1), centres), None

    centres, _ = jax.lax.scan(lloyd, kmeans_plus_plus(key, W, observed, active), None, length=iterations)
    return assigned(centres)


def soft_responsibilities(hard, observed, active):
    """nu from a hard clustering (N, K) one-hot: 0.9 on each observation's cluster, the remaining 0.1
    spread over the active clusters, 0 on the others and on padding rows."""
    return jnp.where(active, 0.9 * hard + 0.1 / active.sum(), 0.0) * observed[:, None]


def anneal(params, ext, priors, schedule, sweeps_per_stage):
    """Deterministic annealing (Ueda & Nakano 1998; Katahira et al. 2008): ``sweeps_per_stage`` sweeps of
    U1-U5 and U6b at each inverse temperature of ``schedule`` (increasing, below 1); each sweep raises F_b."""

    def stage(carry, inverse_temperature):
        def sweep(_, carry):
            params, counts = carry
            return _sweep_with_counts(params, ext, priors, counts, inverse_temperature)

        return jax.lax.fori_loop(0, sweeps_per_stage, sweep, carry), None

    (params, _), _ = jax.lax.scan(stage, (params, cluster_counts(params.nu, ext.present)), schedule)
    return params


# ---- split-merge moves between clusters (Ueda, Nakano, Ghahramani & Hinton 2000) ----


def _cluster_scores(params, ext):
    """(merge cost (K, K), split weight (K,)) from q(beta) of the occupied groups. A pair's merge cost is Ward's
    n_i n_j / (n_i + n_j) sum_g (p_gi - p_gj)^2 with p = E beta and n the expected sizes (+inf unless i < j,
    both active); a cluster's split weight is its size times the summed entropy of its group presences."""
    sizes = params.nu.sum(0)
    presence = jnp.where((ext.sizes > 0)[:, None], params.phi[..., 0] / params.phi.sum(-1), 0.0)
    squared = jnp.sum((presence[:, :, None] - presence[:, None, :]) ** 2, 0)
    ward = sizes[:, None] * sizes[None, :] / jnp.maximum(sizes[:, None] + sizes[None, :], 1e-12) * squared
    active = jnp.ones(sizes.shape, bool) if params.active is None else params.active
    index = jnp.arange(sizes.shape[0])
    pairs = active[:, None] & active[None, :] & (index[:, None] < index[None, :])
    entropy = jnp.sum(jnp.where((ext.sizes > 0)[:, None], _bernoulli_entropy(presence), 0.0), 0)
    return jnp.where(pairs, ward, jnp.inf), jnp.where(active, sizes * entropy, 0.0)


def split_merge_proposal(key, rank, params, ext, lloyd_steps=3):
    """nu after one split-merge move, and whether the move exists. The pair of clusters with the ``rank``-th
    smallest merge cost is merged (j into i); a cluster k other than j, drawn in proportion to its split
    weight (i's: the pair's), is split in two by a 2-means of its members' group presences (weighted by
    nu_k, seeded k-means++-style): one half stays in k, the other takes the freed slot j. With k = i the move
    re-partitions the pair."""
    merge_cost, split_weight = _cluster_scores(params, ext)
    width = merge_cost.shape[0]
    pair = jnp.argsort(merge_cost.ravel())[rank]
    i, j = pair // width, pair % width
    split_weight = split_weight.at[i].add(split_weight[j]).at[j].set(0.0)
    split_key, a_key, b_key = jax.random.split(key, 3)
    k = jax.random.categorical(split_key, jnp.log(split_weight))
    nu = params.nu.at[:, i].add(params.nu[:, j]).at[:, j].set(0.0)
    member = nu[:, k]
    present = ext.present
    a = present[jax.random.categorical(a_key, jnp.log(member))]
    b = present[jax.random.categorical(b_key, jnp.log(member * _hamming(present, a)))]

    def nearer_b(centres):
        return nearest_centres(present, centres, jnp.ones(2, bool))[:, 1]

    def lloyd(centres, _):
        to_b = nearer_b(centres)
        weights = jnp.stack([member * (1 - to_b), member * to_b])  # (2, N)
        means = weights @ present / jnp.maximum(weights.sum(1, keepdims=True), 1e-12)
        return jnp.where(weights.sum(1, keepdims=True) > 0, means, centres), None

    centres, _ = jax.lax.scan(lloyd, jnp.stack([a, b]), None, length=lloyd_steps)
    to_b = nearer_b(centres)
    nu = nu.at[:, j].set(member * to_b).at[:, k].set(member * (1 - to_b))
    exists = jnp.isfinite(merge_cost.ravel()[pair]) & (split_weight[k] > 0) & (member.sum() >= 2)
    return nu, exists


def split_merge(key, params, ext, priors, *, rounds, candidates, sweeps, exact_or=False):
    """``rounds`` rounds of split-merge moves. A round refines the current state and ``candidates`` - 1 moved ones
    (merge pairs of rank 0, 1, ...) by U1-U5 and ``sweeps`` sweeps each and keeps the one with the highest
    ELBO; as every update raises the ELBO, the kept state's is at least the current one's. Returns (params, ELBO)."""

    def refine(params, nu, exists):
        start = fit_groups_given_clusters(params._replace(nu=nu), ext, priors)
        moved, value = run_cavi(start, ext, priors, tol=0.0, max_sweeps=sweeps, exact_or=exact_or)
        return moved, jnp.where(exists, value, -jnp.inf)

    def one_round(params, key):
        keys = jax.random.split(key, candidates - 1)
        nus, exists = jax.vmap(lambda k, r: split_merge_proposal(k, r, params, ext))(keys, jnp.arange(candidates - 1))
        nus = jnp.concatenate([params.nu[None], nus])
        exists = jnp.concatenate([jnp.ones(1, bool), exists])
        moved, values = jax.vmap(refine, in_axes=(None, 0, 0))(params, nus, exists)
        best = jnp.argmax(values)
        return jax.tree.map(lambda leaf: leaf[best], moved), values[best]

    params, values = jax.lax.scan(one_round, params, jax.random.split(key, rounds))
    return params, values[-1]


# ---- proposals: one merged group, scored with nu fixed ----

LOCAL_SWEEPS = 25
"""Block sweeps over a merged group's (phi, lam, ell, eta), from two starts (eta near 0 and near 1)."""


def local_optimum(n1, n0, priors: Priors, active=None):
    """The group blocks (phi, lam, eta, ell) maximising L_g for counts n1, n0 (..., K), and L_g there.

    Block sweeps phi -> lam -> ell -> eta from two starts, eta near 0 and near 1, keeping the better.
    """
    dtype = n1.dtype
    n1, n0 = jnp.stack([n1, n1]), jnp.stack([n0, n0])  # (2, ..., K): one row per start
    eta = jnp.broadcast_to(jnp.array([0.01, 0.99], dtype).reshape((2,) + (1,) * (n1.ndim - 2)), n1.shape[:-1])
    lam = jnp.clip(n1 / jnp.maximum(n1 + n0, 1e-12), 0.05, 0.95)  # t starts where each cluster's rate lies
    ell = _update_ell(lam, priors, active)
    blocks = VariationalParams(None, None, _update_phi(lam, eta, n1, n0, priors), lam, eta, ell, active)
    blocks = jax.lax.fori_loop(0, LOCAL_SWEEPS, lambda _, b: _update_group_blocks(b, (n1, n0), priors), blocks)
    phi, lam, eta, ell = blocks.phi, blocks.lam, blocks.eta, blocks.ell
    values = group_terms(phi, lam, eta, ell, n1, n0, priors, active)
    high = values[1] > values[0]
    pick = lambda v: jnp.where(high.reshape(high.shape + (1,) * (v.ndim - 1 - high.ndim)), v[1], v[0])  # noqa: E731
    return (pick(phi), pick(lam), pick(eta), pick(ell)), jnp.maximum(values[0], values[1])


class Proposal(NamedTuple):
    a: jax.Array  # kept slot
    b: jax.Array  # emptied slot
    formula: jax.Array
    gain: jax.Array  # exact ELBO change of this merge alone (nu fixed)
    additive: jax.Array  # the part of gain that adds up over non-overlapping merges (all but the structure prior)
    group: tuple  # (phi, lam, eta, ell) of the merged group


def evaluate_merge(a, b, ext, nu, current_values, priors, exact_or, active=None):
    """Score merging slots a and b (ELBO change with nu fixed, best formula): the merged group's terms at
    their block optimum (:func:`local_optimum`, both formulas tried) replace the two groups' terms. This is
    an exact ELBO value of a member of the family, so an accepted merge never lowers the ELBO."""
    ones = ext.ones[:, a] + ext.ones[:, b]
    size = ext.sizes[a] + ext.sizes[b]
    formulas = jnp.array([OR, AND])
    present = jax.vmap(lambda f: satisfied(ones, size, f), out_axes=1)(formulas)  # (N, 2)
    cells = group_log_likelihood(ones[:, None], size, present > 0, formulas, priors.s, exact_or)
    n1 = present.T @ nu  # (2, K)
    groups, values = local_optimum(n1, nu.sum(0) - n1, priors, active)
    totals = values + _sum_observed(cells, ext.observed)
    best = jnp.argmax(totals)
    group = jax.tree.map(lambda v: v[best], groups)
    additive = totals[best] - current_values[a] - current_values[b]
    new_sizes = ext.sizes.at[a].set(size).at[b].set(0)
    new_formulas = ext.formula.at[a].set(formulas[best])
    n_groups = n_dimensions(ext)
    structure = mgm.log_structure_prior(new_sizes, new_formulas, priors, n_groups)
    structure -= mgm.log_structure_prior(ext.sizes, ext.formula, priors, n_groups)
    valid = (a != b) & (ext.sizes[a] > 0) & (ext.sizes[b] > 0)
    gain = jnp.where(valid, additive + structure, -jnp.inf)
    return Proposal(a, b, formulas[best], gain, additive, group)


def _random_pairs(key, occupied, count):
    """``count`` random pairs of distinct occupied slots, (count, 2)."""
    keys = jax.random.split(key, count)
    weights = occupied.astype(jnp.float32)
    return jax.vmap(lambda k: jax.random.choice(k, occupied.shape[0], (2,), replace=False, p=weights))(keys)


def _between_cluster_variance(present, kmeans_onehot):
    """Variance across k-means clusters (weighted by size) of the merged features' cluster means, (M,), over
    the observations (the rows of ``kmeans_onehot`` that hold a 1; padding rows hold none)."""
    counts = kmeans_onehot.sum(0)
    n_obs = counts.sum()
    means = (kmeans_onehot.T @ present) / jnp.maximum(counts, 1)[:, None]  # (Kkm, M)
    overall = kmeans_onehot.sum(1) @ present / n_obs
    return jnp.sum(counts[:, None] * (means - overall) ** 2, 0) / n_obs


class SearchConfig(NamedTuple):
    """Settings of the search (sec. 3-4) and of its cluster moves (:func:`cluster_moves`). ``rel_tol``: stop
    once an iteration gains less than this fraction of the first iteration's gain (the paper's 0.1);
    coordinate ascent runs until the relative ELBO change is below ``cavi_tol``, for at most ``max_sweeps``
    sweeps after cluster moves and ``merge_sweeps`` after a merge iteration (the next iteration goes on
    from there).

    The paper's "improved by less than 0.1 relative to the previous iteration" read as gain / ``|ELBO|`` <
    0.1 would stop every run after one iteration (gains are a few per cent of ``|ELBO|`` at most); relative
    to the first gain, 0.1 stops a search once its merges have become an order of magnitude less useful
    than at the start."""

    max_iter: int = 40
    n_proposals: int = 20
    max_rejections: int = 3
    n_candidates: int = 32
    rel_tol: float = 0.1
    cavi_tol: float = 1e-6
    max_sweeps: int = 200
    merge_sweeps: int = 30
    exact_or: bool = False
    kmeans_iterations: int = 10
    anneal_start: float = 0.05
    anneal_stages: int = 12
    anneal_sweeps: int = 5
    split_merge_rounds: int = 4
    split_merge_candidates: int = 4
    split_merge_sweeps: int = 10

    def anneal_schedule(self) -> tuple[float, ...]:
        """Inverse temperatures rising geometrically from ``anneal_start`` towards 1 (1 itself excluded)."""
        return tuple(self.anneal_start ** (1 - s / self.anneal_stages) for s in range(self.anneal_stages))


def propose(key, ext, params, kmeans_onehot, priors, config: SearchConfig):
    """One iteration's ``n_proposals`` merge proposals of two groups: data-driven (the pair among
    ``n_candidates`` random candidates whose merged feature varies most across the k-means clusters) until
    ``max_rejections`` of them were rejected, then random."""
    n1, n0 = cluster_counts(params.nu, ext.present)
    current = group_terms(params.phi, params.lam, params.eta, params.ell, n1, n0, priors, params.active)
    current = current + group_emissions(ext, priors, config.exact_or)
    occupied = ext.sizes > 0

    def step(rejections, key):
        candidates_key, random_key = jax.random.split(key)
        candidates = _random_pairs(candidates_key, occupied, config.n_candidates)
        merged = satisfied(ext.ones[:, candidates[:, 0]] + ext.ones[:, candidates[:, 1]], 1.0, OR)
        best = candidates[jnp.argmax(_between_cluster_variance(merged, kmeans_onehot))]
        data_driven = rejections < config.max_rejections
        pair = jnp.where(data_driven, best, _random_pairs(random_key, occupied, 1)[0])
        proposal = evaluate_merge(pair[0], pair[1], ext, params.nu, current, priors, config.exact_or, params.active)
        rejections = rejections + (data_driven & ~(proposal.gain > 0))
        return rejections, proposal

    _, proposals = jax.lax.scan(step, 0, jax.random.split(key, config.n_proposals))
    return proposals


def select_merges(proposals: Proposal, ext, priors):
    """The best non-overlapping set: greedy by gain, then the prefix with the largest exact ELBO change.

    Returns (accepted mask over proposals, total ELBO change of the accepted set).
    """
    n_groups = n_dimensions(ext)
    order = jnp.argsort(-proposals.gain)
    base = mgm.log_structure_prior(ext.sizes, ext.formula, priors, n_groups)

    def step(carry, index):
        used, sizes, formulas, additive, total = carry
        a, b = proposals.a[index], proposals.b[index]
        take = (proposals.gain[index] > 0) & ~used[a] & ~used[b]
        new_sizes = sizes.at[a].add(sizes[b]).at[b].set(0)
        new_formulas = formulas.at[a].set(proposals.formula[index])
        sizes = jnp.where(take, new_sizes, sizes)
        formulas = jnp.where(take, new_formulas, formulas)
        used = jnp.where(take, used.at[a].set(True).at[b].set(True), used)
        additive = additive + jnp.where(take, proposals.additive[index], 0.0)
        total = jnp.where(take, additive + mgm.log_structure_prior(sizes, formulas, priors, n_groups) - base, total)
        return (used, sizes, formulas, additive, total), (take, total)

    zero = jnp.zeros((), proposals.gain.dtype)
    init = (jnp.zeros(ext.sizes.shape, bool), ext.sizes, ext.formula, zero, zero)
    _, (taken, totals) = jax.lax.scan(step, init, order)
    best = jnp.argmax(totals)
    best_total = totals[best]
    accept_sorted = taken & (jnp.arange(order.shape[0]) <= best) & (best_total > 0)
    accepted = jnp.zeros_like(accept_sorted).at[order].set(accept_sorted)
    return accepted, jnp.where(best_total > 0, best_total, zero)


def apply_merges(proposals: Proposal, accepted, ext, params):
    """Merge every accepted pair (slot b into slot a) and give slot a the merged group's blocks."""

    def step(carry, inputs):
        ext, params = carry
        proposal, take = inputs
        a, b = proposal.a, proposal.b
        ones = ext.ones.at[:, a].add(ext.ones[:, b]).at[:, b].set(0)
        sizes = ext.sizes.at[a].add(ext.sizes[b]).at[b].set(0)
        formula = ext.formula.at[a].set(proposal.formula).at[b].set(OR)
        assignment = jnp.where(ext.assignment == b, a, ext.assignment)
        merged = Extraction(assignment, formula, sizes, ones, satisfied(ones, sizes, formula), ext.observed)
        phi, lam, eta, ell = proposal.group
        merged_params = params._replace(
            phi=params.phi.at[a].set(phi), lam=params.lam.at[a].set(lam),
            eta=params.eta.at[a].set(eta), ell=params.ell.at[a].set(ell),
        )  # fmt: skip
        keep = lambda new, old: jnp.where(take, new, old)  # noqa: E731
        return (jax.tree.map(keep, merged, ext), jax.tree.map(keep, merged_params, params)), None

    (ext, params), _ = jax.lax.scan(step, (ext, params), (proposals, accepted))
    return ext, params


class SearchResult(NamedTuple):
    ext: Extraction
    params: VariationalParams
    elbo: jax.Array
    trace: jax.Array  # (max_iter + 2,) ELBO after the start, after each iteration and after the final cluster moves
    n_iterations: jax.Array


def cluster_moves(key, params, ext, priors, config: SearchConfig):
    """Split-merge rounds, then coordinate ascent to convergence; returns (params, ELBO)."""
    params, _ = split_merge(key, params, ext, priors, rounds=config.split_merge_rounds,
                            candidates=config.split_merge_candidates, sweeps=config.split_merge_sweeps,
                            exact_or=config.exact_or)  # fmt: skip
    return run_cavi(params, ext, priors, tol=config.cavi_tol, max_sweeps=config.max_sweeps, exact_or=config.exact_or)


def kmeans_start(key, W, observed, active, config: SearchConfig):
    """The k-means clustering (N, K) one-hot that the restart with PRNG key ``key`` starts from."""
    return kmeans(jax.random.fold_in(key, 0), W, observed, active, config.kmeans_iterations)


class SearchState(NamedTuple):
    """One restart between the compiled calls of :func:`search_batch`: the extraction and variational
    parameters, the ELBO ``value`` now, the ``trace`` of ELBOs up to index ``iteration`` (exclusive), the
    trace index ``first`` of the first merge iteration and that iteration's gain (the stopping rule's unit),
    whether the stopping rule ended the merges (``done``), and the k-means start the proposals rank by."""

    ext: Extraction
    params: VariationalParams
    value: jax.Array
    first_gain: jax.Array
    trace: jax.Array
    iteration: jax.Array
    first: jax.Array
    done: jax.Array
    kmeans_onehot: jax.Array


def merging_finished(done, iteration, first, max_iter: int):
    """Whether a run's merge iterations are over: the stopping rule (``done``), or ``max_iter`` of them since
    trace index ``first`` (traced or NumPy values of a :class:`SearchState`)."""
    return done | (iteration >= first + max_iter)


def begin(key, W, observed, features, active, *, priors: Priors, config: SearchConfig) -> SearchState:
    """The start of a restart (sec. 3): every dimension its own OR group, :func:`kmeans_start`, U1-U5 fitted
    to it and deterministic annealing up to b = 1. One dimension has nothing to merge (``done``).

    ``observed`` (N,) and ``features`` (D,) mark the rows of W that are observations and its columns that are
    dimensions (the others are padding); ``active`` (K,) bool marks the clusters in use (the number of
    clusters is ``active.sum()``). A row that is not an observation has nu = 0, adds nothing to any sum over
    observations and is never a k-means centre; a column that is not a dimension (zeros) belongs to no
    group, and the structure prior counts the dimensions (G = D) from the group sizes. A data set padded
    with such rows and columns to size buckets has the ELBO of its observations and dimensions alone, and
    fits of nearby sizes share compiled programs (the random draws of the search, e.g. k-means++'s, depend
    on the padded sizes)."""
    ext = singleton_extraction(W, observed, features)
    kmeans_onehot = kmeans_start(key, W, ext.observed, active, config)
    params = initial_params(soft_responsibilities(kmeans_onehot, ext.observed, active), W.shape[1], priors, active)
    params = fit_groups_given_clusters(params, ext, priors)
    params = anneal(params, ext, priors, jnp.asarray(config.anneal_schedule(), W.dtype), config.anneal_sweeps)
    zero = jnp.zeros((), W.dtype)
    trace = jnp.full(config.max_iter + 2, jnp.nan, W.dtype)
    start = jnp.zeros((), jnp.int32)
    return SearchState(ext, params, zero, zero, trace, start, start, ~(n_dimensions(ext) > 1), kmeans_onehot)


def moves_phase(key, state: SearchState, phase, priors, config: SearchConfig) -> SearchState:
    """Cluster moves (:func:`cluster_moves`) of phase 0 (after the start) or 1 (after the merges), with the
    ELBO they reach as the trace's next entry; merge iterations start after it."""
    params, value = cluster_moves(jax.random.fold_in(key, 1 + phase), state.params, state.ext, priors, config)
    iteration = state.iteration + 1
    return state._replace(params=params, value=value, trace=state.trace.at[state.iteration].set(value),
                          iteration=iteration, first=iteration)  # fmt: skip


def merge_iterations(key, state: SearchState, stop, priors, config: SearchConfig) -> SearchState:
    """Merge iterations (proposals, the best non-overlapping set, coordinate ascent) of one run, until
    ``config.max_iter`` of them, the stopping rule, or trace index ``stop`` (so that a call is bounded)."""

    def cond(state):
        return ~merging_finished(state.done, state.iteration, state.first, config.max_iter) & (state.iteration < stop)

    def body(state):
        ext, params, value, first_gain, trace, iteration, first, _, kmeans_onehot = state
        proposals = propose(jax.random.fold_in(key, iteration), ext, params, kmeans_onehot, priors, config)
        accepted, _ = select_merges(proposals, ext, priors)
        ext, params = apply_merges(proposals, accepted, ext, params)
        params, new_value = run_cavi(params, ext, priors, tol=config.cavi_tol, max_sweeps=config.merge_sweeps,
                                     exact_or=config.exact_or)  # fmt: skip
        gain = new_value - value
        first_gain = jnp.where(iteration == first, gain, first_gain)
        done = ~(gain > config.rel_tol * first_gain)
        return SearchState(ext, params, new_value, first_gain, trace.at[iteration].set(new_value), iteration + 1,
                           first, done, kmeans_onehot)  # fmt: skip

    return jax.lax.while_loop(cond, body, state)


RUN_COPIES = 3
"""Copies of a run's state that a search holds at once (loop carries in and out, and updates), for
:func:`search_bytes`."""


def search_bytes(n_obs: int, n_dims: int, n_clusters: int, config: SearchConfig) -> int:
    """Estimated bytes of one restart of the search (:func:`search_batch`) on padded (N, D) data with K
    cluster slots, from its float32 arrays: the extraction's (N, G = D) group summaries and nu (N, K) with
    the groups' (G, K) parameters, and the ELBO trace of ``max_iter`` + 2 entries, :data:`RUN_COPIES`
    times; an iteration's ``n_proposals`` merges, each with its group's (K,) parameters; and the
    (``n_candidates``, N) merged features that rank candidate pairs."""
    state = 2 * n_obs * n_dims + 2 * n_obs * n_clusters + 4 * n_dims * n_clusters + config.max_iter + 2
    proposals = config.n_proposals * (8 + 4 * n_clusters)
    candidates = 2 * config.n_candidates * n_obs
    return 4 * (RUN_COPIES * state + proposals + candidates)


CALL_SECONDS = 2.0
"""Seconds that a compiled call of merge iterations should last at most, at the measured pace. A
KeyboardInterrupt waits for the call in flight, so this bounds how long Ctrl-C takes (a call runs at least
one iteration)."""


def search_batch(keys, W, observed, features, active, *, priors: Priors, config: SearchConfig,
                 on_merges=None) -> SearchResult:
    """The search (sec. 3) for a batch of restarts, vmapped: keys (B, 2) and active (B, K), one row per run
    (restarts, and numbers of clusters padded to one width K), on the data W (N, D) whose rows ``observed``
    (N,) are observations and whose columns ``features`` (D,) are dimensions (the others padding, see
    :func:`begin`); results stacked on a leading axis B, on the host. Each run: :func:`begin`, cluster moves
    (:func:`moves_phase` 0), :func:`merge_iterations` until the stopping rule, and cluster moves on the
    final extraction (phase 1).

    The merge iterations run in compiled calls of at most :data:`CALL_SECONDS` at the measured pace, so
    that Ctrl-C is prompt; the calls change no result, and ``on_merges`` (if given) is called with the number
    of iterations each call ran (the restarts not yet stopped iterate in step). Each program serves every
    batch of the same shapes, whatever the data, prior values, seeds and numbers of observations, dimensions
    and clusters (up to N, D and K); they are traced again when a hook of the model file is replaced in a
    running session."""
    hooks = (mgm.beta_parameters, mgm.log_structure_prior)
    values = compiled_hooks.prior_values(priors)
    states = _begin_batch(keys, W, observed, features, active, values, hooks=hooks, config=config)
    states = _moves_batch(keys, states, 0, values, hooks=hooks, config=config)
    per_iteration = None

    def message(left, _, per_unit):
        return (f"MGM: max_iter={config.max_iter} merge iterations of n_proposals={config.n_proposals} proposals "
                f"are projected to take at most {convergence.format_seconds(left)} more, at "
                f"{convergence.format_seconds(per_unit)} an iteration as timed on the last; Ctrl-C stops the "
                "search after the call in flight (one iteration at least).")

    # at most: rel_tol may stop the restarts before max_iter
    projection = convergence.TimeProjection(config.max_iter, message, stacklevel=3)
    while True:
        done, iteration, first = jax.device_get((states.done, states.iteration, states.first))
        if merging_finished(done, iteration, first, config.max_iter).all():
            break
        count = 1 if per_iteration is None else int(min(max(CALL_SECONDS / per_iteration, 1), config.max_iter))
        started = time.perf_counter()
        states = _merge_batch(keys, states, int(iteration.max()) + count, values, hooks=hooks, config=config)
        ran = int(jax.device_get(states.iteration).max() - iteration.max())  # the restarts not stopped, in step
        elapsed = max(time.perf_counter() - started, 1e-9)
        per_iteration = elapsed / ran
        projection.record(elapsed, ran)
        if on_merges is not None:
            on_merges(ran)
    # on the host at once: slicing device arrays would compile one small program per operation
    final = jax.device_get(_moves_batch(keys, states, 1, values, hooks=hooks, config=config))
    return SearchResult(final.ext, final.params, final.value, final.trace, final.iteration - 2)


def _search_priors(prior_values, hooks):
    """The search's priors from their traced values (``hooks``, the model file's hook functions the search
    calls, only key the compiled programs)."""
    tables = prior_tables(compiled_hooks.priors_with(Priors, prior_values))
    return compiled_hooks.priors_with(_SearchPriors, {**prior_values, "tables": tables})


@partial(jax.jit, static_argnames=("hooks", "config"))
def _begin_batch(keys, W, observed, features, active, prior_values, *, hooks, config: SearchConfig) -> SearchState:
    priors = _search_priors(prior_values, hooks)
    return jax.vmap(lambda key, active: begin(key, W, observed, features, active, priors=priors, config=config))(
        keys, active
    )


@partial(jax.jit, static_argnames=("hooks", "config"))
def _moves_batch(keys, states, phase, prior_values, *, hooks, config: SearchConfig) -> SearchState:
    priors = _search_priors(prior_values, hooks)
    return jax.vmap(lambda key, state: moves_phase(key, state, phase, priors, config))(keys, states)


@partial(jax.jit, static_argnames=("hooks", "config"))
def _merge_batch(keys, states, stop, prior_values, *, hooks, config: SearchConfig) -> SearchState:
    priors = _search_priors(prior_values, hooks)
    return jax.vmap(lambda key, state: merge_iterations(jax.random.fold_in(key, 3), state, stop, priors, config))(
        keys, states
    )
