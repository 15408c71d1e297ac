"""ArviZ glue: conversion without log-likelihood, derived label-free variables, default summary variables."""

import arviz as az
import jax.numpy as jnp
import matplotlib
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import NUTS

from interpretable_zoo import diagnostics
from interpretable_zoo.inference.mcmc import run_mcmc

matplotlib.use("Agg")


def normal_model(y=None):
    mu = numpyro.sample("mu", dist.Normal(jnp.zeros(2), 1.0))
    numpyro.sample("y", dist.Normal(mu.sum(), 1.0), obs=y)


@pytest.fixture(scope="module")
def mcmc():
    return run_mcmc(NUTS(normal_model), num_warmup=100, num_samples=50, num_chains=2, progress_bar=False,
                    model_kwargs={"y": 0.3})


def test_conversion_keeps_every_chain_and_skips_log_likelihood(mcmc):
    idata = diagnostics.to_inference_data(mcmc)
    assert idata.posterior["mu"].shape == (2, 50, 2)
    assert "log_likelihood" not in idata.groups()
    np.testing.assert_allclose(idata.sample_stats["lp"], -mcmc.get_extra_fields(group_by_chain=True)["potential_energy"])


def test_derived_variables_become_the_default_summary_and_survive_netcdf(mcmc, tmp_path):
    total = np.asarray(mcmc.get_samples(group_by_chain=True)["mu"]).sum(-1)
    idata = diagnostics.to_inference_data(mcmc, derived={"mu_total": total}, summary_var_names=["mu_total"])
    table = diagnostics.summary(idata)
    assert list(table.index) == ["mu_total"]
    assert {"r_hat", "ess_bulk", "ess_tail"} <= set(table.columns)
    np.testing.assert_allclose(table.loc["mu_total", "mean"], total.mean(), atol=1e-3)
    path = tmp_path / "run.nc"
    idata.to_netcdf(path)
    assert diagnostics.default_var_names(az.from_netcdf(path)) == ["mu_total"]


def test_summary_without_declared_variables_covers_all(mcmc):
    table = diagnostics.summary(diagnostics.to_inference_data(mcmc))
    assert list(table.index) == ["mu[0]", "mu[1]"]


def test_bad_derived_shape_and_unknown_summary_variable_are_named(mcmc):
    with pytest.raises(ValueError, match="derived\\['bad'\\]"):
        diagnostics.to_inference_data(mcmc, derived={"bad": np.zeros((3, 50))})
    with pytest.raises(ValueError, match="summary_var_names"):
        diagnostics.to_inference_data(mcmc, summary_var_names=["nope"])
    with pytest.raises(TypeError, match="result_or_idata"):
        diagnostics.summary({"mu": np.zeros(3)})


def test_plot_trace_draws_the_default_variables(mcmc):
    total = np.asarray(mcmc.get_samples(group_by_chain=True)["mu"]).sum(-1)
    idata = diagnostics.to_inference_data(mcmc, derived={"mu_total": total}, summary_var_names=["mu_total"])
    axes = diagnostics.plot_trace(idata)
    assert axes.shape == (1, 2)
