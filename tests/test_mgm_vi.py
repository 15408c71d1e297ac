"""MGM variational inference: the ELBO and its coordinate-ascent updates against exact computations.

- every CAVI block update never lowers the ELBO (random data, random states, two prior settings), nor, with
  the annealed q(z) update, the annealed objective F_b;
- on tiny data the ELBO of every extraction is below the exact log evidence, computed independently here
  by enumeration of (l, f, z, i) and closed-form Beta integrals (checked against numerical quadrature);
- each block update equals the numerical optimum of the ELBO in its block (the annealed q(z) update: of F_b),
  found by SciPy's L-BFGS-B on the jitted ELBO gradient;
- the ELBO equals a Monte Carlo estimate of E_q[log p - log q] with log p from the NumPyro program
  (the model file is the single source of truth), and a deliberately wrong prior fails that check;
- the search's merge bookkeeping: an accepted set's predicted ELBO change is the real one;
- the starts and cluster moves: k-means++ / k-means ignore padding clusters and find planted clusters;
  split-merge repairs a stuck clustering and never lowers the ELBO, reporting the ELBO of what it returns.
"""

import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
import scipy.special
import scipy.stats
from jax import enable_x64
from numpyro.infer.util import log_density

from interpretable_zoo.inference import mgm_vi as vi
from interpretable_zoo.models import mgm
from interpretable_zoo.models.mgm import AND, OR, Priors

OTHER_PRIORS = Priors(alpha_l=2.5, alpha_f=(2.0, 0.5), rho=0.3, sigma1=2.0, sigma2=0.7, alpha_u=3.0, beta_u=1.5,
                      alpha_b=0.8, beta_b=6.0, alpha_t=5.0, beta_t=1.2, alpha_z=0.6, s=0.35)  # fmt: skip


# the block updates (U2)-(U5) one at a time, and a sweep of all six in order, as the search's fused sweep
# runs them


# library functions under jit in these tests: one compiled program per shape instead of one per operation
elbo = jax.jit(vi.elbo, static_argnames=("priors", "exact_or"))
run_cavi = jax.jit(vi.run_cavi, static_argnames=("priors", "tol", "max_sweeps", "exact_or"))
fit_groups_given_clusters = jax.jit(vi.fit_groups_given_clusters, static_argnames=("priors", "sweeps"))
select_merges = jax.jit(vi.select_merges, static_argnames=("priors",))
apply_merges = jax.jit(vi.apply_merges)


def update_phi(params, ext, priors):
    n1, n0 = vi.cluster_counts(params.nu, ext.present)
    return params._replace(phi=vi._update_phi(params.lam, params.eta, n1, n0, priors))


def update_lam(params, ext, priors):
    elb, elb1, _ = vi._beta_stats(params.phi)
    elg, elg1, _ = vi._beta_stats(params.ell)
    return params._replace(lam=vi._update_lam(elb, elb1, params.eta, elg, elg1, priors))


def update_ell(params, ext, priors):
    return params._replace(ell=vi._update_ell(params.lam, priors, params.active))


def update_eta(params, ext, priors):
    elb, elb1, _ = vi._beta_stats(params.phi)
    return params._replace(eta=vi._update_eta(elb, elb1, params.lam, priors, params.active))


CAVI_UPDATES = tuple(
    jax.jit(update, static_argnames="priors")
    for update in (vi.update_tau, update_phi, update_lam, update_ell, update_eta, vi.update_nu)
)
annealed_objective = jax.jit(vi.annealed_objective, static_argnames=("priors", "exact_or"))


def annealed_nu_update(inverse_temperature):
    """(U6b) at this inverse temperature, under jit."""
    return jax.jit(partial(vi.update_nu, inverse_temperature=inverse_temperature), static_argnames="priors")


def cavi_sweep(params, ext, priors):
    for update in CAVI_UPDATES:
        params = update(params, ext, priors)
    return params


def random_state(rng, n_obs, n_groups, n_clusters):
    nu = rng.dirichlet(np.ones(n_clusters), n_obs)
    return vi.VariationalParams(
        nu=jnp.asarray(nu),
        tau=jnp.asarray(rng.uniform(0.5, 5, n_clusters)),
        phi=jnp.asarray(rng.uniform(0.3, 6, (n_groups, n_clusters, 2))),
        lam=jnp.asarray(rng.uniform(0.05, 0.95, (n_groups, n_clusters))),
        eta=jnp.asarray(rng.uniform(0.05, 0.95, n_groups)),
        ell=jnp.asarray(rng.uniform(0.3, 5, (n_groups, 2))),
    )


def data_with_an_and_group(rng, n_obs, n_dims):
    """Random 0/1 data whose first two columns are equal (so {0, 1} can be an AND group)."""
    W = (rng.random((n_obs, n_dims)) < 0.45).astype(float)
    W[:, 1] = W[:, 0]
    return jnp.asarray(W)


@pytest.mark.parametrize("inverse_temperature", [1.0, 0.3], ids=["elbo", "annealed"])
@pytest.mark.parametrize("priors", [Priors(), OTHER_PRIORS], ids=["default", "other"])
def test_every_cavi_update_never_decreases_the_elbo(priors, inverse_temperature):
    """Each update (U1-U6) never lowers the ELBO; at an inverse temperature b < 1, U1-U5 and U6b never lower the
    annealed objective F_b that deterministic annealing climbs."""
    rng = np.random.default_rng(1)
    updates = CAVI_UPDATES[:-1] + (annealed_nu_update(inverse_temperature),)
    with enable_x64():
        for trial in range(3):
            W = data_with_an_and_group(rng, 30, 7)
            assignment = jnp.array([0, 0, 2, 2, 5, 2, 6])
            formula = jnp.array([AND, OR, OR, OR, OR, OR, OR])
            ext = vi.make_extraction(W, assignment, formula)
            params = random_state(rng, 30, 7, 3)
            previous = float(annealed_objective(params, ext, priors, inverse_temperature))
            assert np.isfinite(previous)
            for _ in range(6):
                for update in updates:
                    params = update(params, ext, priors)
                    value = float(annealed_objective(params, ext, priors, inverse_temperature))
                    assert value >= previous - 1e-9 * abs(previous), (trial, update, previous, value)
                    previous = value


def pad_clusters(params, width, rng):
    """``params`` with clusters appended up to ``width``, inactive (nu = 0) and with arbitrary blocks."""
    n_groups, n_clusters = params.lam.shape
    extra = width - n_clusters
    return vi.VariationalParams(
        nu=jnp.concatenate([params.nu, jnp.zeros((params.nu.shape[0], extra))], 1),
        tau=jnp.concatenate([params.tau, jnp.asarray(rng.uniform(0.5, 5, extra))]),
        phi=jnp.concatenate([params.phi, jnp.asarray(rng.uniform(0.3, 6, (n_groups, extra, 2)))], 1),
        lam=jnp.concatenate([params.lam, jnp.asarray(rng.uniform(0.05, 0.95, (n_groups, extra)))], 1),
        eta=params.eta,
        ell=params.ell,
        active=jnp.arange(width) < n_clusters,
    )


def test_padded_clusters_change_nothing_and_fused_sweeps_equal_the_updates():
    """Inactive (padding) clusters leave the ELBO and every update of the active ones unchanged; the search's
    fused sweep (shared counts) equals the six updates in order; run_cavi's ELBO is ``elbo``."""
    priors = OTHER_PRIORS  # alpha_z != 1: the Dirichlet normaliser depends on the number of active clusters
    rng = np.random.default_rng(6)
    with enable_x64():
        W = data_with_an_and_group(rng, 30, 7)
        ext = vi.make_extraction(W, jnp.array([0, 0, 2, 2, 5, 2, 6]), jnp.array([AND, OR, OR, OR, OR, OR, OR]))
        params = random_state(rng, 30, 7, 3)
        padded = pad_clusters(params, 5, rng)
        assert float(elbo(padded, ext, priors)) == pytest.approx(float(elbo(params, ext, priors)), rel=1e-12)
        for _ in range(3):
            params, padded = cavi_sweep(params, ext, priors), cavi_sweep(padded, ext, priors)
            np.testing.assert_allclose(padded.nu[:, :3], params.nu, rtol=1e-10)
            np.testing.assert_allclose(padded.tau[:3], params.tau, rtol=1e-10)
            np.testing.assert_allclose(padded.phi[:, :3], params.phi, rtol=1e-10)
            np.testing.assert_allclose(padded.lam[:, :3], params.lam, rtol=1e-10)
            np.testing.assert_allclose(np.asarray(padded.nu)[:, 3:], 0.0)
            np.testing.assert_allclose(padded.eta, params.eta, rtol=1e-10)
            np.testing.assert_allclose(padded.ell, params.ell, rtol=1e-10)
            assert float(elbo(padded, ext, priors)) == pytest.approx(float(elbo(params, ext, priors)), rel=1e-12)
        fused, counts = vi._sweep_with_counts(padded, ext, priors, vi.cluster_counts(padded.nu, ext.present))
        reference = cavi_sweep(padded, ext, priors)
        for got, want in zip(jax.tree.leaves(fused), jax.tree.leaves(reference)):
            np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(counts, vi.cluster_counts(reference.nu, ext.present), rtol=1e-12)
        swept, value = run_cavi(padded, ext, priors, tol=0.0, max_sweeps=4)
        assert float(value) == pytest.approx(float(elbo(swept, ext, priors)), rel=1e-12)


# ---- exact log evidence by enumeration (independent of the library) ----


def log_beta(a, b):
    return scipy.special.betaln(a, b)


def cell_likelihoods(column_ones, size, formula, priors, present):
    """p(w_{n,g} | i_ng = present) per row, from the emission definitions of eq. 2 / eq. 3 (relaxed OR)."""
    if not present:
        return (column_ones == 0).astype(float)
    if formula == AND:
        return (column_ones == size).astype(float)
    return priors.s**column_ones * (1 - priors.s) ** (size - column_ones)


def cluster_integral(l1, l0, a, b):
    """int Beta(beta; a, b) prod_n [beta l1_n + (1 - beta) l0_n] d beta, expanding over i in {0,1}^n."""
    total = 0.0
    for i in itertools.product((0, 1), repeat=len(l1)):
        i = np.array(i, bool)
        weight = np.prod(np.where(i, l1, l0))
        if weight > 0:
            total += weight * math.exp(log_beta(a + i.sum(), b + (~i).sum()) - log_beta(a, b))
    return total


def group_marginal(l1, l0, z, n_clusters, priors):
    """p(w_g | z, f_g, l) with i, beta, t, y, gamma integrated out."""
    comps = priors.beta_components()
    A = np.array([[cluster_integral(l1[z == k], l0[z == k], a, b) for k in range(n_clusters)] for a, b in comps])
    unimodal = np.prod(A[0])
    bimodal = 0.0
    for t in itertools.product((0, 1), repeat=n_clusters):
        t = np.array(t, bool)
        weight = np.prod(np.where(t, A[2], A[1]))
        bimodal += weight * math.exp(
            log_beta(priors.sigma1 + t.sum(), priors.sigma2 + (~t).sum()) - log_beta(priors.sigma1, priors.sigma2)
        )
    return (1 - priors.rho) * unimodal + priors.rho * bimodal


def log_dirichlet_categorical(counts, alpha):
    counts, alpha = np.asarray(counts, float), np.asarray(alpha, float)
    return (
        math.lgamma(alpha.sum()) - math.lgamma(alpha.sum() + counts.sum())
        + np.sum([math.lgamma(a + c) - math.lgamma(a) for a, c in zip(alpha, counts)])
    )  # fmt: skip


def exact_log_evidence(W, n_clusters, priors, extraction=None):
    """log p(w) of the relaxed-OR model with G = D groups, by enumeration of l, f, z (and i inside).

    With ``extraction`` = (partition as a set of frozensets, formula of each block), only the labelings
    (l, f) of that extraction count and i is fixed to SAT: log p(w, extraction, i = SAT).
    """
    W = np.asarray(W)
    n_obs, n_dims = W.shape
    n_groups = n_dims
    cache = {}
    terms = []
    for l in itertools.product(range(n_groups), repeat=n_dims):
        l = np.array(l)
        sizes = np.bincount(l, minlength=n_groups)
        log_l = log_dirichlet_categorical(sizes, np.full(n_groups, priors.alpha_l / n_groups))
        blocks = {g: frozenset(np.flatnonzero(l == g).tolist()) for g in np.flatnonzero(sizes)}
        if extraction is not None and set(blocks.values()) != set(extraction):
            continue
        for f in itertools.product((OR, AND), repeat=n_groups):
            if extraction is not None and any(extraction[blocks[g]] != f[g] for g in blocks):
                continue
            log_f = log_dirichlet_categorical(np.bincount(f, minlength=2), priors.alpha_f)
            for z in itertools.product(range(n_clusters), repeat=n_obs):
                z = np.array(z)
                log_z = log_dirichlet_categorical(np.bincount(z, minlength=n_clusters), np.full(n_clusters, priors.alpha_z))
                log_w = 0.0
                for g in np.flatnonzero(sizes):
                    key = (tuple(np.flatnonzero(l == g)), f[g], tuple(z))
                    if key not in cache:
                        ones = W[:, l == g].sum(1)
                        l1 = cell_likelihoods(ones, sizes[g], f[g], priors, True)
                        l0 = cell_likelihoods(ones, sizes[g], f[g], priors, False)
                        if extraction is not None:  # i = SAT(g; w_n, f_g)
                            sat = ones == sizes[g] if f[g] == AND else ones > 0
                            l1, l0 = np.where(sat, l1, 0.0), np.where(sat, 0.0, l0)
                        cache[key] = group_marginal(l1, l0, z, n_clusters, priors)
                    log_w += math.log(cache[key]) if cache[key] > 0 else -math.inf
                terms.append(log_l + log_f + log_z + log_w)
    return scipy.special.logsumexp(terms)


def test_closed_form_integrals_match_numerical_quadrature():
    l1, l0 = np.array([0.3, 0.6, 0.2]), np.array([1.0, 0.0, 1.0])
    a, b = OTHER_PRIORS.alpha_t, OTHER_PRIORS.beta_t
    numeric, _ = scipy.integrate.quad(
        lambda x: scipy.stats.beta.pdf(x, a, b) * np.prod(x * l1 + (1 - x) * l0), 0, 1, epsabs=1e-13
    )
    assert cluster_integral(l1, l0, a, b) == pytest.approx(numeric, rel=1e-8)

    # the whole group marginal: Gauss-Legendre over (gamma, beta_0, beta_1); the default priors' integer
    # Beta parameters make the integrands polynomials, integrated exactly by 40 nodes per axis
    priors = Priors()
    z = np.array([0, 1, 1])
    x, weights = np.polynomial.legendre.leggauss(40)
    x, weights = (x + 1) / 2, weights / 2
    likelihood = np.stack([np.prod(x[:, None] * l1[z == k] + (1 - x[:, None]) * l0[z == k], 1) for k in (0, 1)])

    def beta_pdf(a, b):
        return scipy.stats.beta.pdf(x, a, b)

    unimodal = np.prod([np.sum(weights * beta_pdf(priors.alpha_u, priors.beta_u) * likelihood[k]) for k in (0, 1)])
    top = [np.sum(weights * beta_pdf(priors.alpha_t, priors.beta_t) * likelihood[k]) for k in (0, 1)]
    bottom = [np.sum(weights * beta_pdf(priors.alpha_b, priors.beta_b) * likelihood[k]) for k in (0, 1)]
    gamma_density = beta_pdf(priors.sigma1, priors.sigma2)
    bimodal = np.sum(weights * gamma_density * np.prod([x * top[k] + (1 - x) * bottom[k] for k in (0, 1)], 0))
    numeric = (1 - priors.rho) * unimodal + priors.rho * bimodal
    assert group_marginal(l1, l0, z, 2, priors) == pytest.approx(numeric, rel=1e-10)


def partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for smaller in partitions(rest):
        for i in range(len(smaller)):
            yield smaller[:i] + [[first] + smaller[i]] + smaller[i + 1 :]
        yield [[first]] + smaller


def best_elbo(ext, priors, n_clusters, rng, n_starts=6):
    """The best converged ELBO over random starts, for one extraction."""
    starts = [random_state(rng, ext.ones.shape[0], ext.formula.shape[0], n_clusters) for _ in range(n_starts)]
    starts = jax.tree.map(lambda *leaves: jnp.stack(leaves), *starts)
    return float(converged_elbos(starts, ext, priors).max())


@partial(jax.jit, static_argnames="priors")
def converged_elbos(starts, ext, priors):
    return jax.vmap(lambda params: run_cavi(params, ext, priors, tol=1e-12, max_sweeps=2000)[1])(starts)


@pytest.mark.parametrize("priors", [Priors(), OTHER_PRIORS], ids=["default", "other"])
@pytest.mark.parametrize(
    "rows", [[[1, 1, 0], [1, 1, 0], [0, 0, 1], [0, 0, 1]], [[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]]], ids=["and", "or"]
)
def test_elbo_of_every_extraction_is_below_the_exact_log_evidence(rows, priors):
    rng = np.random.default_rng(2)
    W = np.array(rows, float)
    n_clusters = 2
    log_evidence = exact_log_evidence(W, n_clusters, priors)
    elbos, restricted = [], []
    with enable_x64():
        for partition in partitions([0, 1, 2]):
            assignment = np.zeros(3, int)
            for g, members in enumerate(partition):
                assignment[members] = g
            for formulas in itertools.product((OR, AND), repeat=len(partition)):
                formula = np.full(3, OR)
                formula[: len(partition)] = formulas
                ext = vi.make_extraction(jnp.asarray(W), jnp.asarray(assignment), jnp.asarray(formula))
                elbos.append(best_elbo(ext, priors, n_clusters, rng))
                extraction = {frozenset(block): f for block, f in zip(partition, formulas)}
                restricted.append(exact_log_evidence(W, n_clusters, priors, extraction))
    elbos, restricted = np.array(elbos), np.array(restricted)
    assert np.all(elbos <= log_evidence + 1e-9), (elbos.max(), log_evidence)
    # per extraction: below log p(w, extraction, i = SAT). The gap is the mean field's: q(beta_gk) is one
    # Beta where the posterior mixes Beta(1, 9), Beta(9, 1) and Beta(2, 2) modes over (y_g, t_gk), and q(z)
    # picks one of the K! label permutations; a bound on it catches gross errors (constants are checked
    # exactly by the Monte Carlo test below).
    assert np.array_equal(np.isfinite(elbos), np.isfinite(restricted))
    finite = np.isfinite(elbos)
    assert np.all(elbos[finite] <= restricted[finite] + 1e-9), np.c_[elbos, restricted]
    assert np.all(elbos[finite] > restricted[finite] - 5.0), np.c_[elbos, restricted]


# ---- each block update is the numerical optimum of its block ----

ANNEALED = 0.4
"""Inverse temperature of the annealed nu block (U6b)."""

BLOCKS = {
    # name: (update, to unconstrained, from unconstrained, inverse temperature of the objective)
    "tau": (CAVI_UPDATES[0], jnp.log, jnp.exp, 1.0),
    "phi": (CAVI_UPDATES[1], jnp.log, jnp.exp, 1.0),
    "lam": (CAVI_UPDATES[2], jax.scipy.special.logit, jax.nn.sigmoid, 1.0),
    "ell": (CAVI_UPDATES[3], jnp.log, jnp.exp, 1.0),
    "eta": (CAVI_UPDATES[4], jax.scipy.special.logit, jax.nn.sigmoid, 1.0),
    "nu": (CAVI_UPDATES[5], jnp.log, lambda u: jax.nn.softmax(u, -1), 1.0),
    "nu_annealed": (annealed_nu_update(ANNEALED), jnp.log, lambda u: jax.nn.softmax(u, -1), ANNEALED),
}


@pytest.mark.parametrize("block", list(BLOCKS))
def test_block_update_equals_the_numerical_optimum_of_its_block(block):
    """Each update is the optimum of its block (U6b: of the annealed objective F_b), found here by SciPy's L-BFGS-B."""
    update, forward, backward, inverse_temperature = BLOCKS[block]
    name = block.removesuffix("_annealed")
    rng = np.random.default_rng(3)
    priors = OTHER_PRIORS
    with enable_x64():
        W = data_with_an_and_group(rng, 12, 5)
        ext = vi.make_extraction(W, jnp.array([0, 0, 1, 1, 3]), jnp.array([AND, OR, OR, OR, OR]))
        params = random_state(rng, 12, 5, 3)
        objective = partial(annealed_objective, ext=ext, priors=priors, inverse_temperature=inverse_temperature)
        cavi_value = float(objective(update(params, ext, priors)))

        def negative_elbo(u):
            return -objective(params._replace(**{name: backward(u)}))

        u = forward(getattr(params, name))
        value_and_grad = jax.jit(jax.value_and_grad(negative_elbo))

        def scipy_objective(flat):
            value, grad = value_and_grad(jnp.asarray(flat).reshape(u.shape))
            return float(value), np.asarray(grad, dtype=np.float64).ravel()

        solution = scipy.optimize.minimize(scipy_objective, np.asarray(u, dtype=np.float64).ravel(), jac=True,
                                           method="L-BFGS-B", options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10})
        u = jnp.asarray(solution.x).reshape(u.shape)
        numeric_value = -float(value_and_grad(u)[0])
        start_value = float(objective(params))
    assert numeric_value > start_value  # the ascent moved
    assert cavi_value >= numeric_value - 1e-7 * abs(numeric_value)
    assert cavi_value == pytest.approx(numeric_value, rel=1e-6, abs=1e-5)
    optimum = getattr(update(params, ext, priors), name)
    mask = np.ones(np.shape(optimum), bool)
    if name in ("phi", "lam", "ell", "eta"):  # empty group slots do not enter the ELBO
        occupied = np.asarray(ext.sizes > 0)
        mask = np.broadcast_to(occupied.reshape((-1,) + (1,) * (mask.ndim - 1)), mask.shape)
    np.testing.assert_allclose(np.asarray(backward(u))[mask], np.asarray(optimum)[mask], rtol=2e-3, atol=2e-4)


# ---- the ELBO against the NumPyro program (single source of truth) ----


def monte_carlo_elbo(params, ext, W, priors_model, n_samples, key):
    """mean over q of [log p(theta, w) - log q(theta)] + log(G!/(G-m)!), log p from ``mgm.model``'s log_density."""
    import numpyro.distributions as dist

    n_obs, n_dims = W.shape
    n_groups = ext.formula.shape[0]
    n_clusters = params.tau.shape[0]
    sizes = np.asarray(ext.sizes)
    pi_l = (priors_model.alpha_l / n_groups + sizes) / (priors_model.alpha_l + n_dims)
    counts_f = np.bincount(np.asarray(ext.formula)[sizes > 0], minlength=2)
    pi_f = (np.asarray(priors_model.alpha_f) + counts_f) / (sum(priors_model.alpha_f) + counts_f.sum())

    def log_joint(y, gamma, t, beta, pi, z):
        values = dict(pi_l=pi_l, pi_f=pi_f, l=ext.assignment, f=ext.formula, y=y, gamma=gamma, t=t, beta=beta,
                      pi=pi, z=z, i=ext.present.astype(jnp.int32))  # fmt: skip
        return log_density(mgm.model, (n_obs, n_dims, n_clusters, priors_model), {"w": W}, values)[0]

    @jax.jit  # one program instead of hundreds of single-operation ones
    def log_p_minus_log_q(key):
        keys = jax.random.split(key, 6)
        y = dist.Bernoulli(params.eta).sample(keys[0], (n_samples,))
        gamma = dist.Beta(params.ell[:, 0], params.ell[:, 1]).sample(keys[1], (n_samples,))
        t = dist.Bernoulli(params.lam.T).sample(keys[2], (n_samples,))  # (S, K, G)
        beta = dist.Beta(params.phi[..., 0].T, params.phi[..., 1].T).sample(keys[3], (n_samples,))
        pi = dist.Dirichlet(params.tau).sample(keys[4], (n_samples,))
        z = dist.Categorical(params.nu).sample(keys[5], (n_samples,))
        log_q = (
            dist.Bernoulli(params.eta).log_prob(y).sum(-1)
            + dist.Beta(params.ell[:, 0], params.ell[:, 1]).log_prob(gamma).sum(-1)
            + dist.Bernoulli(params.lam.T).log_prob(t).sum((-1, -2))
            + dist.Beta(params.phi[..., 0].T, params.phi[..., 1].T).log_prob(beta).sum((-1, -2))
            + dist.Dirichlet(params.tau).log_prob(pi)
            + dist.Categorical(params.nu).log_prob(z).sum(-1)
        )
        # log p(l, f) = log p(l, f, pi_l, pi_f) - log p(pi_l, pi_f | l, f) at any (pi_l, pi_f)
        log_conditional = dist.Dirichlet(priors_model.alpha_l / n_groups + jnp.asarray(sizes)).log_prob(pi_l)
        log_conditional += dist.Dirichlet(jnp.asarray(priors_model.alpha_f) + counts_f).log_prob(pi_f)
        return jax.vmap(log_joint)(y, gamma, t, beta, pi, z) - log_conditional - log_q

    m = int((sizes > 0).sum())
    labelings = math.lgamma(n_groups + 1) - math.lgamma(n_groups - m + 1)
    samples = np.asarray(log_p_minus_log_q(key))
    return samples.mean() + labelings, samples.std() / math.sqrt(n_samples)


@pytest.mark.parametrize("model_priors, should_match", [(Priors(), True), (Priors(alpha_u=4.0, beta_u=1.0), False)],
                         ids=["same-priors", "wrong-prior-control"])  # fmt: skip
def test_elbo_equals_monte_carlo_over_the_numpyro_program(model_priors, should_match):
    rng = np.random.default_rng(4)
    with enable_x64():
        W = data_with_an_and_group(rng, 6, 3)
        # every group slot occupied (no empty groups), one AND group
        ext = vi.make_extraction(W, jnp.array([0, 1, 2]), jnp.array([AND, OR, OR]))
        params = random_state(rng, 6, 3, 2)
        params = jax.jit(cavi_sweep, static_argnums=2)(params, ext, Priors())
        analytic = float(elbo(params, ext, Priors()))
        estimate, se = monte_carlo_elbo(params, ext, W, model_priors, 20_000, jax.random.PRNGKey(0))
    z_score = (estimate - analytic) / se
    if should_match:
        assert abs(z_score) < 4, (estimate, analytic, se)
    else:
        assert abs(z_score) > 10, (estimate, analytic, se)


# ---- the search's bookkeeping ----


def test_accepted_merges_change_the_elbo_by_their_predicted_gain():
    rng = np.random.default_rng(5)
    priors = Priors()
    config = vi.SearchConfig(n_proposals=12)
    with enable_x64():
        W = data_with_an_and_group(rng, 40, 9)
        W = W.at[:, 3].set(jnp.maximum(W[:, 2], W[:, 3]))
        ext = vi.singleton_extraction(W)
        params = random_state(rng, 40, 9, 3)
        params, before = run_cavi(params, ext, priors, tol=1e-10, max_sweeps=500)
        kmeans = jax.nn.one_hot(jnp.asarray(rng.integers(0, 3, 40)), 3)
        propose = jax.jit(vi.propose, static_argnames=("priors", "config"))
        proposals = propose(jax.random.PRNGKey(1), ext, params, kmeans, priors, config)
        accepted, gain = select_merges(proposals, ext, priors)
        merged_ext, merged_params = apply_merges(proposals, accepted, ext, params)
        after = elbo(merged_params, merged_ext, priors)
        finite = np.flatnonzero(np.isfinite(np.asarray(proposals.gain)))[:4]
        singles = []
        for j in finite:
            single_ext, single_params = apply_merges(proposals, jnp.arange(12) == j, ext, params)
            singles.append(float(elbo(single_params, single_ext, priors)))
    assert int(accepted.sum()) >= 1
    assert float(gain) > 0
    assert float(after) == pytest.approx(float(before) + float(gain), abs=1e-8)
    assert np.allclose(np.array(singles) - float(before), np.asarray(proposals.gain)[finite], atol=1e-8)


# ---- starts and cluster moves ----


def planted_clusters(rng, n_per_cluster=30, n_clusters=3, width=6):
    """0/1 data of well-separated clusters: cluster c shows its own ``width`` dimensions with probability 0.95,
    the others with probability 0.05. Returns (W (N, n_clusters * width), labels)."""
    labels = np.repeat(np.arange(n_clusters), n_per_cluster)
    own = np.repeat(np.eye(n_clusters), width, axis=1)[labels]
    return (rng.random(own.shape) < np.where(own > 0, 0.95, 0.05)).astype(float), labels


def same_partition(labels, truth):
    """Whether two labelings are the same partition (up to renaming)."""
    pairs = set(zip(labels.tolist(), truth.tolist()))
    return len(pairs) == len(set(labels.tolist())) == len(set(truth.tolist()))


def test_kmeans_start_finds_planted_clusters_whatever_the_padding():
    rng = np.random.default_rng(7)
    W, truth = planted_clusters(rng)
    assert W.any(1).all()  # no observation is a row of zeros, as the padding rows are
    W = jnp.asarray(W, jnp.float32)
    observed = jnp.ones(W.shape[0])
    key = jax.random.PRNGKey(0)
    narrow = np.asarray(vi.kmeans(key, W, observed, jnp.ones(3, bool), 10))
    wide = np.asarray(vi.kmeans(key, W, observed, jnp.arange(6) < 3, 10))
    np.testing.assert_array_equal(wide[:, :3], narrow)
    assert not wide[:, 3:].any()  # padding slots get nobody
    assert same_partition(narrow.argmax(1), truth)
    centres = np.asarray(vi.kmeans_plus_plus(key, W, observed, jnp.ones(3, bool)))
    assert len({tuple(c) for c in centres}) == 3  # seeds are distinct observations
    # padding rows (zeros, not observed) are never a centre and belong to no cluster
    padded = jnp.concatenate([W, jnp.zeros((40, W.shape[1]))])
    mask = jnp.arange(padded.shape[0]) < W.shape[0]
    for seed in range(5):
        hard = np.asarray(vi.kmeans(jax.random.PRNGKey(seed), padded, mask, jnp.ones(3, bool), 10))
        assert not hard[W.shape[0]:].any() and (hard[: W.shape[0]].sum(1) == 1).all()
        assert same_partition(hard[: W.shape[0]].argmax(1), truth)
        centres = np.asarray(vi.kmeans_plus_plus(jax.random.PRNGKey(seed), padded, mask, jnp.ones(3, bool)))
        assert centres.any(1).all()


SMALL_SEARCH = vi.SearchConfig(max_iter=3, n_proposals=4, n_candidates=4, split_merge_rounds=2)


def padded_planted_clusters():
    """(W, padded, observed rows, dimension columns): planted clusters (24 x 9) padded with 8 zero rows and
    3 zero columns."""
    W, _ = planted_clusters(np.random.default_rng(3), n_per_cluster=8, width=3)
    n_obs, n_dims = W.shape
    padded = np.zeros((n_obs + 8, n_dims + 3))
    padded[:n_obs, :n_dims] = W
    return W, padded, np.arange(len(padded)) < n_obs, np.arange(padded.shape[1]) < n_dims


def small_search(padded, observed, features):
    """Three restarts of :data:`SMALL_SEARCH` with 3 clusters on ``padded``."""
    keys = jax.vmap(lambda r: jax.random.fold_in(jax.random.PRNGKey(0), r))(jnp.arange(3))
    return vi.search_batch(keys, jnp.asarray(padded), jnp.asarray(observed, float), jnp.asarray(features, float),
                           jnp.ones((3, 3), bool), priors=Priors(), config=SMALL_SEARCH)  # fmt: skip


def test_a_padded_search_has_the_elbo_of_its_observations_and_dimensions():
    """The search on data padded with zero rows and columns that are marked as padding reports the ELBO of its
    state on the observations and dimensions alone (nu = 0 on the padding rows, the padding columns in no
    group); with either marked as data, the same zeros change it (controls)."""
    W, padded, rows, columns = padded_planted_clusters()
    n_obs, n_dims = W.shape
    priors = Priors()
    with enable_x64():
        for observed, features in ((rows, columns), (np.ones(len(padded)), columns), (rows, np.ones(padded.shape[1]))):
            runs = small_search(padded, observed, features)
            for r in range(3):
                ext, params = jax.tree.map(lambda leaf: leaf[r], runs.ext), jax.tree.map(lambda leaf: leaf[r], runs.params)
                # the unpadded problem: its observations, and its dimensions in as many group slots (G = D)
                alone = vi.make_extraction(jnp.asarray(W), ext.assignment[:n_dims], ext.formula[:n_dims])
                slots = {name: getattr(params, name)[:n_dims] for name in ("phi", "lam", "eta", "ell")}
                on_data = float(elbo(params._replace(nu=params.nu[:n_obs], **slots), alone, priors))
                if observed is rows and features is columns:
                    assert not np.asarray(params.nu[n_obs:]).any()
                    assert (np.asarray(ext.assignment[:n_dims]) < n_dims).all()  # no padding slot holds a group
                    assert float(runs.elbo[r]) == pytest.approx(on_data, rel=1e-12)
                else:
                    assert float(runs.elbo[r]) != pytest.approx(on_data, rel=1e-6)


def test_split_merge_repairs_a_bad_clustering_and_never_lowers_the_elbo():
    """From a fixed point of coordinate ascent reached with two planted clusters in one slot and the third split
    over two slots, a split-merge move wins and restores the planted partition; the reported ELBO is the ELBO of the
    returned state and never below the start's, also from random states."""
    rng = np.random.default_rng(8)
    priors = Priors()
    W, truth = planted_clusters(rng)
    moves = jax.jit(vi.split_merge, static_argnames=("priors", "rounds", "candidates", "sweeps"))
    with enable_x64():
        ext = vi.singleton_extraction(jnp.asarray(W))
        active = jnp.ones(3, bool)
        bad = np.where(truth == 2, 1 + (np.arange(len(truth)) % 2), 0)
        nu = vi.soft_responsibilities(jax.nn.one_hot(jnp.asarray(bad), 3), jnp.ones(len(bad)), active)
        params = fit_groups_given_clusters(vi.initial_params(nu, W.shape[1], priors, active), ext, priors)
        params, before = run_cavi(params, ext, priors, tol=1e-12, max_sweeps=1000)
        stuck = np.asarray(params.nu).argmax(1)
        assert len(set(stuck[truth < 2].tolist())) == 1  # coordinate ascent alone keeps two clusters in one slot
        moved, after = moves(jax.random.PRNGKey(1), params, ext, priors, rounds=2, candidates=3, sweeps=10)
        assert float(after) > float(before) + 1.0
        assert float(after) == pytest.approx(float(elbo(moved, ext, priors)), rel=1e-12)
        assert same_partition(np.asarray(moved.nu).argmax(1), truth)
        for trial in range(3):
            start = random_state(rng, W.shape[0], W.shape[1], 3)._replace(active=active)
            moved, after = moves(jax.random.PRNGKey(trial), start, ext, priors, rounds=2, candidates=3, sweeps=5)
            assert float(after) >= float(elbo(start, ext, priors))
            assert float(after) == pytest.approx(float(elbo(moved, ext, priors)), rel=1e-12)


def test_search_reports_its_elbo_which_is_below_the_exact_log_evidence():
    """The whole search (k-means start, annealing, cluster moves, merges) on tiny data: each restart's reported
    ELBO is the ELBO of its returned state, below the exact log evidence, and its trace never decreases."""
    W = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], float)
    priors = Priors()
    log_evidence = exact_log_evidence(W, 2, priors)
    config = vi.SearchConfig(max_iter=3, n_proposals=4, n_candidates=4, split_merge_rounds=2)
    with enable_x64():
        keys = jax.vmap(lambda r: jax.random.fold_in(jax.random.PRNGKey(0), r))(jnp.arange(3))
        runs = vi.search_batch(keys, jnp.asarray(W), jnp.ones(W.shape[0]), jnp.ones(W.shape[1]), jnp.ones((3, 2), bool),
                               priors=priors, config=config)  # fmt: skip
        for r in range(3):
            ext, params = jax.tree.map(lambda leaf: leaf[r], runs.ext), jax.tree.map(lambda leaf: leaf[r], runs.params)
            assert float(runs.elbo[r]) == pytest.approx(float(elbo(params, ext, priors)), rel=1e-12)
            trace = np.asarray(runs.trace[r][: int(runs.n_iterations[r]) + 2])
            assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), trace
            assert trace[-1] == float(runs.elbo[r])
    assert np.all(np.asarray(runs.elbo) <= log_evidence + 1e-9), (np.asarray(runs.elbo), log_evidence)


def test_merge_iterations_in_calls_bounded_in_time_give_the_same_search(monkeypatch):
    """Ctrl-C waits for the compiled call in flight, so the merge iterations run in calls of at most
    ``CALL_SECONDS`` at the measured pace. With a bound of 0 every call runs one iteration of the batch;
    without a bound, the call after the first runs all the rest. The searches are the same, bit for bit; a
    KeyboardInterrupt between calls ends the search."""
    _, padded, rows, columns = padded_planted_clusters()
    merge_batch, calls = vi._merge_batch, []

    def counted(*args, **kwargs):
        calls.append(None)
        if len(calls) == interrupt_at:
            raise KeyboardInterrupt
        return merge_batch(*args, **kwargs)

    def search(bound):
        monkeypatch.setattr(vi, "CALL_SECONDS", bound)
        calls.clear()
        return small_search(padded, rows, columns)

    monkeypatch.setattr(vi, "_merge_batch", counted)
    interrupt_at = None
    with enable_x64():
        unbounded = search(float("inf"))
        assert len(calls) == 2
        one_at_a_time = search(0.0)
        assert np.asarray(one_at_a_time.n_iterations).max() == 3 and len(calls) == 3
        for got, expected in zip(jax.tree.leaves(one_at_a_time), jax.tree.leaves(unbounded)):
            np.testing.assert_array_equal(got, expected)
        interrupt_at = 2
        with pytest.raises(KeyboardInterrupt):
            search(0.0)
        assert len(calls) == 2
