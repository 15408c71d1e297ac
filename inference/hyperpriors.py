"""Hyperpriors: hyperparameters that the model file gives a prior, sampled inside the chain.

A field of a model's ``Priors`` may hold a NumPyro distribution instead of a number, e.g.
``models.bcm.Priors(q=dist.Beta(2, 2))``. The model file's programs draw it as a site named after the
field (:func:`sample_hyperparameters`, called at the top of ``model()`` and ``collapsed_model()``), so
``numpyro.infer.Predictive`` draws the hyperparameter, then the rest. The fast sampler runs the model's
kernel inside :func:`with_hyperpriors`: a replica's state is (the kernel's state, the hyperparameter
values h), and each scan first draws h exactly from its conditional given the kernel's state, then rebuilds
the kernel's tables from h and runs the kernel's sweep with them (a Gibbs scan over the two blocks, as
NumPyro's ``HMCGibbs`` combines its blocks). Under tempering only the likelihood is tempered: replica k
targets p(h) p(x | h) L(x)^beta_k, so a hyperparameter that enters the prior alone has the same
conditional at every rung, and the reference at beta = 0 is the prior with the hyperprior in it. On BRL's
path from a reference r of its own (``inference.brl_mh``) the reference becomes r(d) p(h) (``_brl_update``).

Each kernel's model declares what it can follow (:class:`HyperpriorModel`): BCM's q ~ Beta(a, b) (eq. (2):
omega_sj ~ Bernoulli(q) i.i.d.), alpha ~ Gamma(a, b), the concentration of pi_i (eq. (1)), and
lam ~ Gamma(a, b) and c ~ Gamma(a, b), which set g and so phi's Dirichlet (sec. 3) (``_bcm_update``); BRL's
lam ~ Gamma(a, b) and eta ~ Gamma(a, b), the Poisson means of the list's length and of its rules'
cardinalities (Letham eqs. 2-3), and alpha ~ Gamma(a, b), theta_j's symmetric Dirichlet concentration
(eq. 5) (``_brl_update``). Any other hyperprior is refused by name, with what is supported and how to
write it.
"""

from __future__ import annotations

import dataclasses
import inspect
from functools import lru_cache
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax import lax, random
from jax.scipy.special import gammaln

from interpretable_zoo import compiled_hooks
from interpretable_zoo.models import bcm, brl


def is_hyperprior(value) -> bool:
    """True when a Priors field holds a distribution (a hyperprior) rather than a value."""
    return isinstance(value, dist.Distribution)


def hyperpriors_of(priors) -> dict:
    """Field name -> distribution of every field of ``priors`` (a dataclass) that holds a hyperprior."""
    return {f.name: getattr(priors, f.name) for f in dataclasses.fields(priors) if is_hyperprior(getattr(priors, f.name))}


def hyperparameter_names(priors_type) -> tuple:
    """The field names of a Priors class: the names a sampled hyperparameter takes in traces."""
    return tuple(f.name for f in dataclasses.fields(priors_type))


def sampled_hyperparameters(priors_type, summaries) -> tuple:
    """The fields of ``priors_type`` that a run sampled: those among its ``summaries``, in field order."""
    return tuple(name for name in hyperparameter_names(priors_type) if name in summaries)


def concrete_values(priors) -> dict:
    """Field name -> value of the fields of ``priors`` that hold a concrete number, each checked to be a
    finite real; a field holding a hyperprior (a scalar distribution) or a traced value (drawn inside a
    traced program, e.g. under ``jax.jit``) is left out: it is checked where it is sampled."""
    values = {}
    for field in dataclasses.fields(priors):
        value = getattr(priors, field.name)
        if is_hyperprior(value):
            check_scalar(field.name, value)
            continue
        if isinstance(value, jax.core.Tracer):
            continue
        if isinstance(value, (bool, str)) or np.ndim(value) != 0 or not np.issubdtype(np.asarray(value).dtype, np.number):
            raise ValueError(f"priors.{field.name}: expected a number or a NumPyro distribution (a hyperprior), "
                             f"got {value!r}")
        if not np.isfinite(value):
            raise ValueError(f"priors.{field.name}: must be finite, got {value!r}")
        values[field.name] = float(value)
    return values


def check_scalar(name: str, prior) -> None:
    """Raise ValueError naming the field unless the hyperprior ``prior`` is a scalar distribution."""
    if prior.batch_shape != () or prior.event_shape != ():
        raise ValueError(f"priors.{name}: a hyperprior must be a scalar distribution, got batch shape "
                         f"{prior.batch_shape} and event shape {prior.event_shape}")


def refuse_hyperpriors(priors, fit: str, instead: str) -> None:
    """Raise ValueError naming a field of ``priors`` that holds a hyperprior, for a ``fit`` that takes
    numbers only (a variational or closed-form fit has no chain to sample one in); ``instead``: what to do."""
    for name, prior in hyperpriors_of(priors).items():
        raise ValueError(f"priors.{name}: {fit} takes a number, not a hyperprior ({type(prior).__name__}); {instead}")


def sample_hyperparameters(priors):
    """``priors`` with every hyperprior field replaced by a draw of the site named after the field:
    the first lines of a model file's programs, so that every program states the hyperprior once."""
    drawn = {name: numpyro.sample(name, prior) for name, prior in hyperpriors_of(priors).items()}
    return dataclasses.replace(priors, **drawn) if drawn else priors


def at_point(priors):
    """``priors`` with every hyperprior replaced by its mean (concrete, unless the hyperprior's parameters
    are traced): the point at which a kernel's tables are first built and the fit-time check compares the
    kernel with the programs."""
    found = hyperpriors_of(priors)
    means = {name: prior.mean if isinstance(prior.mean, jax.core.Tracer) else float(prior.mean)
             for name, prior in found.items()}
    return dataclasses.replace(priors, **means) if found else priors


class HyperpriorModel(NamedTuple):
    """What a kernel follows of hyperpriors (module-level functions, hashable): ``kernel`` its name in
    messages; ``families``: (field, the distribution class names it samples) pairs;
    ``with_values(static, data, values) -> data``: the kernel's tables rebuilt from the hyperparameter
    values (traceable; the other fields from ``fixed``, see :class:`HyperData`); ``update(static, data,
    state, values, key, beta) -> values``: an exact update (a draw, or a Markov step that leaves it
    invariant) of the hyperparameters ``values`` by their conditional at inverse temperature beta given the
    kernel's state (``data`` a :class:`HyperData`); ``check(hyper_static, data, fixed)``: raises ValueError
    when the model file's hooks leave the update inexact; ``written``: how to write a supported hyperprior;
    ``common_fields``: fields of the kernel's state that are equal in every replica of a step, passed to
    the vmapped step unbatched so that the kernel's branches on them stay branches (BCM's sweep count,
    which picks the sweeps with a split-merge move: batched, both branches would run on every sweep);
    ``module``: the model file whose hooks ``with_values`` calls; ``refresh(static, data, state) -> state``:
    the state's log terms on the tables rebuilt at new values, for a kernel whose step reads the stored
    ones (None: its step recomputes them); ``per_replica(data, n_replicas) -> (data, in_axes)``: the
    kernel's data with the rows it holds per chain repeated for each of the chain's replicas (chain-major),
    and the vmap axes to step each replica with its chain's row (None: data shared by all)."""

    kernel: str
    families: tuple
    with_values: Callable
    update: Callable
    check: Callable
    written: str
    common_fields: tuple = ()
    module: Any = None
    refresh: Callable | None = None
    per_replica: Callable | None = None

    def supported(self) -> str:
        return ", ".join(f"{field} ~ {' or '.join(families)}" for field, families in self.families)

    def __reduce__(self):
        """Pickled as its name (a saved result's target holds it; it holds a module, which pickle refuses)."""
        return _model_named, (self.kernel,)


def _model_named(kernel: str) -> HyperpriorModel:
    return {model.kernel: model for model in (BCM, BRL)}[kernel]


def _read_through(wrapper, name):
    """The attribute ``name`` of the kernel's object a wrapper holds as ``inner`` (dunder names excepted)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(wrapper.inner, name)


class HyperStatic(NamedTuple):
    """The kernel's static, the :class:`HyperpriorModel` and the model file's functions (:func:`model_hooks`),
    hashable: a step traces the hooks, so a hook replaced in a running session makes another static. Other
    attributes read through to the kernel's static."""

    inner: Any
    model: HyperpriorModel
    hooks: tuple

    __getattr__ = _read_through


def model_hooks(module) -> tuple:
    """(name, function) of every function of a model file, for the static key of a program calling its hooks."""
    return tuple((name, value) for name, value in vars(module).items() if inspect.isfunction(value))


class HyperData(NamedTuple):
    """The kernel's data (tables at the hyperprior's mean, rebuilt per replica in a step), the
    hyperpriors (name -> distribution, a pytree) and ``fixed`` (name -> value of the other Priors fields).
    Other attributes read through to the kernel's data."""

    inner: Any
    hyperpriors: dict
    fixed: dict

    __getattr__ = _read_through


class HyperState(NamedTuple):
    """A replica: the kernel's state, the hyperparameter values (name -> scalar), log_prior (the kernel's
    plus log p(h)), log_likelihood (the kernel's) and log_hyperprior, log p(h). Other attributes read through
    to the kernel's state; a kernel's ``log_reference`` (a path from a reference) gets log p(h) added, the
    reference of the hyperparameters (module docstring)."""

    inner: Any
    values: dict
    log_prior: jax.Array
    log_likelihood: jax.Array
    log_hyperprior: jax.Array

    @property
    def log_reference(self):
        return self.inner.log_reference + self.log_hyperprior

    __getattr__ = _read_through


def _log_hyperprior(hyperpriors: dict, values: dict):
    return sum(prior.log_prob(values[name]) for name, prior in hyperpriors.items())


def _wrapped(hyperpriors, values, inner) -> HyperState:
    log_hyperprior = _log_hyperprior(hyperpriors, values)
    return HyperState(inner, values, inner.log_prior + log_hyperprior, inner.log_likelihood, log_hyperprior)


def _prior_draws(hyperpriors: dict, key) -> dict:
    keys = random.split(key, len(hyperpriors))
    return {name: prior.sample(k) for (name, prior), k in zip(sorted(hyperpriors.items()), keys)}


def _one(tree):
    return jax.tree.map(lambda x: x[None], tree)


def _unbatched(tree):
    return jax.tree.map(lambda x: x[0], tree)


def kernel_for(static, kernel):
    """The kernel that runs a target whose static part is ``static``: :func:`with_hyperpriors` of ``kernel``
    for a target with sampled hyperparameters (:class:`HyperStatic`), else ``kernel`` itself."""
    return with_hyperpriors(kernel) if isinstance(static, HyperStatic) else kernel


@lru_cache(maxsize=None)
def with_hyperpriors(kernel):
    """The :class:`~interpretable_zoo.inference.tempering.TargetKernel` ``kernel`` with the hyperparameters of its target's
    :class:`HyperData` in every replica's state (module docstring). A step vmaps ``kernel.step`` over the
    replicas, one batch of one each, since each replica's tables follow its own hyperparameters; the
    kernel's step must compute its states' log terms from the tables it is given (BCM's does; BRL's model
    refreshes them first, ``HyperpriorModel.refresh``), so that the engine's swaps read log_prior and
    log_likelihood at the replica's new hyperparameters. A kernel's adapted proposal (``learn_proposal``,
    ``with_proposal``) passes through to the kernel's data, and so do its rows per chain (``chain_rows``)."""
    from interpretable_zoo.inference.tempering import TargetKernel

    def init(static, data, key):
        key_values, key_inner = jax.random.split(key)
        values = _prior_draws(data.hyperpriors, key_values)
        inner = kernel.init(static.inner, static.model.with_values(static.inner, data, values), key_inner)
        return _wrapped(data.hyperpriors, values, inner)

    def step(static, data, states, keys, betas):
        model = static.model

        def one(inner, values, key, beta, inner_data):
            key_values, key_inner = jax.random.split(key)
            replica_data = data._replace(inner=inner_data)
            values = model.update(static.inner, replica_data, inner, values, key_values, beta)
            inner_data = model.with_values(static.inner, replica_data, values)
            if model.refresh is not None:
                inner = model.refresh(static.inner, inner_data, inner)
            inner, info = kernel.step(static.inner, inner_data, _one(inner), key_inner[None], beta[None])
            return _wrapped(data.hyperpriors, values, _unbatched(inner)), _unbatched(info)

        common = model.common_fields
        inner = states.inner._replace(**{name: getattr(states.inner, name)[0] for name in common})
        inner_axes = jax.tree.map(lambda _: 0, states.inner)._replace(**{name: None for name in common})
        inner_data, data_axes = (data.inner, None) if model.per_replica is None else model.per_replica(
            data.inner, keys.shape[0])
        return jax.vmap(one, in_axes=(inner_axes, 0, 0, 0, data_axes))(
            inner, states.values, keys, jnp.asarray(betas, jnp.result_type(float)), inner_data)

    def summaries(static, data, states):
        return {**kernel.summaries(static.inner, data.inner, states.inner), **states.values}

    def record(static, data, states):
        def one(inner, values):  # on the tables of the replica's hyperparameters (BCM's pointwise terms read g)
            return _unbatched(kernel.record(static.inner, static.model.with_values(static.inner, data, values),
                                            _one(inner)))

        return jax.vmap(one)(states.inner, states.values)

    def learn_proposal(static, data, records, states, proposal, facts):
        return kernel.learn_proposal(static.inner, data.inner, records, states.inner, proposal, facts)

    def with_proposal(static, data, proposal):
        return data._replace(inner=kernel.with_proposal(static.inner, data.inner, proposal))

    def chain_rows(static, data):
        shared = jax.tree.map(lambda _: False, (data.hyperpriors, data.fixed))
        return HyperData(kernel.chain_rows(static.inner, data.inner), *shared)

    proposal = (None, None) if kernel.learn_proposal is None else (learn_proposal, with_proposal)
    return TargetKernel(init, step, summaries, record, *proposal,
                        chain_rows=None if kernel.chain_rows is None else chain_rows,
                        scratch=None if kernel.scratch is None else (lambda static: kernel.scratch(static.inner)))


def target(model: HyperpriorModel, inner_target, priors):
    """(static, data) of :func:`with_hyperpriors` for a kernel target built at :func:`at_point` of
    ``priors``; refuses a hyperprior ``model`` cannot sample (:func:`check_supported`)."""
    check_supported(model, priors)
    static, data = inner_target
    fixed = {name: jnp.asarray(value, jnp.float32) for name, value in compiled_hooks.prior_values(priors).items()
             if not is_hyperprior(value)}
    hyper_static = HyperStatic(static, model, model_hooks(model.module))
    model.check(hyper_static, data, fixed)
    return hyper_static, HyperData(data, hyperpriors_of(priors), fixed)


def initial_states(hyper_target, inner_states, key):
    """One :class:`HyperState` per kernel state (leading axis), the hyperparameters drawn from p(h), then
    updated by their conditional given it (at beta = 1; it is only a start)."""
    static, data = hyper_target

    def one(state, key):
        key_prior, key_update = jax.random.split(key)
        values = static.model.update(static.inner, data, state, _prior_draws(data.hyperpriors, key_prior),
                                     key_update, 1.0)
        return _wrapped(data.hyperpriors, values, state)

    return jax.jit(jax.vmap(one))(inner_states, jax.random.split(key, jax.tree.leaves(inner_states)[0].shape[0]))


def check_supported(model: HyperpriorModel, priors) -> None:
    """Raise ValueError naming the field unless every hyperprior of ``priors`` is one ``model`` samples."""
    for name, prior in hyperpriors_of(priors).items():
        family = type(prior).__name__
        if family not in dict(model.families).get(name, ()):
            raise ValueError(f"priors.{name}: the {model.kernel} does not sample a {family} hyperprior on {name}; "
                             f"it samples {model.supported()}, written {model.written}; give {name} a number "
                             f"otherwise")


def hint(model: HyperpriorModel, priors, site: str) -> str:
    """How to write a hyperprior on ``site`` when a program samples a field of ``priors`` as a site of its
    own ('' when ``site`` is no field)."""
    if site not in {f.name for f in dataclasses.fields(priors)}:
        return ""
    if not model.families:
        return f" The {model.kernel} samples no hyperprior: give {site} a number in Priors."
    return (f" A hyperprior on {site} is written as a Priors field holding its distribution, not as a site of the "
            f"program: {model.written}, passed as priors= (the model file's sample_hyperparameters draws the "
            f"site {site!r}); the {model.kernel} samples {model.supported()}.")


# ---------------------------------------------------------------------------------------------- slice sampling

SLICE_WIDTH = 1.0
"""Initial width of the slice interval on a hyperparameter's log (Neal 2003, sec. 4); any width leaves the
conditional invariant, one about its spread (a Gamma's log has standard deviation near 1 / sqrt(a)) steps
out least."""

SLICE_MAX_STEPS = 16
"""Neal's m. The slice interval steps out at most m widths in all (Neal 2003, fig. 3), split at random
between its two ends, which keeps the update exact."""

SLICE_RESOLUTION = 1e-6
"""Relative width of the slice interval below which shrinkage stops at x (float32 resolution)."""

SLICE_MAX_SHRINKS = 100
"""Shrinkage steps after which the update leaves x where it is (each step shrinks the interval by half on
average: only a density that floats cannot resolve gets there)."""

SLICE_UPDATES = 2
"""Slice-sampling updates of each slice-sampled hyperparameter per step of the kernel."""


def _slice_update(log_density, x, key):
    """One slice-sampling update of the scalar ``x`` for the unnormalised ``log_density`` (Neal 2003,
    figs. 3 and 5: stepping out at most SLICE_MAX_STEPS widths, then shrinkage towards x). An interval
    shrunk to within float32 resolution of x, or SLICE_MAX_SHRINKS shrinkage steps, leave x where it is (a
    density too steep for the floats)."""
    key_level, key_place, key_split, key_shrink = random.split(key, 4)
    level = log_density(x) - random.exponential(key_level)
    left = x - SLICE_WIDTH * random.uniform(key_place)
    left_steps = jnp.floor(SLICE_MAX_STEPS * random.uniform(key_split))

    def step_out(direction, end, steps):
        # The loop carries its condition, decided once per end: a vmapped while loop evaluates its
        # condition in its test and again in its body, and two compilations of a float density can
        # differ in the last bit; at an end within that of the level, the body would stop moving the end
        # while the test goes on for ever.
        def grow(carry):
            end, steps, _ = carry
            end, steps = end + direction * SLICE_WIDTH, steps - 1
            return end, steps, (steps > 0) & (log_density(end) > level)

        return lax.while_loop(lambda c: c[2], grow, (end, steps, (steps > 0) & (log_density(end) > level)))[0]

    left, right = step_out(-1.0, left, left_steps), step_out(1.0, left + SLICE_WIDTH, SLICE_MAX_STEPS - 1 - left_steps)

    def shrink(carry):
        left, right, _, _, key, shrinks = carry
        key, key_point = random.split(key)
        point = left + random.uniform(key_point) * (right - left)
        collapsed = ~(right - left > SLICE_RESOLUTION * (1.0 + jnp.abs(x))) | (shrinks >= SLICE_MAX_SHRINKS)
        point = jnp.where(collapsed, x, point)
        inside = collapsed | (log_density(point) > level)
        return (jnp.where(inside | (point >= x), left, point), jnp.where(inside | (point < x), right, point),
                point, inside, key, shrinks + 1)

    return lax.while_loop(lambda c: ~c[3], shrink, (left, right, x, jnp.array(False), key_shrink, 0))[2]


def _log_scale_slice(log_density, value, key):
    """SLICE_UPDATES slice-sampling updates of a positive ``value`` on u = log value, ``log_density(u)`` the
    log density of u (the Jacobian e^u included by the caller)."""
    keys = random.split(key, SLICE_UPDATES)
    return jnp.exp(lax.fori_loop(0, SLICE_UPDATES, lambda i, u: _slice_update(log_density, u, keys[i]), jnp.log(value)))


def _tables_at_check_points(build_tables, hyper_static: HyperStatic, data, fixed, points: dict, hooks_read: str):
    """(name, [tables at each of ``points[name]``]) for each sampled hyperparameter, the others at their first
    point: ``build_tables(static, hyper data, values, hooks)`` compiled, so the hooks see traced values, as in a
    step. A hook that cannot take one is refused naming the field (``hooks_read``: the hooks, in the message)."""
    static, hyper_data = hyper_static.inner, HyperData(data, {}, fixed)
    build = jax.jit(build_tables, static_argnums=(0, 3))
    sampled = {name: jnp.float32(values[0]) for name, values in points.items() if name not in fixed}
    for name in sorted(sampled):
        try:
            tables = [build(static, hyper_data, {**sampled, name: jnp.float32(value)}, hyper_static.hooks)
                      for value in points[name]]
        except jax.errors.JAXTypeError as error:
            raise ValueError(f"priors.{name}: a hyperprior on {name} is sampled by evaluating {hooks_read} at traced "
                             f"values of {name}, which the edited hooks do not allow ({type(error).__name__}): give "
                             f"{name} a number") from None
        yield name, tables


# ---------------------------------------------------------------------------------------------- BCM


BCM_TABLES = ("g", "omega_distribution", "prototype_distribution", "z_concentration")
"""The hooks whose tables ``_bcm_tables`` builds, in its order."""

BCM_REBUILT = {"q": "omega_distribution", "alpha": "z_concentration", "lam": "g", "c": "g"}
"""The hook whose table a step rebuilds from each sampled hyperparameter; the others are built once."""

BCM_CHECK_POINTS = {"q": (0.25, 0.7), "alpha": (0.5, 4.0), "lam": (0.5, 4.0), "c": (2.0, 40.0)}
"""Two values of each hyperparameter at which ``_bcm_check`` compares the hooks' tables."""


def _bcm_tables(static, data: HyperData, values, hooks=()):
    """g, omega_log_prob, prototype_log_prob and pi_concentration (:data:`BCM_TABLES`) from the model file's
    hooks at the hyperparameter values (``hooks``: :func:`model_hooks`, the static key of a compiled call);
    the prototypes' prior over the observations alone (``bcm_gibbs.over_observations``: their number is
    data, so targets padded to one size share the program)."""
    from interpretable_zoo.inference import bcm_gibbs  # imports models.bcm, which imports this module

    priors = compiled_hooks.priors_with(bcm.Priors, {**data.fixed, **values})
    g, omega_log_prob, prototype_log_prob = bcm_gibbs.hook_tables(priors, static.n_obs, static.n_features,
                                                                  static.n_clusters, static.n_values)
    return (g, omega_log_prob, bcm_gibbs.over_observations(prototype_log_prob, data.observed, jnp),
            jnp.asarray(bcm.z_concentration(priors, static.n_clusters), jnp.float32))


def _bcm_likelihood_tables(static, data: HyperData, g):
    """g_values, log_gamma_table, log_count_table and log_beta_prior of the kernel's data rebuilt from g
    (2, V, V)."""
    from interpretable_zoo.inference import bcm_gibbs  # imports models.bcm, which imports this module

    inner = data.inner
    return bcm_gibbs.likelihood_tables(g.astype(inner.g_values.dtype), inner.value_mask, static.n_obs, inner.g_offsets,
                                       inner.g_total_offsets, jnp)


def _bcm_with_values(static, data: HyperData, values):
    """The BCM tables with omega_log_prob (``models.bcm.omega_distribution``) and pi_concentration
    (``models.bcm.z_concentration``) at the values, and the likelihood's tables from g (``models.bcm.g``)
    when lam or c is sampled."""
    g, omega_log_prob, _, pi_concentration = _bcm_tables(static, data, values)
    inner = data.inner._replace(omega_log_prob=omega_log_prob.astype(data.inner.omega_log_prob.dtype),
                                pi_concentration=pi_concentration.astype(data.inner.pi_concentration.dtype))
    if not {"lam", "c"} & data.hyperpriors.keys():
        return inner
    g_values, table, log_count_table, log_beta_prior = _bcm_likelihood_tables(static, data, g)
    return inner._replace(g_values=g_values, log_gamma_table=table.astype(inner.log_gamma_table.dtype),
                          log_count_table=log_count_table.astype(inner.log_count_table.dtype),
                          log_beta_prior=log_beta_prior.astype(inner.log_beta_prior.dtype))


def _bcm_log_likelihood_at(static, data: HyperData, state) -> Callable:
    """values -> log p(x | z, omega, prototypes) with g (``models.bcm.g``) at the hyperparameter values, phi
    integrated out (eq. (2): sum_sj log B(g_sj + n_sj) - log B(g_sj)), for the state's counts.

    Cell (s, j) reads row r = (omega_sj, p_sj's value) of g, so the sum only needs, per row r, value u and
    count n, how many cells have n_sju = n (and per row, number of values V_j and total N_sj, how many cells
    have them): log Gamma is then evaluated 2 V^2 (N + 1) times per value of g instead of about 2 S P V.
    The histograms are built once per update, where that is fewer evaluations."""
    from interpretable_zoo.inference import bcm_gibbs  # imports models.bcm, which imports this module

    n_vals, n_obs = static.n_values, static.n_obs
    cells = bcm_gibbs.cells_by_cluster(static, state.cell_counts)  # (S, P, V)
    prototype_values = data.x[state.prototype]  # (S, P)

    def g_at(values):
        return _bcm_tables(static, data, values)[0]  # (2, V, V) over (b, v, u)

    if 2 * n_vals * n_vals * (n_obs + 1) >= static.n_clusters * static.n_features * (n_vals + 1):
        def direct(values):
            concentration = jnp.where(data.value_mask[None], g_at(values)[state.omega, prototype_values], 0.0)
            return bcm.log_polya(cells, concentration, data.value_mask).sum()

        return direct

    rows = state.omega * n_vals + prototype_values  # (S, P): the row of g each cell reads
    by_value = jnp.zeros((2 * n_vals, n_vals, n_obs + 1)).at[rows[..., None], jnp.arange(n_vals), cells].add(
        data.value_mask.astype(jnp.float32))
    last_value = data.value_mask.sum(-1) - 1  # (P,): V_j - 1, where the row's partial sum of g is its total
    by_total = jnp.zeros((2 * n_vals, n_vals, n_obs + 1)).at[rows, last_value, cells.sum(-1)].add(1.0)
    counts = jnp.arange(n_obs + 1)

    def terms(histogram, concentration):  # sum of histogram * (log Gamma(a + n) - log Gamma(a)), a per (row, u)
        shifted = jnp.where(histogram > 0, histogram * gammaln(concentration[..., None] + counts), 0.0).sum()
        cells_of = histogram.sum(-1)
        return shifted - jnp.where(cells_of > 0, cells_of * gammaln(concentration), 0.0).sum()

    def from_histograms(values):
        g = g_at(values).reshape(2 * n_vals, n_vals)
        return terms(by_value, g) - terms(by_total, jnp.cumsum(g, -1))

    return from_histograms


def _bcm_update(static, data, state, values, key, beta):
    """q | omega ~ Beta(a + sum omega, b + S P - sum omega) (eq. (2), conjugate); alpha | z by slice sampling
    on log alpha, density p(alpha) alpha p(z | alpha) with pi integrated out (the row term of eq. (1)).
    Both enter the prior alone, so their conditionals are the same at every beta. lam, then c, each by
    slice sampling on its log given the state and the other, density p(h) h p(x | z, omega, prototypes)^beta
    with phi integrated out (eq. (2)): they enter the likelihood, which the rung tempers; the likelihood's
    tables are rebuilt per replica from the new value."""
    from interpretable_zoo.inference import bcm_gibbs  # imports models.bcm, which imports this module

    values = dict(values)
    key_q, key_alpha, key_lam, key_c = random.split(key, 4)
    log_likelihood = _bcm_log_likelihood_at(static, data, state) if {"lam", "c"} & data.hyperpriors.keys() else None
    for name, key_field in (("lam", key_lam), ("c", key_c)):
        if name in data.hyperpriors:

            def log_density(u, name=name, prior=data.hyperpriors[name]):
                return prior.log_prob(jnp.exp(u)) + u + beta * log_likelihood({**values, name: jnp.exp(u)})

            values[name] = _log_scale_slice(log_density, values[name], key_field).astype(values[name].dtype)
    if "q" in data.hyperpriors:
        prior = data.hyperpriors["q"]
        active = state.omega.sum().astype(jnp.result_type(float))
        cells = static.n_clusters * static.n_features
        values["q"] = jax.random.beta(key_q, prior.concentration1 + active, prior.concentration0 + cells - active)
    if "alpha" in data.hyperpriors:
        prior = data.hyperpriors["alpha"]

        def log_density(u):
            concentration = _bcm_tables(static, data, {**values, "alpha": jnp.exp(u)})[3]
            return prior.log_prob(jnp.exp(u)) + u + bcm_gibbs.log_row_term(concentration, state.row_counts)

        values["alpha"] = _log_scale_slice(log_density, values["alpha"], key_alpha).astype(values["alpha"].dtype)
    return values


def _bcm_check(hyper_static: HyperStatic, data, fixed) -> None:
    """Each sampled hyperparameter may enter only the table its update rebuilds (:data:`BCM_REBUILT`; the
    prototypes' prior is built once), at traced values; q's conjugate update also needs omega_sj ~
    Bernoulli(q) in every cell."""
    for name, tables in _tables_at_check_points(_bcm_tables, hyper_static, data, fixed, BCM_CHECK_POINTS,
                                                "models.bcm's hooks"):
        if name == "q" and not all(np.allclose(np.asarray(omega_log_prob), np.log([1.0 - q, q]), atol=1e-5)
                                   for q, (_, omega_log_prob, _, _) in zip(BCM_CHECK_POINTS["q"], tables)):
            raise ValueError("priors.q: the Beta hyperprior on q is sampled from its conjugate conditional, which "
                             "needs models.bcm.omega_distribution to be Bernoulli(priors.q) in every cell; the edited "
                             "hook is not: give q a number")
        reading = [hook for hook, first, second in zip(BCM_TABLES, *tables)
                   if hook != BCM_REBUILT[name] and not np.allclose(np.asarray(first), np.asarray(second))]
        if reading:
            raise ValueError(f"priors.{name}: a hyperprior on {name} is followed only when {name} enters "
                             f"{BCM_REBUILT[name]} alone; the edited hooks {', '.join(reading)} read it too: give "
                             f"{name} a number")


BCM = HyperpriorModel(
    kernel="BCM collapsed Gibbs kernel",
    families=(("q", ("Beta",)), ("alpha", ("Gamma",)), ("lam", ("Gamma",)), ("c", ("Gamma",))),
    with_values=_bcm_with_values,
    update=_bcm_update,
    check=_bcm_check,
    written="models.bcm.Priors(q=numpyro.distributions.Beta(a, b), alpha=numpyro.distributions.Gamma(a, b), "
            "lam=numpyro.distributions.Gamma(a, b), c=numpyro.distributions.Gamma(a, b))",
    common_fields=("sweeps",),
    module=bcm,
)

# ---------------------------------------------------------------------------------------------- BRL


def _brl_priors(data: HyperData, values) -> brl.Priors:
    return compiled_hooks.priors_with(brl.Priors, {**data.fixed, **values})


def _brl_hook_tables(static, data: HyperData, values, hooks=()):
    """The length and cardinality tables of ``models.brl.PriorTables`` from the model file's hooks at the
    hyperparameter values (``hooks``: :func:`model_hooks`, the static key of a compiled call)."""
    return brl.hook_tables(_brl_priors(data, values), static.max_cardinality, static.capacity)


def _brl_with_values(static, data: HyperData, values):
    """The BRL tables with the list prior's length and cardinality tables from the model file's hooks at
    the values, and the likelihood evaluated at alpha (``models.brl.DirichletConcentration``) when alpha
    is sampled."""
    length, cardinality = _brl_hook_tables(static, data, values)
    prior = data.inner.prior
    inner = data.inner._replace(prior=prior._replace(length=length.astype(prior.length.dtype),
                                                     cardinality=cardinality.astype(prior.cardinality.dtype)))
    if "alpha" not in data.hyperpriors:
        return inner
    return inner._replace(likelihood=brl.DirichletConcentration(_brl_alpha_vector(static, values["alpha"])))


def _brl_alpha_vector(static, alpha):
    """theta_j's symmetric Dirichlet concentration (L,) at a sampled alpha (Letham eq. 5)."""
    return jnp.full(static.n_classes, alpha, jnp.float32)


def _brl_log_likelihood(static, counts, alpha):
    """log p(y | d, alpha) of a list with label counts ``counts`` (``inference.brl_mh.label_counts``) at a
    sampled alpha, theta integrated out (Letham eq. 5)."""
    return brl.log_marginal_likelihood_from_tables(brl.DirichletConcentration(_brl_alpha_vector(static, alpha)), counts)


def _brl_log_prior(static, data, state):
    """log p(d | A, lam, eta) of the state's list on the tables of ``data`` (Letham eqs. 2-4)."""
    rule_cardinality = data.cardinality_index[jnp.maximum(state.rules, 0)]
    return brl.log_prior_from_tables(data.prior, rule_cardinality, state.length, static.cardinalities_can_run_out)


def _brl_refresh(static, data, state):
    """The list's log prior on the rebuilt tables, and its log likelihood at a sampled alpha: the kernel's
    step reads the stored ones."""
    from interpretable_zoo.inference import brl_mh  # imports models.brl, which imports this module

    state = state._replace(log_prior=_brl_log_prior(static, data, state))
    if not isinstance(data.likelihood, brl.DirichletConcentration):
        return state
    counts = brl_mh.label_counts(data, state.rules, state.length)
    return state._replace(log_likelihood=_brl_log_likelihood(static, counts, data.likelihood.alpha[0]))


def _brl_update(static, data: HyperData, state, values, key, beta):
    """Each sampled hyperparameter h of alpha, eta and lam in turn, given the list and the others, at inverse
    temperature beta. BRL's path starts from a reference r of its own, pi_beta(d) proportional to
    r(d)^(1 - beta) (p(d) L(d))^beta (``inference.brl_mh``): with a hyperprior the reference becomes
    r(d) p(h) and the prior p(h) p(d | h), so that pi_beta(d, h) is proportional to
    p(h) r(d)^(1 - beta) (p(d | h) L(d))^beta. lam's and eta's conditional is then proportional to
    p(h) p(d | lam, eta)^beta, alpha's (which enters L) to p(alpha) p(y | d, alpha)^beta, its likelihood
    evaluated directly (``models.brl.DirichletConcentration``); SLICE_UPDATES slice-sampling updates of
    u = log h, whose density is p(e^u) e^u times that factor at e^u, the list prior from tables rebuilt at
    e^u (so any hook reading lam or eta is followed); at beta = 0 an independent draw from p(h), as the
    kernel then redraws the list from the reference: the replica's h is drawn from p(h) as its list is
    drawn from r."""
    from interpretable_zoo.inference import brl_mh  # imports models.brl, which imports this module

    values = dict(values)
    counts = brl_mh.label_counts(data, state.rules, state.length) if "alpha" in data.hyperpriors else None
    for (name, prior), key_field in zip(sorted(data.hyperpriors.items()), random.split(key, len(data.hyperpriors))):

        def log_density(u, name=name, prior=prior):
            if name == "alpha":
                return prior.log_prob(jnp.exp(u)) + u + beta * _brl_log_likelihood(static, counts, jnp.exp(u))
            tables = _brl_with_values(static, data, {**values, name: jnp.exp(u)})
            return prior.log_prob(jnp.exp(u)) + u + beta * _brl_log_prior(static, tables, state)

        key_prior, key_slice = random.split(key_field)
        drawn = _log_scale_slice(log_density, values[name], key_slice)
        values[name] = jnp.where(beta == 0, prior.sample(key_prior), drawn).astype(values[name].dtype)
    return values


def _brl_per_replica(data, n_replicas: int):
    """Each replica's row of the proposal tables that ``inference.brl_mh.per_chain`` gives every chain."""
    from interpretable_zoo.inference import brl_mh  # imports models.brl, which imports this module

    if data.ticket_bounds.ndim == 1:
        return data, None
    per_chain = n_replicas // data.ticket_bounds.shape[0]
    rows = {name: jnp.repeat(getattr(data, name), per_chain, axis=0) for name in brl_mh.PER_CHAIN_FIELDS}
    axes = type(data)(*(0 if name in brl_mh.PER_CHAIN_FIELDS else None for name in type(data)._fields))
    return data._replace(**rows), axes


BRL_CHECK_POINTS = {"lam": (0.5, 4.0), "eta": (0.5, 4.0), "alpha": (0.5, 4.0)}
"""Two values of each hyperparameter at which ``_brl_check`` builds the list prior's tables."""


def _brl_check(hyper_static: HyperStatic, data, fixed) -> None:
    """The update rebuilds the list prior's tables at traced values of each sampled hyperparameter: the
    hooks must allow that and give a finite log probability somewhere; alpha's update reads the likelihood
    alone, so the hooks must not read alpha."""
    hooks_read = "the list prior's hooks (models.brl.log_length_prior, log_cardinality_prior)"
    for name, tables in _tables_at_check_points(_brl_hook_tables, hyper_static, data, fixed, BRL_CHECK_POINTS,
                                                hooks_read):
        if not all(np.isfinite(np.asarray(table)).any() for pair in tables for table in pair):
            raise ValueError(f"priors.{name}: the list prior's hooks give no finite log probability at {name} = 0.5 "
                             "or 4")
        if name == "alpha" and not all(np.allclose(np.asarray(first), np.asarray(second), equal_nan=True)
                                       for first, second in zip(*tables)):
            raise ValueError("priors.alpha: a hyperprior on alpha is followed only when alpha enters theta's "
                             f"Dirichlet alone; the edited hooks of {hooks_read} read it too: give alpha a number")


BRL = HyperpriorModel(
    kernel="BRL Metropolis-Hastings kernel",
    families=(("lam", ("Gamma",)), ("eta", ("Gamma",)), ("alpha", ("Gamma",))),
    with_values=_brl_with_values,
    update=_brl_update,
    check=_brl_check,
    written="models.brl.Priors(lam=numpyro.distributions.Gamma(a, b), eta=numpyro.distributions.Gamma(a, b), "
            "alpha=numpyro.distributions.Gamma(a, b))",
    module=brl,
    refresh=_brl_refresh,
    per_replica=_brl_per_replica,
)
