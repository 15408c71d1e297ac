"""ArviZ glue: NumPyro MCMC runs to InferenceData, summaries and trace plots of the label-free quantities.
ArviZ is imported when first needed (it brings matplotlib), not with this module.

Discrete latent structures (cluster labels, rule lists, prototype indices) suffer label switching, or
are categories whose mean means nothing, so their raw draws have no meaningful R-hat. The MCMC fits
therefore keep them in their own group, :data:`SITES_GROUP`, and the posterior group holds the scalar,
label-free summaries (log joint, sorted cluster sizes, list length, ...) and any sampled hyperparameter:
``az.summary(idata)`` and ``az.plot_trace(idata)`` show just those. The attribute ``summary_var_names``
names them in the order :func:`summary` and ``diagnostics.plots.plot_trace`` list them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import warnings
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import arviz as az

SUMMARY_ATTR = "summary_var_names"

SITES_GROUP = "posterior_sites"
"""The InferenceData group of a fit's discrete sites, draw by draw (BCM's ``omega``, ``prototype`` and ``z``,
BRL's ``rules``), on the posterior's chain and draw coordinates; ``az.summary(idata, group=SITES_GROUP)``
summarises them where that means something (BRL's ``rule_in_list``)."""

LOG_LIKELIHOOD_MAX_BYTES = 2**30
"""Largest pointwise log-likelihood group a fit stores (chains x draws x observations float32 values);
a larger one is left out with a warning (keep fewer draws, or fewer chains, to have it)."""


def log_likelihood_fits(n_chains: int, n_draws: int, n_obs: int, description: str) -> bool:
    """Whether a (chain, draw, observation) float32 log-likelihood array fits :data:`LOG_LIKELIHOOD_MAX_BYTES`;
    warns (naming ``description``) when it does not."""
    needed = 4 * n_chains * n_draws * n_obs
    if needed <= LOG_LIKELIHOOD_MAX_BYTES:
        return True
    warnings.warn(
        f"{description}: the pointwise log likelihood ({n_chains} chains x {n_draws} draws x {n_obs} observations, "
        f"{needed / 2**30:.1f} GiB as float32) is left out of idata (limit "
        "diagnostics.inference_data.LOG_LIKELIHOOD_MAX_BYTES); keep fewer draws to have az.loo",
        stacklevel=3,
    )
    return False


def to_inference_data(
    mcmc,
    *,
    derived: Mapping[str, np.ndarray] | None = None,
    summary_var_names: Sequence[str] | None = None,
    coords: Mapping[str, Sequence] | None = None,
    dims: Mapping[str, Sequence[str]] | None = None,
) -> az.InferenceData:
    """Convert a finished ``numpyro.infer.MCMC`` run to ``arviz.InferenceData``.

    Wraps ``arviz.from_numpyro`` without the pointwise log-likelihood (it re-runs the model once per
    draw, which costs more than the sampling for the discrete models here).

    Args:
        mcmc: a ``numpyro.infer.MCMC`` object after ``run``.
        derived: extra posterior variables, each an array of shape (chain, draw, ...), e.g. label-free
            summaries computed from the draws.
        summary_var_names: the posterior variables that :func:`summary` and ``plot_trace`` use by
            default; stored in ``idata.posterior.attrs`` so it survives a NetCDF round trip.
        coords, dims: passed to ArviZ to name array dimensions.

    Example:
        >>> import jax, numpyro, numpyro.distributions as dist
        >>> def model():
        ...     numpyro.sample("mu", dist.Normal(0.0, 1.0))
        >>> mcmc = numpyro.infer.MCMC(numpyro.infer.NUTS(model), num_warmup=20, num_samples=30, num_chains=2,
        ...                           chain_method="sequential", progress_bar=False)
        >>> mcmc.run(jax.random.PRNGKey(0))
        >>> idata = iz.diagnostics.to_inference_data(mcmc, summary_var_names=["mu"])
        >>> dict(idata.posterior.sizes), iz.diagnostics.default_var_names(idata)
        ({'chain': 2, 'draw': 30}, ['mu'])
    """
    import arviz as az

    idata = az.from_numpyro(mcmc, log_likelihood=False, coords=coords, dims=dims)
    if derived:
        add_posterior_variables(idata, derived, dims=dims)
    if summary_var_names is not None:
        missing = [name for name in summary_var_names if name not in idata.posterior]
        if missing:
            raise ValueError(f"summary_var_names: {missing} are not posterior variables")
        idata.posterior.attrs[SUMMARY_ATTR] = list(summary_var_names)
    return idata


def tempered_inference_data(
    run,
    posterior: Mapping[str, np.ndarray],
    *,
    sites: Mapping[str, np.ndarray] | None = None,
    summary_var_names: Sequence[str],
    coords: Mapping[str, Sequence] | None = None,
    dims: Mapping[str, Sequence[str]] | None = None,
    log_likelihood: Mapping[str, np.ndarray] | None = None,
    observed_data: Mapping[str, tuple[np.ndarray, Sequence[str]]] | None = None,
) -> az.InferenceData:
    """``arviz.InferenceData`` of a tempered run (``inference.convergence.TemperedRun``): the given
    ``posterior`` variables (chain, draw, ...) of the posterior rung; the model's discrete ``sites`` (chain,
    draw, ...) in the group :data:`SITES_GROUP`; ``sample_stats`` with ``lp`` (the
    log joint) and ``swap_accept`` (mean acceptance of the swaps attempted at each kept scan); the
    ``log_likelihood`` group (name -> (chain, draw, observation) pointwise values, for ``az.loo`` and
    ``az.compare``) when given; the ``observed_data`` group (name -> (values, dims), on ``coords``) when
    given; and the run's tempering facts in ``posterior.attrs`` (schedule,
    communication barrier, round-trip rate, stepping-stone log evidence and its standard error,
    converged, thinning, scans, and ``move_rate_<move>``: per rung, what the kernel reported for each
    move, such as its mean acceptance probability).
    """
    import arviz as az
    import xarray as xr

    def group(variables, **fixed_coords):
        """(name -> (dims, values)) as a Dataset on the coordinates of ``coords`` that its dims use."""
        used = {dim for names, _ in variables.values() for dim in names}
        return xr.Dataset(variables, coords={**fixed_coords, **{d: v for d, v in (coords or {}).items() if d in used}})

    dims = {**(dims or {}), **{name: ["observation"] for name in (log_likelihood or {})}}
    idata = az.from_dict(
        posterior=dict(posterior),
        sample_stats={"lp": run.summaries["log_joint"], "swap_accept": run.swap_accept},
        log_likelihood=None if not log_likelihood else {k: np.asarray(v, np.float32) for k, v in log_likelihood.items()},
        coords=coords,
        dims=dims,
    )
    if sites:
        idata.add_groups({SITES_GROUP: group(
            {name: (["chain", "draw", *dims.get(name, [])], np.asarray(values)) for name, values in sites.items()},
            chain=idata.posterior.chain, draw=idata.posterior.draw)})
    if observed_data:
        idata.add_groups({"observed_data": group(
            {name: (list(names), np.asarray(values)) for name, (values, names) in observed_data.items()})})
    missing = [name for name in summary_var_names if name not in idata.posterior]
    if missing:
        raise ValueError(f"summary_var_names: {missing} are not posterior variables")
    idata.posterior.attrs.update(
        {
            SUMMARY_ATTR: list(summary_var_names),
            "inverse_temperatures": [float(b) for b in run.schedule],
            "communication_barrier": float(run.barrier),
            "round_trip_rate": float(run.round_trip_rate),
            "log_evidence": float(run.log_evidence),
            "log_evidence_se": float(run.log_evidence_se),
            "converged": int(run.converged),
            "thin": int(run.thin),
            "n_scans": int(run.n_scans),
            **{f"move_rate_{name}": [float(rate) for rate in rates] for name, rates in run.move_rates.items()},
        }
    )
    return idata


def posterior_values(idata: az.InferenceData, name: str) -> np.ndarray:
    """The draws (chain, draw, ...) of the variable ``name``, from the posterior group or the sites group."""
    for group in ("posterior", SITES_GROUP):
        if group in idata.groups() and name in idata[group]:
            return np.asarray(idata[group][name].values)
    raise KeyError(f"{name!r} is in neither the posterior nor the {SITES_GROUP} group")


def add_posterior_variables(
    idata: az.InferenceData,
    arrays: Mapping[str, np.ndarray],
    *,
    dims: Mapping[str, Sequence[str]] | None = None,
) -> az.InferenceData:
    """Add arrays of shape (chain, draw, ...) to ``idata.posterior`` in place and return ``idata``.

    Example:
        >>> import arviz as az, numpy as np
        >>> idata = az.from_dict(posterior={"mu": np.random.default_rng(0).normal(size=(2, 50))})  # 2 chains x 50
        >>> idata = iz.diagnostics.add_posterior_variables(idata, {"mu_squared": idata.posterior["mu"].values ** 2})
        >>> list(idata.posterior.data_vars), idata.posterior["mu_squared"].shape
        (['mu', 'mu_squared'], (2, 50))
    """
    posterior = idata.posterior
    n_chain, n_draw = posterior.sizes["chain"], posterior.sizes["draw"]
    dims = dims or {}
    for name, value in arrays.items():
        value = np.asarray(value)
        if value.shape[:2] != (n_chain, n_draw):
            raise ValueError(
                f"derived[{name!r}]: shape {value.shape} does not start with (chain, draw) = "
                f"({n_chain}, {n_draw})"
            )
        extra_dims = list(dims.get(name, [f"{name}_dim_{i}" for i in range(value.ndim - 2)]))
        posterior[name] = (["chain", "draw", *extra_dims], value)
    return idata


def _as_inference_data(result_or_idata) -> az.InferenceData:
    import arviz as az

    idata = getattr(result_or_idata, "idata", result_or_idata)
    if not isinstance(idata, az.InferenceData):
        raise TypeError(
            "result_or_idata: expected an arviz.InferenceData or a result with an .idata attribute, "
            f"got {type(result_or_idata).__name__}"
        )
    return idata


def default_var_names(result_or_idata) -> list[str] | None:
    """The label-free variables a result declared for diagnostics, or None (meaning all variables).

    Example:
        >>> data = iz.datasets.load_titanic_table()
        >>> X, names = iz.datasets.one_hot(data.X)  # binary items such as sex=female
        >>> result = iz.fit_brl(X, data.y, feature_names=names, min_support=0.3, num_samples=50, num_warmup=20,
        ...                     num_chains=2, n_temperatures=1, progress_bar=False)
        >>> iz.diagnostics.default_var_names(result)
        ['log_posterior', 'length', 'mean_cardinality']
    """
    idata = _as_inference_data(result_or_idata)
    names = idata.posterior.attrs.get(SUMMARY_ATTR)
    if names is None:
        return None
    return [str(name) for name in np.atleast_1d(names)]


def summary(result_or_idata, var_names: Sequence[str] | None = None, **kwargs):
    """``arviz.summary`` (mean, sd, HDI, ess_bulk, ess_tail, r_hat) of a result or InferenceData.

    Defaults to the label-free summaries the model declared, where R-hat and ESS are meaningful.
    Extra keyword arguments go to ``arviz.summary``.

    Example:
        >>> data = iz.datasets.load_titanic_table()
        >>> X, names = iz.datasets.one_hot(data.X)  # binary items such as sex=female
        >>> result = iz.fit_brl(X, data.y, feature_names=names, min_support=0.3, num_samples=50, num_warmup=20,
        ...                     num_chains=2, n_temperatures=1, progress_bar=False)
        >>> table = iz.diagnostics.summary(result)
        >>> list(table.index), list(table.columns[:4])
        (['log_posterior', 'length', 'mean_cardinality'], ['mean', 'sd', 'hdi_3%', 'hdi_97%'])
    """
    import arviz as az

    idata = _as_inference_data(result_or_idata)
    var_names = list(var_names) if var_names is not None else default_var_names(idata)
    return az.summary(idata, var_names=var_names, **kwargs)
