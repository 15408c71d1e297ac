"""Simulation-based calibration (SBC, Talts et al. 2018), vectorised with JAX.

For each simulation, (latent, data) is drawn from the model's prior; the posterior sampler under test
is run on the data; the rank of the true value of each scalar statistic among the posterior draws is
recorded. If the sampler draws from the exact posterior, every rank is uniform on ``0..num_draws``.
Discrete quantities tie with the truth constantly, so ties are broken at random, which keeps the ranks
exactly uniform under a correct sampler.

    result = simulation_based_calibration(
        jax.random.key(0), model, fit_fn, num_simulations=300, data_sites=["x"], thin=2)
    assert result.passed(alpha=1e-3), result
    result.plot_ecdf_difference()

Autocorrelated MCMC draws make the ranks non-uniform even for a correct sampler (the truth is independent
of the draws, but the draws are not independent of each other): thin until they roughly are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType

import arviz as az
import jax
import numpy as np
from matplotlib.figure import Figure
from numpyro.handlers import seed, trace
from numpyro.infer import Predictive
from scipy import stats


@dataclass(frozen=True)
class SBCResult:
    """Outcome of :func:`~interpretable_zoo.diagnostics.sbc.simulation_based_calibration`; mappings are keyed by statistic name.

    Attributes:
        ranks: int array (num_simulations,) per statistic: the number of (thinned) posterior draws below
            the true value, ties broken at random; uniform on ``0..num_draws`` under a correct sampler.
        num_draws: posterior draws per simulation after thinning.
        pit: the ranks spread to continuous values, ``(rank + u) / (num_draws + 1)`` with u ~ U(0, 1):
            exactly U(0, 1) under a correct sampler; used by the KS test and the plot.
        chi2_p_values: chi-square test of the rank histogram over ``num_bins`` bins.
        ks_p_values: Kolmogorov-Smirnov test of ``pit`` against U(0, 1).
        p_values: per statistic, the Bonferroni combination ``min(1, 2 * min(chi2, ks))``.
        p_value: Bonferroni over statistics, ``min(1, m * min(p_values))``.
        num_bins: bins of the chi-square test.
        num_simulations: simulations run.

    Example:
        >>> import jax, numpyro, numpyro.distributions as dist
        >>> def model():
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        ...     numpyro.sample("x", dist.Normal(mu, 1.0))
        >>> def exact_posterior(key, data):  # mu | x ~ N(x / 2, 1 / 2), 19 draws
        ...     return {"mu": data["x"] / 2 + 0.5**0.5 * jax.random.normal(key, (19,))}
        >>> result = iz.diagnostics.simulation_based_calibration(jax.random.key(0), model, exact_posterior,
        ...                                                      num_simulations=100, data_sites=["x"])
        >>> list(result.ranks), result.ranks["mu"].shape, result.num_draws, result.num_bins
        (['mu'], (100,), 19, 5)
        >>> int(result.ranks["mu"].max()) <= result.num_draws, result.passed(alpha=1e-3)  # ranks lie in 0..num_draws
        (True, True)
    """

    ranks: Mapping[str, np.ndarray]
    num_draws: int
    pit: Mapping[str, np.ndarray]
    chi2_p_values: Mapping[str, float]
    ks_p_values: Mapping[str, float]
    p_values: Mapping[str, float]
    p_value: float
    num_bins: int
    num_simulations: int

    def passed(self, alpha: float = 0.01) -> bool:
        """True when no statistic's ranks depart from uniformity at level ``alpha``."""
        return self.p_value >= alpha

    def __str__(self) -> str:
        lines = [
            f"SBC: overall p = {self.p_value:.3g}, {self.num_simulations} simulations, "
            f"{self.num_draws} draws each"
        ]
        for name in self.ranks:
            lines.append(
                f"  {name:<20} p = {self.p_values[name]:.3g} "
                f"(chi-square {self.chi2_p_values[name]:.3g}, KS {self.ks_p_values[name]:.3g})"
            )
        return "\n".join(lines)

    def plot_ecdf_difference(self, *, ci_prob: float = 0.95, num_points: int = 101) -> Figure:
        """ECDF minus uniform CDF of ``pit``, one panel per statistic, with simultaneous ``ci_prob`` bands.

        The bands (ArviZ's optimized simultaneous bands, Säilynoja et al. 2022) contain the whole curve with
        probability ``ci_prob`` under a correct sampler. A curve above zero means the truth ranks low (the
        posterior sits too high), below zero that it ranks high; a posterior too narrow (U-shaped ranks)
        gives a curve above zero on the left and below on the right, one too wide the reverse.
        """
        names = list(self.pit)
        figure = Figure(figsize=(3.2 * len(names), 2.8), layout="constrained")
        for axis, name in zip(figure.subplots(1, len(names), squeeze=False)[0], names):
            az.plot_ecdf(
                self.pit[name],
                cdf=stats.uniform.cdf,
                difference=True,
                confidence_bands="optimized",
                ci_prob=ci_prob,
                eval_points=np.linspace(0.0, 1.0, num_points),
                ax=axis,
            )
            axis.set_title(name)
            axis.set_xlabel("fractional rank")
        return figure


def simulation_based_calibration(
    rng_key,
    model: Callable,
    fit_fn: Callable,
    *,
    num_simulations: int,
    data_sites: Sequence[str],
    model_args: tuple = (),
    model_kwargs: Mapping | None = None,
    statistics: Mapping[str, Callable] | None = None,
    thin: int = 1,
    batch_size: int | None = None,
    num_bins: int | None = None,
) -> SBCResult:
    """Run SBC of a JAX-traceable posterior sampler against a NumPyro model's prior.

    Args:
        rng_key: a JAX PRNG key; it determines the simulations, the fits and the tie-breaking.
        model: the NumPyro model; called with ``model_args``/``model_kwargs`` it must *sample* the data
            sites (observations passed as None).
        fit_fn: ``fit_fn(rng_key, data) -> {site: draws}`` where ``data`` maps each data site to one
            simulated value and each draws array has shape ``(num_draws, *site_shape)``. It must be
            JAX-traceable: it runs once per simulation under ``jax.vmap`` / ``jax.lax.map``, compiled once
            per (fit_fn, batch_size, shapes) and reused by later calls with the same function object.
        num_simulations: number of (latent, data) pairs.
        data_sites: the model's observed sites, handed to ``fit_fn``; every other sampled site is latent.
        statistics: mapping from a name to ``f(values) -> scalar``, where ``values`` maps the sites that
            ``fit_fn`` returns to one value each (JAX-traceable; e.g. the number of occupied clusters).
            Default: every scalar latent site that ``fit_fn`` returns.
        thin: keep every ``thin``-th posterior draw (use it to make MCMC draws roughly independent).
        batch_size: None fits all simulations at once with ``jax.vmap``; an int runs ``jax.lax.map`` in
            vmapped batches of that size (less memory; 1 = one simulation at a time).
        num_bins: bins of the chi-square test; default ``num_simulations // 20`` (about 20 expected per
            bin), between 2 and ``num_draws + 1``.

    Example:
        SBC of an exact posterior sampler, which passes:

        >>> import jax, numpyro, numpyro.distributions as dist
        >>> def model():
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        ...     numpyro.sample("x", dist.Normal(mu, 1.0))
        >>> def exact_posterior(key, data):  # mu | x ~ N(x / 2, 1 / 2), 19 draws
        ...     return {"mu": data["x"] / 2 + 0.5**0.5 * jax.random.normal(key, (19,))}
        >>> result = iz.diagnostics.simulation_based_calibration(jax.random.key(0), model, exact_posterior,
        ...                                                      num_simulations=100, data_sites=["x"])
        >>> result.num_simulations, result.num_draws, result.passed(alpha=1e-3)
        (100, 19, True)
    """
    if not (isinstance(rng_key, jax.Array) and jax.dtypes.issubdtype(rng_key.dtype, jax.dtypes.prng_key)):
        raise ValueError("rng_key: expected a JAX PRNG key such as jax.random.key(0)")
    _check_int("num_simulations", num_simulations, minimum=2)
    _check_int("thin", thin, minimum=1)
    if batch_size is not None:
        _check_int("batch_size", batch_size, minimum=1)
    if not callable(model):
        raise ValueError("model: expected a NumPyro model (a callable)")
    if not callable(fit_fn):
        raise ValueError("fit_fn: expected a callable fit_fn(rng_key, data) -> dict of draws")
    try:
        hash(fit_fn)
    except TypeError as err:
        raise ValueError("fit_fn: must be hashable (a function or functools.partial); jax.jit keys on it") from err
    if isinstance(data_sites, str) or not data_sites:
        raise ValueError(f"data_sites: expected a non-empty list of site names, got {data_sites!r}")
    model_kwargs = dict(model_kwargs or {})
    prior_key, fit_key, tie_key = jax.random.split(rng_key, 3)
    _check_data_sites(model, data_sites, prior_key, model_args, model_kwargs)
    # run eagerly: JAX caches each operation across calls, whereas a jit of a fresh closure recompiles
    prior = Predictive(model, num_samples=num_simulations, parallel=True)(prior_key, *model_args, **model_kwargs)
    data = {site: prior[site] for site in data_sites}
    fit_keys = jax.random.split(fit_key, num_simulations)
    draws = _check_draws(_fit_simulations(fit_fn, batch_size, fit_keys, data), prior, data_sites, num_simulations)
    draws = {site: value[:, ::thin] for site, value in draws.items()}
    num_draws = next(iter(draws.values())).shape[1]

    statistics = _default_statistics(draws) if statistics is None else dict(statistics)
    if not statistics:
        raise ValueError("statistics: expected a non-empty mapping from names to functions")
    truth = {site: prior[site] for site in draws}
    tie_rng = np.random.default_rng(np.asarray(jax.random.key_data(tie_key)))
    ranks, pit = {}, {}
    for name, (true_values, draw_values) in _evaluate_statistics(statistics, truth, draws).items():
        ranks[name], pit[name] = _randomised_ranks(tie_rng, true_values, draw_values)

    if num_bins is None:
        num_bins = min(num_draws + 1, max(2, num_simulations // 20))
    _check_int("num_bins", num_bins, minimum=2, maximum=num_draws + 1)
    chi2_p = {name: _chi_square_uniform_ranks(r, num_draws, num_bins) for name, r in ranks.items()}
    ks_p = {name: float(stats.kstest(u, "uniform").pvalue) for name, u in pit.items()}
    p_values = {name: min(1.0, 2.0 * min(chi2_p[name], ks_p[name])) for name in ranks}
    return SBCResult(
        ranks=MappingProxyType(ranks),
        num_draws=num_draws,
        pit=MappingProxyType(pit),
        chi2_p_values=MappingProxyType(chi2_p),
        ks_p_values=MappingProxyType(ks_p),
        p_values=MappingProxyType(p_values),
        p_value=min(1.0, len(p_values) * min(p_values.values())),
        num_bins=num_bins,
        num_simulations=num_simulations,
    )


@partial(jax.jit, static_argnames=("fit_fn", "batch_size"))
def _fit_simulations(fit_fn, batch_size, keys, data):
    """fit_fn on every simulation; compiled once per (fit_fn, batch_size, shapes), reused across calls."""
    if batch_size is None:
        return jax.vmap(fit_fn)(keys, data)
    return jax.lax.map(lambda args: fit_fn(*args), (keys, data), batch_size=batch_size)


def _check_int(name: str, value, *, minimum: int, maximum: int | None = None) -> None:
    if not isinstance(value, (int, np.integer)) or value < minimum or (maximum is not None and value > maximum):
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name}: expected an int {bounds}, got {value!r}")


def _check_data_sites(model, data_sites, rng_key, model_args, model_kwargs) -> None:
    """The data sites must be sample sites that the model samples (not observed) as called."""
    is_observed = {}

    def record_sample_sites(key):
        model_trace = trace(seed(model, key)).get_trace(*model_args, **model_kwargs)
        is_observed.update({name: site["is_observed"] for name, site in model_trace.items() if site["type"] == "sample"})

    jax.eval_shape(record_sample_sites, rng_key)  # abstract run: nothing is computed or compiled
    missing = [site for site in data_sites if site not in is_observed]
    if missing:
        raise ValueError(f"data_sites: {missing} are not sample sites of the model (it has {sorted(is_observed)})")
    observed = [site for site in data_sites if is_observed[site]]
    if observed:
        raise ValueError(
            f"data_sites: {observed} are observed in the model as called; SBC needs the model to sample "
            "them (pass None as their observations)"
        )


def _check_draws(draws, prior, data_sites, num_simulations) -> dict[str, np.ndarray]:
    """Validate fit_fn's output, batched to (num_simulations, num_draws, ...), as numpy arrays."""
    if not isinstance(draws, Mapping) or not draws:
        raise ValueError("fit_fn: must return a non-empty dict mapping site names to posterior draws")
    unknown = sorted(site for site in draws if site not in prior or site in data_sites)
    if unknown:
        raise ValueError(f"fit_fn: returned {unknown}, which are not latent sites of the model")
    draws = {site: np.asarray(value) for site, value in draws.items()}
    lengths = {site: value.shape[1] if value.ndim >= 2 else None for site, value in draws.items()}
    if None in lengths.values() or len(set(lengths.values())) != 1:
        raise ValueError(f"fit_fn: every site needs the same leading number of draws; got {lengths}")
    for site, value in draws.items():
        if value.shape[2:] != np.shape(prior[site])[1:]:
            raise ValueError(
                f"fit_fn: draws of {site!r} have shape {value.shape[2:]} per draw, the model's site "
                f"{np.shape(prior[site])[1:]}"
            )
    return draws


def _default_statistics(draws) -> dict[str, Callable]:
    """One statistic per scalar site among the draws (arrays of shape (num_simulations, num_draws))."""
    scalar_sites = [site for site, value in draws.items() if value.ndim == 2]
    if not scalar_sites:
        raise ValueError("statistics: fit_fn returns no scalar site; pass statistics as functions of the sites")
    return {site: (lambda values, site=site: values[site]) for site in scalar_sites}


def _evaluate_statistics(statistics, truth, draws) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each statistic at every true value (num_simulations,) and every draw (num_simulations, num_draws).

    All statistics are evaluated in one compiled call.
    """

    def evaluate(truth, draws):
        values = {}
        for name, statistic in statistics.items():
            try:
                values[name] = (jax.vmap(statistic)(truth), jax.vmap(jax.vmap(statistic))(draws))
            except KeyError as err:
                raise ValueError(f"statistics[{name!r}]: uses the site {err}, which fit_fn does not return") from err
        return values

    values = jax.tree.map(np.asarray, jax.jit(evaluate)(truth, draws))
    for name, (true_values, draw_values) in values.items():
        if true_values.ndim != 1 or draw_values.ndim != 2:
            raise ValueError(f"statistics[{name!r}]: must return a scalar, got shape {true_values.shape[1:]}")
        if not (np.all(np.isfinite(true_values)) and np.all(np.isfinite(draw_values))):
            bad = np.flatnonzero(~np.isfinite(true_values) | ~np.all(np.isfinite(draw_values), axis=1))
            raise ValueError(f"statistics[{name!r}]: non-finite values in simulations {bad[:10].tolist()}")
    return values


def _randomised_ranks(rng: np.random.Generator, true_values, draw_values) -> tuple[np.ndarray, np.ndarray]:
    """Ranks with ties broken uniformly at random, and the matching continuous PIT values.

    With ``below`` draws under the truth and ``ties`` equal to it, one u ~ U(0, 1) places the truth at
    ``below + u * (ties + 1)`` among the draws: its integer part is the rank (uniform over the tie
    positions) and the whole, divided by num_draws + 1, is U(0, 1) under a correct sampler.
    """
    below = np.sum(draw_values < true_values[:, None], axis=1)
    ties = np.sum(draw_values == true_values[:, None], axis=1)
    u = rng.random(below.shape)
    position = below + u * (ties + 1)
    return np.floor(position).astype(int), position / (draw_values.shape[1] + 1)


def _chi_square_uniform_ranks(ranks, num_draws: int, num_bins: int) -> float:
    """Chi-square p-value of ranks on 0..num_draws against the discrete uniform, in near-equal bins."""
    bin_of_rank = np.arange(num_draws + 1) * num_bins // (num_draws + 1)
    expected = np.bincount(bin_of_rank, minlength=num_bins) / (num_draws + 1) * len(ranks)
    observed = np.bincount(bin_of_rank[ranks], minlength=num_bins)
    return float(stats.chisquare(observed, expected).pvalue)
