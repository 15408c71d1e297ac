"""A toy NumPyro model with a discrete latent whose posterior is known in closed form.

The generative process (a mixture prior on a Gaussian mean)::

    z  ~ Categorical(weights)                 z in {0, 1, 2, 3}
    mu ~ Normal(COMPONENT_MEANS[z], PRIOR_SCALE)
    x_i ~ Normal(mu, 1)                       i = 1..NUM_OBS

Integrating mu out gives ``mean(x) | z ~ Normal(COMPONENT_MEANS[z], sqrt(PRIOR_SCALE**2 + 1/n))`` and the
rest of x independent of z, so ``p(z | x)`` is closed form over four states (:func:`exact_posterior_z`).

The reference sampler is NumPyro's own ``DiscreteHMCGibbs`` (Gibbs updates of z given mu, HMC on mu given
z), driven through the kernel's ``init``/``sample`` inside ``lax.scan`` so that it is JAX-traceable and can
be vmapped over chains and over SBC simulations (:func:`sample_posterior`). No sampler is written here.

``weights`` is a model argument, so the same code builds the true model and the deliberately wrong-prior
model of the negative controls (:data:`TRUE_WEIGHTS`, :data:`WRONG_WEIGHTS`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import HMC, DiscreteHMCGibbs
from numpyro.infer.util import log_density
from scipy import stats
from scipy.special import softmax

NUM_STATES = 4
NUM_OBS = 4
COMPONENT_MEANS = (-1.5, -0.5, 0.5, 1.5)
PRIOR_SCALE = 0.6
TRUE_WEIGHTS = (0.1, 0.2, 0.3, 0.4)
# The prior reversed: posteriors differ by about 0.1-0.2 per state on data with mean near 0.
WRONG_WEIGHTS = (0.4, 0.3, 0.2, 0.1)


def toy_model(x=None, weights=TRUE_WEIGHTS):
    """The generative program; ``x=None`` samples the data (prior predictive)."""
    num_obs = NUM_OBS if x is None else jnp.shape(x)[0]
    z = numpyro.sample("z", dist.Categorical(probs=jnp.asarray(weights)))
    mu = numpyro.sample("mu", dist.Normal(jnp.asarray(COMPONENT_MEANS)[z], PRIOR_SCALE))
    with numpyro.plate("obs", num_obs):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def collapsed_toy_model(x, weights=TRUE_WEIGHTS):
    """The toy with mu integrated out: x | z ~ MultivariateNormal(m_z 1, I + PRIOR_SCALE**2 11^T)."""
    num_obs = jnp.shape(x)[0]
    z = numpyro.sample("z", dist.Categorical(probs=jnp.asarray(weights)))
    covariance = jnp.eye(num_obs) + PRIOR_SCALE**2 * jnp.ones((num_obs, num_obs))
    loc = jnp.full(num_obs, jnp.asarray(COMPONENT_MEANS)[z])
    numpyro.sample("x", dist.MultivariateNormal(loc, covariance), obs=x)


def collapsed_log_joint(z, x, weights=TRUE_WEIGHTS):
    """log p(z, x) computed by NumPyro from :func:`collapsed_toy_model` (JAX-traceable in z)."""
    value, _ = log_density(collapsed_toy_model, (x, weights), {}, {"z": z})
    return value


def exact_posterior_z(x, weights=TRUE_WEIGHTS) -> np.ndarray:
    """Closed-form p(z | x) in float64 from the sufficient statistic mean(x)."""
    x = np.asarray(x, dtype=np.float64)
    marginal_scale = np.sqrt(PRIOR_SCALE**2 + 1.0 / x.shape[0])
    log_likelihood = stats.norm.logpdf(x.mean(), loc=np.asarray(COMPONENT_MEANS), scale=marginal_scale)
    return softmax(np.log(np.asarray(weights, dtype=np.float64)) + log_likelihood)


def sample_posterior(rng_key, x, weights=TRUE_WEIGHTS, *, num_warmup=200, num_samples=1000):
    """Draws from p(z, mu | x) under the prior ``weights``, one chain, JAX-traceable.

    The kernel is NumPyro's ``DiscreteHMCGibbs``: a Gibbs update of z given mu, then HMC with 4 leapfrog
    steps and adapted step size on mu given z (fixed steps compile faster than NUTS, and mu | z is a
    1-D Gaussian). Returns ``{"z": (num_samples,), "mu": (num_samples,)}`` after ``num_warmup`` adaptation
    steps. Vmap over ``rng_key`` (and ``x``) for chains or SBC simulations. The kernel is built per call
    because NumPyro kernels keep site metadata from ``init``.
    """
    kernel = DiscreteHMCGibbs(HMC(toy_model, num_steps=4, trajectory_length=None))
    model_kwargs = {"x": x, "weights": jnp.asarray(weights)}
    state = kernel.init(rng_key, num_warmup, None, (), model_kwargs)
    constrain = kernel.postprocess_fn((), model_kwargs)

    def step(state, _):
        state = kernel.sample(state, (), model_kwargs)
        return state, constrain(state.z)

    # one scan for warmup and sampling: the kernel body is compiled once
    _, draws = jax.lax.scan(step, state, None, length=num_warmup + num_samples)
    return jax.tree.map(lambda values: values[num_warmup:], draws)
