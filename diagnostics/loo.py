"""Leave-one-out cross-validation for discrete posteriors, without Pareto smoothing.

PSIS-LOO (``az.loo``) smooths the importance ratios r_ns = 1 / p(y_n | state_s, y_{-n}) of the draws by
fitting a generalised Pareto tail. On a discrete posterior such as BRL's, an observation's ratios take a
handful of values (the lists visited capture it in few ways), the fit fails (k = inf) and the smoothing
distorts an estimate that needs none: bounded ratios with few values have finite variance. So
:func:`discrete_loo` keeps the plain importance-sampling identity

    p(y_n | y_{-n}) = 1 / E[r_n | y]

and reports its Monte Carlo error from the draws' effective sample size instead of a Pareto k.
``method="exact"`` instead weights each distinct state visited by its exact posterior mass, for
posteriors whose draws visit every state that matters.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from interpretable_zoo.diagnostics.inference_data import _as_inference_data, posterior_values

STATE_ATTR = "discrete_state_var_names"
"""``posterior.attrs`` key: the posterior variables that together are the sampled state, declared by fits whose
posterior is discrete (BRL with fixed priors)."""
LOG_JOINT_ATTR = "log_joint_var_name"
"""``posterior.attrs`` key: the posterior variable holding log p(state) + log p(y | state) of each draw."""

MIN_ESS = 400
"""Effective draws of an observation's ratios below which :func:`discrete_loo` sets ``warning`` (the
convergence target of the fits, docs/guides/convergence.md)."""
MISSING_MASS_WARNING = 0.01
"""With ``method="exact"``: estimated posterior mass outside the visited states above which ``warning`` is set."""


def discrete_loo(result_or_idata, *, method: str = "frequency", var_name: str | None = None):
    """Leave-one-out predictive of a discrete posterior as ``arviz.ELPDData``, without Pareto smoothing.

    l_ns = log p(y_n | state_s, y_{-n}) are the ``log_likelihood`` group's pointwise terms (for BRL the
    collapsed leave-one-out predictive, :func:`~interpretable_zoo.models.brl.loo_log_predictive`). Since
    p(state | y_{-n}) is proportional to p(state | y) exp(-l_n),

        log p(y_n | y_{-n}) = -log E[exp(-l_n) | y].

    ``method="frequency"`` (the default) takes the expectation over the draws, as PSIS-LOO does before
    smoothing; its Monte Carlo standard error per observation (``mcse_loo_i``) and for the sum
    (``mcse_elpd_loo``) come from ArviZ's effective sample size of the ratios, by the delta method.
    ``warning`` is set when an observation's ratios vary with fewer than ``MIN_ESS`` effective draws.

    ``method="exact"`` weights each distinct state visited by its exact posterior mass, normalised over
    the visited states (log p(state) + log p(y | state), declared by the fit in ``posterior.attrs``
    ``LOG_JOINT_ATTR``, the state in ``STATE_ATTR``): exact wherever the unvisited states hold a
    negligible share of the posterior, under y as under y_{-n}, and without Monte Carlo error. That share is
    estimated as the fraction of draws in states drawn once (Good-Turing), ``missing_mass``; ``warning`` is
    set above ``MISSING_MASS_WARNING``. A posterior that spreads over many equivalent states (BRL lists
    that capture the same samples) needs the default.

    The result works with ``az.compare``, alone or beside ``az.loo`` of other fits. It holds ``elpd_loo``,
    ``se``, ``p_loo``, ``loo_i``, ``warning``, ``n_states`` and ``missing_mass``, and with the default
    method ``mcse_elpd_loo`` and ``mcse_loo_i``; no Pareto k, as nothing is smoothed. A posterior with
    continuous parameters, such as a sampled hyperprior, declares no discrete state and is refused: use
    ``az.loo``.

    Example:
        >>> data = iz.datasets.load_titanic_table()
        >>> X, names = iz.datasets.one_hot(data.X)
        >>> result = iz.fit_brl(X, data.y, feature_names=names, min_support=0.3, num_samples=200,
        ...                     num_chains=2, n_temperatures=1, progress_bar=False)
        >>> loo = iz.diagnostics.discrete_loo(result)
        >>> round(loo.elpd_loo), round(loo.mcse_elpd_loo, 1), bool(loo.warning)  # 400 draws: too few here
        (-1080, 5.1, True)
    """
    import arviz as az

    if method not in ("frequency", "exact"):
        raise ValueError(f"method: expected 'frequency' or 'exact', got {method!r}")
    idata = _as_inference_data(result_or_idata)
    posterior = idata.posterior
    state_names, log_joint_name = posterior.attrs.get(STATE_ATTR), posterior.attrs.get(LOG_JOINT_ATTR)
    if state_names is None or log_joint_name is None:
        raise ValueError(
            "result_or_idata: its posterior declares no discrete state (posterior.attrs "
            f"{STATE_ATTR!r} and {LOG_JOINT_ATTR!r}); a posterior with continuous parameters, such as a sampled "
            "hyperprior, is not discrete: use az.loo"
        )
    pointwise = _pointwise(idata, var_name)
    n_chains, n_draws = pointwise.sizes["chain"], pointwise.sizes["draw"]
    n_samples = n_chains * n_draws
    terms = np.asarray(pointwise.values, np.float64).reshape(n_samples, -1)  # (draws, observations), chain-major
    state = np.concatenate([posterior_values(idata, name).reshape(n_samples, -1).astype(np.float64)
                            for name in np.atleast_1d(state_names)], axis=1)  # fmt: skip
    _, first, counts = np.unique(state, axis=0, return_index=True, return_counts=True)
    missing_mass = float(np.sum(counts == 1) / n_samples)  # the draws of states drawn once
    extra = {}
    if method == "exact":
        log_joint = np.asarray(posterior[log_joint_name].values, np.float64).reshape(n_samples)[first]
        log_weight = (log_joint - logsumexp(log_joint))[:, None]  # p(state | y) over the visited states
        terms = terms[first]
        warning = missing_mass > MISSING_MASS_WARNING
    else:
        log_weight = np.full((n_samples, 1), -np.log(n_samples))
        extra, warning = _frequency_mcse(az, *_distinct_columns(terms), n_chains, n_draws)
    columns, inverse, multiplicity = _distinct_columns(terms)
    loo_i = -logsumexp(log_weight - columns, axis=0)[inverse]
    lppd_i = logsumexp(log_weight + columns, axis=0)[inverse]
    template = pointwise.isel(chain=0, draw=0, drop=True)
    as_observations = lambda values, name: template.copy(data=values.reshape(template.shape)).rename(name)  # noqa: E731
    fields = {
        "elpd_loo": float(loo_i.sum()),
        "se": float(np.sqrt(loo_i.size * np.var(loo_i))),
        "p_loo": float(lppd_i.sum() - loo_i.sum()),
        "n_samples": n_samples,
        "n_data_points": loo_i.size,
        "warning": bool(warning),
        "loo_i": as_observations(loo_i, "loo_i"),
        "scale": "log",
        "n_states": len(first),
        "missing_mass": missing_mass,
        **{name: value if np.ndim(value) == 0 else as_observations(value, name) for name, value in extra.items()},
    }
    return az.ELPDData(data=list(fields.values()), index=list(fields))


def _pointwise(idata, var_name):
    """The (chain, draw, observation...) log-likelihood variable ``var_name`` (the only one by default)."""
    if "log_likelihood" not in idata.groups():
        raise ValueError("result_or_idata: has no log_likelihood group (a fit leaves it out when it is too large)")
    variables = list(idata.log_likelihood.data_vars)
    if var_name is None:
        if len(variables) != 1:
            raise ValueError(f"var_name: choose one of {variables}")
        var_name = variables[0]
    elif var_name not in variables:
        raise ValueError(f"var_name: {var_name!r} is not in the log_likelihood group {variables}")
    pointwise = idata.log_likelihood[var_name]
    return pointwise.transpose("chain", "draw", *[dim for dim in pointwise.dims if dim not in ("chain", "draw")])


def _distinct_columns(terms) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(columns, inverse, multiplicity): the distinct columns of ``terms`` (draws, observations), each
    observation's column and each column's count. Observations alike in all the model reads (BRL: the same
    truth-table row and label) share a column. Columns are grouped by a random projection, then checked
    equal; sorting whole columns costs seconds at 10^4 draws."""
    fingerprint = np.random.default_rng(0).standard_normal(len(terms)) @ terms
    _, first, inverse, multiplicity = np.unique(fingerprint, return_index=True, return_inverse=True, return_counts=True)
    if not np.array_equal(terms[:, first[inverse]], terms):  # distinct columns with one projection
        _, first, inverse, multiplicity = np.unique(terms, axis=1, return_index=True, return_inverse=True,
                                                    return_counts=True)
    return terms[:, first], inverse.ravel(), multiplicity


def _frequency_mcse(az, columns, inverse, multiplicity, n_chains: int, n_draws: int) -> tuple[dict, bool]:
    """Monte Carlo standard errors of the frequency estimate -log mean_s r_ns, r_ns = exp(-l_ns), from the
    distinct ``columns`` of the terms (:func:`_distinct_columns`): per observation mcse(mean r_n) / mean r_n,
    and for the sum the standard error of the mean of sum_n r_ns / mean r_n (the delta method); both from
    ArviZ's ESS of the mean over the chains. Returns them and whether an observation's varying ratios have
    fewer than ``MIN_ESS`` effective draws."""
    log_ratios = -columns
    ratios = np.exp(log_ratios - log_ratios.max(axis=0))  # scaled per observation; relative errors ignore it
    relative = ratios / ratios.mean(axis=0)
    varying = np.ptp(columns, axis=0) > 0
    mcse, ess = np.zeros(columns.shape[1]), np.full(columns.shape[1], np.inf)
    total = 0.0
    if varying.any():
        by_chain = az.convert_to_dataset(relative[:, varying].reshape(n_chains, n_draws, -1))
        mcse[varying] = az.mcse(by_chain, method="mean")["x"].values
        ess[varying] = az.ess(by_chain, method="mean")["x"].values
        total_mcse = az.mcse((relative @ multiplicity).reshape(n_chains, n_draws), method="mean")
        total = float(np.ravel(total_mcse)[0])  # shape (1,) where ArviZ computes with numba, else a scalar
    return {"mcse_elpd_loo": total, "mcse_loo_i": mcse[inverse]}, bool(np.any(ess < MIN_ESS))
