"""Simulation-based calibration of the BCM collapsed Gibbs sampler (all its moves) on data sets drawn from the model."""

import jax
import jax.numpy as jnp
import numpy as np

from interpretable_zoo.datasets.smiley_faces import conditioned_model
from interpretable_zoo.diagnostics.sbc import simulation_based_calibration
from interpretable_zoo.inference.bcm_gibbs import init, make_target, step
from interpretable_zoo.models import bcm

N_OBS, N_VALUES, N_CLUSTERS = 6, np.array([2, 3, 2]), 2
PRIORS = bcm.Priors(alpha=1.0, lam=1.0, c=5.0, q=0.5)
WARMUP, DRAWS, THIN = 100, 200, 4


def fit(rng_key, data):
    """WARMUP sweeps (split-merge move on), then DRAWS sweeps kept: a jax-traceable run on one simulated
    data set, from a prior draw."""
    static, target = make_target(data["x"], N_CLUSTERS, PRIORS, N_VALUES)
    key_init, key_run = jax.random.split(rng_key)
    states = jax.tree.map(lambda value: value[None], init(static, target, key_init))

    def sweep(states, key):
        states, _ = step(static, target, states, key[None], jnp.ones(1))
        return states, {"omega": states.omega[0], "prototype": states.prototype[0], "z": states.z[0]}

    keys = jax.random.split(key_run, WARMUP + DRAWS)
    states, _ = jax.lax.scan(sweep, states, keys[:WARMUP])
    _, draws = jax.lax.scan(sweep, states, keys[WARMUP:])
    return draws


def co_assigned(a, b):
    return lambda values: (values["z"][a] == values["z"][b]).astype(jnp.float32)


STATISTICS = {
    "n_subspace_features": lambda values: values["omega"].sum().astype(jnp.float32),
    "largest_cluster": lambda values: jnp.bincount(values["z"].ravel(), length=N_CLUSTERS).max().astype(jnp.float32),
    "same_cluster_same_row": co_assigned((0, 0), (0, 1)),
    "same_cluster_same_column": co_assigned((0, 0), (1, 0)),
    "observation_0_is_prototype": lambda values: jnp.any(values["prototype"] == 0).astype(jnp.float32),
    "same_prototypes": lambda values: (values["prototype"][0] == values["prototype"][1]).astype(jnp.float32),
}


def calibrate(fit_fn, seed: int, simulated_priors=PRIORS, num_simulations: int = 400):
    """SBC of ``fit_fn`` (rng_key, data) -> draws over ``num_simulations`` data sets simulated from the
    model with ``simulated_priors``."""
    return simulation_based_calibration(
        jax.random.key(seed),
        conditioned_model,
        fit_fn,
        num_simulations=num_simulations,
        data_sites=["x"],
        model_args=(N_OBS, N_VALUES, N_CLUSTERS, simulated_priors),
        statistics=STATISTICS,
        thin=THIN,
    )


def test_ranks_are_uniform_over_simulated_data_sets():
    result = calibrate(fit, seed=0)
    assert result.passed(alpha=1e-3), result
