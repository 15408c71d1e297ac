"""Tests of diagnostics.sbc: rank uniformity under a correct sampler, power against a wrong prior, plots."""

import matplotlib

matplotlib.use("Agg")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from interpretable_zoo.diagnostics.sbc import simulation_based_calibration  # noqa: E402
from toy_models import TRUE_WEIGHTS, WRONG_WEIGHTS, sample_posterior, toy_model  # noqa: E402

NUM_SIMULATIONS = 500
THIN = 2


def fit_toy(rng_key, data):
    """The reference sampler under the TRUE prior: 200 draws after 100 warmup steps."""
    return sample_posterior(rng_key, data["x"], TRUE_WEIGHTS, num_warmup=100, num_samples=200)


@pytest.fixture(scope="module")
def toy_sbc():
    """SBC of the reference sampler on data from the true prior and on data from the wrong prior.

    The negative control simulates from the wrong prior and fits under the true one: the fit's prior is
    wrong for the simulations either way round, and reusing one fit_fn compiles the sampler once.
    """
    return {
        name: simulation_based_calibration(
            jax.random.key(seed),
            toy_model,
            fit_toy,
            num_simulations=NUM_SIMULATIONS,
            data_sites=["x"],
            model_kwargs={"weights": weights},
            thin=THIN,
        )
        for name, weights, seed in [("true", TRUE_WEIGHTS, 0), ("wrong", WRONG_WEIGHTS, 1)]
    }


def test_sbc_ranks_uniform_for_reference_sampler(toy_sbc):
    result = toy_sbc["true"]
    assert set(result.ranks) == {"z", "mu"}
    assert result.num_draws == 200 // THIN
    for ranks in result.ranks.values():
        assert ranks.shape == (NUM_SIMULATIONS,)
        assert ranks.min() >= 0 and ranks.max() <= result.num_draws
    # Under a correct sampler the Bonferroni p-value is (conservatively) uniform: below 1e-3 only by a
    # 1-in-1000 accident of the fixed seed.
    assert result.passed(alpha=1e-3), result


def test_sbc_flags_wrong_prior(toy_sbc):
    # The reversed prior shifts the posterior of z by about 0.1-0.2 per state: with 500 simulations the KS
    # statistic of z's ranks is about 0.18 (p from 1e-14 to 1e-16 over seeds 0-2), against a critical value
    # near 0.12 for p = 1e-6, a margin of over 2 standard deviations of the statistic.
    result = toy_sbc["wrong"]
    assert result.p_values["z"] < 1e-6, result
    assert result.p_value < 1e-6 and not result.passed(alpha=1e-3)


def test_sbc_plot_returns_figure_with_panel_per_statistic(toy_sbc):
    figure = toy_sbc["true"].plot_ecdf_difference()
    assert isinstance(figure, Figure)
    assert [axis.get_title() for axis in figure.axes] == list(toy_sbc["true"].ranks)
    # each panel holds the ECDF difference curve and the band
    assert all(axis.lines and axis.collections for axis in figure.axes)


# ---------------------------------------------------------------- discrete ties, batching, custom statistics

CATEGORY_PROBS = jnp.array([0.1, 0.2, 0.3, 0.4])
# One simulation count for the cheap tests below, so that the fit compiled for one is reused by the others.
CATEGORY_SIMULATIONS = 2000


def category_model(x=None):
    """z ~ Categorical; x carries no information about z, so the exact posterior is the prior."""
    numpyro.sample("z", dist.Categorical(probs=CATEGORY_PROBS))
    numpyro.sample("x", dist.Normal(0.0, 1.0), obs=x)


def exact_category_fit(rng_key, data):
    return {"z": jax.random.categorical(rng_key, jnp.log(CATEGORY_PROBS), shape=(50,))}


def uniform_category_fit(rng_key, data):
    return {"z": jax.random.randint(rng_key, (50,), 0, 4)}


def test_sbc_breaks_ties_of_discrete_latents():
    # z takes 4 values, so nearly every draw ties with the truth. Without random tie-breaking the ranks
    # would sit on 4 points and the chi-square p-value would be ~0 for 2000 simulations.
    result = simulation_based_calibration(
        jax.random.key(2), category_model, exact_category_fit, num_simulations=CATEGORY_SIMULATIONS, data_sites=["x"]
    )
    assert result.passed(alpha=1e-3), result
    assert len(np.unique(result.ranks["z"])) > 40
    assert np.all((result.pit["z"] > 0) & (result.pit["z"] < 1))


def test_sbc_flags_wrong_discrete_posterior_with_custom_statistic():
    # Draws from uniform instead of (0.1, 0.2, 0.3, 0.4): P(draw < truth) and the indicator of z == 0
    # move by about 0.15, over 6 standard errors of a 2000-simulation KS statistic (p < 1e-6 for any seed).
    result = simulation_based_calibration(
        jax.random.key(3),
        category_model,
        uniform_category_fit,
        num_simulations=CATEGORY_SIMULATIONS,
        data_sites=["x"],
        statistics={"z": lambda values: values["z"], "z is 0": lambda values: (values["z"] == 0).astype(float)},
    )
    assert result.p_values["z"] < 1e-6 and result.p_values["z is 0"] < 1e-6, result


def test_sbc_batched_map_matches_vmap():
    results = [
        simulation_based_calibration(
            jax.random.key(4),
            category_model,
            exact_category_fit,
            num_simulations=CATEGORY_SIMULATIONS,
            data_sites=["x"],
            batch_size=batch_size,
            thin=3,
        )
        for batch_size in (None, 250)
    ]
    assert results[0].num_draws == 17  # ceil(50 / 3)
    np.testing.assert_array_equal(results[0].ranks["z"], results[1].ranks["z"])


# ---------------------------------------------------------------- bad input


class UnhashableFit:
    __hash__ = None

    def __call__(self, rng_key, data):
        return exact_category_fit(rng_key, data)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"data_sites": ["y"]}, r"data_sites: \['y'\] are not sample sites of the model"),
        ({"data_sites": "x"}, "data_sites: expected a non-empty list"),
        ({"model_kwargs": {"x": jnp.zeros(())}}, r"data_sites: \['x'\] are observed in the model"),
        ({"thin": 0}, "thin: expected an int >= 1"),
        ({"num_simulations": 1}, "num_simulations: expected an int >= 2"),
        ({"num_bins": 500}, r"num_bins: expected an int in \[2, 51\]"),
        ({"fit_fn": lambda key, data: jnp.zeros(5)}, "fit_fn: must return a non-empty dict"),
        ({"fit_fn": lambda key, data: {"x": jnp.zeros(5)}}, r"fit_fn: returned \['x'\], which are not latent sites"),
        ({"statistics": {"s": lambda values: values["w"]}}, r"statistics\['s'\]: uses the site 'w'"),
        ({"rng_key": 0}, "rng_key: expected a JAX PRNG key"),
        ({"fit_fn": UnhashableFit()}, "fit_fn: must be hashable"),
    ],
)
def test_sbc_rejects_bad_input(overrides, message):
    arguments = {
        "rng_key": jax.random.key(5),
        "model": category_model,
        "fit_fn": exact_category_fit,
        "num_simulations": CATEGORY_SIMULATIONS,
        "data_sites": ["x"],
    } | overrides
    with pytest.raises(ValueError, match=message):
        simulation_based_calibration(
            arguments.pop("rng_key"), arguments.pop("model"), arguments.pop("fit_fn"), **arguments
        )
