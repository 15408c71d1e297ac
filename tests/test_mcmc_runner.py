"""The shared MCMC runner: argument errors name the argument; a continued run equals one longer run."""

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import NUTS

from interpretable_zoo.inference.mcmc import continue_mcmc, run_mcmc


def normal_model():
    numpyro.sample("mu", dist.Normal(jnp.zeros(2), 1.0))


@pytest.mark.parametrize(
    "options, name",
    [
        ({"num_samples": 0}, "num_samples"),
        ({"num_warmup": -1}, "num_warmup"),
        ({"num_chains": 2.5}, "num_chains"),
        ({"seed": -3}, "seed"),
        ({"chain_method": "threads"}, "chain_method"),
    ],
)
def test_bad_run_options_name_the_argument(options, name):
    settings = {"num_warmup": 10, "num_samples": 10, "num_chains": 2, **options}
    with pytest.raises(ValueError, match=name):
        run_mcmc(NUTS(normal_model), progress_bar=False, **settings)


def test_continuing_a_run_gives_the_same_chains_as_one_longer_run():
    settings = {"num_warmup": 50, "num_chains": 2, "seed": 7, "progress_bar": False}
    long_run = run_mcmc(NUTS(normal_model), num_samples=60, **settings)
    short_run = run_mcmc(NUTS(normal_model), num_samples=40, **settings)
    first = short_run.get_samples(group_by_chain=True)["mu"]
    second = continue_mcmc(short_run, 20).get_samples(group_by_chain=True)["mu"]
    expected = long_run.get_samples(group_by_chain=True)["mu"]
    assert expected.shape == (2, 60, 2)
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), expected, rtol=1e-6)


def test_same_seed_same_draws_and_other_seed_other_draws():
    settings = {"num_warmup": 30, "num_samples": 20, "num_chains": 2, "progress_bar": False}
    a = run_mcmc(NUTS(normal_model), seed=1, **settings).get_samples()["mu"]
    b = run_mcmc(NUTS(normal_model), seed=1, **settings).get_samples()["mu"]
    c = run_mcmc(NUTS(normal_model), seed=2, **settings).get_samples()["mu"]
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
