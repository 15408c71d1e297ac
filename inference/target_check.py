"""Fit-time check that a fast kernel samples the target its model file states (DESIGN.md: "The model
file is the single source of truth").

A kernel reads its prior and likelihood tables from the model file's hooks, but a researcher may also
edit the NumPyro programs themselves: add a hyperprior site, write a distribution inline instead of
through a hook, or change ``model()`` alone. Before sampling, :func:`check_brl` and :func:`check_bcm`
compare the kernel with the programs (traced with ``numpyro.handlers.trace``) on a miniature of the
fit: the fit's priors and the structure that selects the programs' and the kernel's code paths (BRL: the
number of classes, the antecedent cardinalities present and whether each can run out within a list; BCM:
the number of clusters), with a few antecedents or features and a few rows of fixed random data. What is
checked is code, not data, so the miniature's shapes do not depend on the data. Both the programs' sites
and the log densities at :data:`N_STATES` kernel states must agree (:func:`check_target`).

MGM's coordinate ascent and Bayesian Sets' closed form assume one program outright; :func:`check_mgm` and
:func:`check_bayesian_sets` trace it on a miniature with its sites set to fixed values and compare every
site's family and parameters with the ones those formulas use (:func:`check_assumptions`).

Otherwise it raises :class:`ModelMismatchError` naming the site and what the kernel supports: a prior
edit is followed exactly or refused, never silently ignored. The check compiles once per miniature shape
and binding of the model file (:func:`evaluate`), and a verdict is remembered, so a refit checks nothing
again.
"""

from __future__ import annotations

import re
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.infer.util import compute_log_probs

from interpretable_zoo import compiled_hooks, compiled_programs
from interpretable_zoo.inference import bcm_gibbs, brl_mh, hyperpriors
from interpretable_zoo.models import bcm, brl

N_STATES = 8
"""States the values check compares the kernel and the programs at."""

RTOL, ATOL = 2e-5, 1e-3
"""Tolerance of one difference spread, RTOL times the largest magnitude of the two sides, plus ATOL
(float32 sums of many log Gamma terms; an edited prior moves the difference by far more)."""

LOG_ZERO = -1e20
"""Log probabilities below this count as log 0 (programs write -1e30 for it where -inf is not allowed)."""


class ModelMismatchError(ValueError):
    """The model file's program and the fast kernel's target differ: a prior edit the kernel cannot follow."""


class SiteRule(NamedTuple):
    """Sites of a program (names fully matching ``pattern``) that a kernel handles: distribution families
    ``families`` (class names, seen through ``Independent``, ``expand`` and masks), entering the kernel's
    term ``part``."""

    pattern: str
    families: tuple[str, ...]
    part: str


class TargetSpec(NamedTuple):
    """How a kernel's target relates to the model file's programs (module-level functions, so that the
    spec is hashable and the jitted evaluation is cached across fits).

    kernel: its name in messages; model: the model file's module; programs(statics, arrays, priors):
    ((program, args, kwargs) of the collapsed program, the same of ``model()``); sampled: a
    :class:`SiteRule` for every site of the collapsed program; shared: names of the latent sites
    ``model()`` states as the collapsed program does (hyperprior sites among them, :func:`with_hyperprior_sites`);
    integrated: :class:`SiteRule` of ``model()``'s
    other sites; kernel_states(kernel_static, kernel_data, raw): the kernel's states (batch) of the raw
    state arrays; values(statics, arrays, state): the collapsed program's latent site values at one
    kernel state; references(statics, arrays, priors, values): further part -> value per state that the
    kernel's parts must match; parameters(statics, arrays, trace, values): label -> (value in
    ``model()``, what the kernel's tables assume) for the integrated sites; kernel_parts(statics, arrays,
    states): part -> (K,) kernel log terms; supported: what the kernel follows and where to edit;
    hyperpriors: the ``inference.hyperpriors.HyperpriorModel`` of the hyperpriors the kernel samples.
    """

    kernel: str
    model: object
    programs: Callable
    sampled: tuple
    shared: tuple
    integrated: tuple
    kernel_states: Callable
    values: Callable
    references: Callable
    parameters: Callable
    kernel_parts: Callable
    supported: str
    hyperpriors: object = None


class Miniature(NamedTuple):
    """A problem of the fit's structure: hashable ``statics`` (the programs' shapes), ``kernel_static``,
    ``arrays`` (its data and the kernel's data under ``"kernel"``) and ``raw`` state arrays (N_STATES,
    ...)."""

    statics: tuple
    kernel_static: object
    arrays: dict
    raw: dict


class _Concrete(NamedTuple):
    """Priors compiled in as constants (for programs that need them concrete)."""

    priors: object


class _Key(NamedTuple):
    """The static part of one evaluation: the spec, the miniature's shapes, every binding of the model
    module, and the priors' class with the tree and shapes of their values (values traced) or
    ``_Concrete`` priors."""

    spec: TargetSpec
    statics: tuple
    kernel_static: object
    bindings: tuple
    priors: object
    prior_shapes: tuple


def base_distribution(fn):
    """A site's distribution seen through ``to_event``, ``expand`` and masks."""
    while isinstance(fn, (dist.Independent, dist.ExpandedDistribution, dist.MaskedDistribution)):
        fn = fn.base_dist
    return fn


def family(fn) -> str:
    """The class name of a site's base distribution (:func:`base_distribution`)."""
    return type(base_distribution(fn)).__name__


def base_parameter(fn, name: str):
    """Parameter ``name`` of a site's base distribution, broadcast to the site's shape."""
    return jnp.broadcast_to(getattr(base_distribution(fn), name), fn.batch_shape + fn.event_shape)


def _matches(name: str, patterns) -> bool:
    return any(re.fullmatch(pattern, name) for pattern in patterns)


def _rule_of(name: str, rules):
    return next((rule for rule in rules if re.fullmatch(rule.pattern, name)), None)


def _bindings(module) -> tuple:
    """Every name bound in ``module`` with its value (its id when unhashable; a function with its code):
    the programs' inputs that are neither arguments nor library code."""

    def hashable(value):
        if isinstance(value, types.FunctionType):
            return value, value.__code__
        try:
            hash(value)
        except TypeError:
            return id(value)
        return value

    return tuple(sorted((name, hashable(value)) for name, value in vars(module).items() if not name.startswith("__")))


def _site_facts(trace) -> dict:
    return {name: (family(site["fn"]), bool(site["is_observed"])) for name, site in trace.items() if site["type"] == "sample"}


def _support_point(fn, sample_shape):
    """A value in the support of ``fn`` without sampling: 0 for a discrete site, else its mean (None
    when it has none: the site is then sampled)."""
    shape = tuple(sample_shape) + fn.batch_shape + fn.event_shape
    if fn.support.is_discrete:
        return jnp.zeros(shape, jnp.int32)
    try:
        return jnp.broadcast_to(fn.mean, shape)
    except (NotImplementedError, AttributeError):
        return None


def _log_probs(program, args, kwargs, values: dict):
    """Site log probabilities and trace of ``program`` at ``values``; its other latent sites stand at
    ``_support_point`` (their log probabilities are not compared, their parameters are)."""

    def value(msg):
        if msg["type"] != "sample" or msg["is_observed"]:
            return None
        if msg["name"] in values:
            return values[msg["name"]]
        return _support_point(msg["fn"], msg["kwargs"].get("sample_shape", ()))

    return compute_log_probs(handlers.seed(handlers.substitute(program, substitute_fn=value), 0), args, kwargs, {})


_SITE_FACTS: dict = {}


def _evaluate(key: _Key, arrays, priors, raw):
    """The kernel's states and parts, and per state the collapsed program's site log probabilities,
    ``model()``'s of the shared sites, the references and the parameters; records each program's site
    facts in ``_SITE_FACTS[key]``."""
    spec, statics = key.spec, key.statics
    sites = _SITE_FACTS.setdefault(key, {})
    states = spec.kernel_states(key.kernel_static, arrays["kernel"], raw)
    (collapsed, c_args, c_kwargs), (generative, g_args, g_kwargs) = spec.programs(statics, arrays, priors)

    def one(state):
        values = spec.values(statics, arrays, state)
        collapsed_log_probs, collapsed_trace = _log_probs(collapsed, c_args, c_kwargs, values)
        shared = {name: value for name, value in values.items() if _matches(name, spec.shared)}
        generative_log_probs, generative_trace = _log_probs(generative, g_args, g_kwargs, shared)
        sites["collapsed"], sites["generative"] = _site_facts(collapsed_trace), _site_facts(generative_trace)
        integrated = all(any(re.fullmatch(rule.pattern, site) for site in generative_trace) for rule in spec.integrated)
        parameters = spec.parameters(statics, arrays, generative_trace, values) if integrated else {}
        generative_shared = {name: lp for name, lp in generative_log_probs.items() if _matches(name, spec.shared)}
        return collapsed_log_probs, generative_shared, spec.references(statics, arrays, priors, values), parameters

    kernel = (states.log_prior + states.log_likelihood, spec.kernel_parts(statics, arrays, states))
    return (kernel, *jax.vmap(one)(states))


@partial(jax.jit, static_argnums=0, compiler_options={"xla_backend_optimization_level": 0})
def _evaluate_jit(key: _Key, arrays, prior_values, raw):
    return _evaluate(key, arrays, _priors_of(key.priors, prior_values), raw)


def _prior_values(priors) -> dict:
    """The fields of ``priors`` (a dataclass) as float32 arrays: the arguments of a compiled check."""
    return jax.tree.map(partial(np.asarray, dtype=np.float32), compiled_hooks.prior_values(priors))


def _priors_of(priors_key, prior_values):
    """The priors a compiled check evaluates: traced ``prior_values`` of the class ``priors_key``, or the
    concrete priors of a ``_Concrete`` key (None stays None)."""
    if priors_key is None or isinstance(priors_key, _Concrete):
        return getattr(priors_key, "priors", None)
    return compiled_hooks.priors_with(priors_key, prior_values)


_COMPILED = compiled_programs.package_cache({})


def evaluate(spec: TargetSpec, miniature: Miniature, priors) -> tuple:
    """(site facts, the evaluation): traces the kernel and the programs on the miniature (hyperparameter
    values as arguments, or as constants when a program needs them concrete) and returns the programs'
    site facts and a function computing ((kernel log target, kernel parts), collapsed log probs,
    generative log probs of the shared sites, references, parameters), compiled on its first call, so
    that a program refused for its structure compiles nothing.

    Cost: the kernel's log terms at the states and both programs (their integrated sites set to a point of
    their support instead of sampled) are evaluated in one jitted function of the miniature's arrays and
    the hyperparameter values, compiled once per miniature shape and every binding of the model file's
    module (an edit there traces the programs again) and kept by the persistent compilation cache. A
    program that needs concrete hyperparameters (NumPy on them) is compiled with them as constants
    instead."""
    prior_values = _prior_values(priors)
    # the values are traced arguments: their tree and shapes are part of the program (alpha as a pair or a number)
    shapes = (jax.tree.structure(prior_values), tuple(np.shape(leaf) for leaf in jax.tree.leaves(prior_values)))
    key = _Key(spec, miniature.statics, miniature.kernel_static, _bindings(spec.model), type(priors), shapes)
    try:
        traced = None if key in _COMPILED else _evaluate_jit.trace(key, miniature.arrays, prior_values, miniature.raw)
    except (TypeError, jax.errors.JAXTypeError):  # non-numeric hyperparameters, or NumPy on traced values
        _SITE_FACTS.pop(key, None)
        key, prior_values = key._replace(priors=_Concrete(priors)), {}
        traced = None if key in _COMPILED else _evaluate_jit.trace(key, miniature.arrays, prior_values, miniature.raw)

    def run():
        if key not in _COMPILED:
            _COMPILED[key] = traced.lower().compile()
        return jax.tree.map(np.asarray, _COMPILED[key](miniature.arrays, prior_values, miniature.raw))

    return _SITE_FACTS[key], run


def _describe(rules) -> str:
    return ", ".join(f"{rule.pattern} ({' or '.join(rule.families)})" for rule in rules)


def _program_name(program) -> str:
    return f"{program.__module__.rsplit('.', 1)[-1]}.{program.__name__}"


def check_structure(spec: TargetSpec, program, sites: dict, rules, role: str, priors=None) -> None:
    """Every site of ``program`` matches one of ``rules`` with an accepted family, and every rule a site.
    A latent site named after a field of ``priors`` is refused with how to write a hyperprior."""
    name = _program_name(program)
    for site, (site_family, observed) in sites.items():
        rule = _rule_of(site, rules)
        if rule is None:
            how = "" if observed or priors is None or spec.hyperpriors is None else hyperpriors.hint(
                spec.hyperpriors, priors, site)
            raise ModelMismatchError(
                f"{name} has a{'n observed' if observed else ' latent'} site {site!r} ({site_family}) that the "
                f"{spec.kernel} does not {role}; it handles the sites {_describe(rules)}. {spec.supported}{how}"
            )
        if site_family not in rule.families:
            raise ModelMismatchError(
                f"{name}: site {site!r} is {site_family}; the {spec.kernel} handles it only as "
                f"{' or '.join(rule.families)}. {spec.supported}"
            )
    for rule in rules:
        if not any(re.fullmatch(rule.pattern, site) for site in sites):
            raise ModelMismatchError(
                f"{name} has no site {rule.pattern} ({' or '.join(rule.families)}), which the {spec.kernel} "
                f"{role}s. {spec.supported}"
            )


def _spread_problem(label: str, ours, theirs) -> str | None:
    """A message unless ``ours - theirs`` (K,) is one constant within tolerance over the states that both
    sides find possible, and the two sides agree on which states are impossible (:data:`LOG_ZERO`)."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    if np.isnan(ours).any() or np.isnan(theirs).any():
        return f"{label} is NaN at some of {ours.size} states"
    possible = ours > LOG_ZERO
    if np.any(possible != (theirs > LOG_ZERO)):
        return f"{label}: one side gives probability 0 where the other does not, at {np.sum(possible != (theirs > LOG_ZERO))} of {ours.size} states"
    if not possible.any():
        return None
    ours, theirs = ours[possible], theirs[possible]
    spread = float(np.ptp(ours - theirs))
    tolerance = RTOL * max(float(np.max(np.abs(ours))), float(np.max(np.abs(theirs)))) + ATOL
    if spread <= tolerance:
        return None
    return f"{label} is not one constant: it varies by {spread:.4g} over {ours.size} states (tolerance {tolerance:.2g})"


def check_target(spec: TargetSpec, miniature: Miniature, priors) -> None:
    """Raise :class:`ModelMismatchError` unless the kernel's target at the miniature's states is the
    collapsed program's and ``model()`` integrates to it.

    Structure: every site of the collapsed program must be one the kernel samples (or observes), with a
    distribution family it handles; every site that the generative ``model()`` adds must be one the kernel
    integrates out, with the family and parameters the kernel's tables assume.

    Values: at :data:`N_STATES` kernel states (half drawn from the kernel's own prior tables, half spread
    over the supports: every list length, uniform subspaces and assignments), the kernel's ``log_prior +
    log_likelihood`` minus ``numpyro.infer.util.log_density`` of the collapsed program must be one
    constant, and so must each part of it that the kernel can name (e.g. its log prior of omega against
    the site ``omega``); the sites that ``model()`` shares with the collapsed program must have the same
    log probability in both. A state that one side gives probability 0 must be impossible on the other."""
    collapsed, generative = (program for program, _, _ in spec.programs(miniature.statics, miniature.arrays, priors))
    sites, run = evaluate(spec, miniature, priors)
    check_structure(spec, collapsed, sites["collapsed"], spec.sampled, "sample or observe", priors)
    rules = tuple(rule for rule in spec.sampled if rule.pattern in spec.shared) + spec.integrated
    check_structure(spec, generative, sites["generative"], rules, "sample, observe or integrate out", priors)
    (kernel_log_target, kernel_parts), collapsed_log_probs, generative_log_probs, references, parameters = run()
    name = _program_name(collapsed)

    program_parts = {}
    for site, log_prob in collapsed_log_probs.items():
        part = _rule_of(site, spec.sampled).part
        if part == HYPERPRIOR_PART:  # at one point for every state: a constant of the log joint
            continue
        program_parts[part] = program_parts.get(part, 0.0) + log_prob
    problems = []
    for part, value in program_parts.items():
        patterns = ", ".join(rule.pattern for rule in spec.sampled if rule.part == part)
        kind = "likelihood" if part == "likelihood" else "prior"
        problems.append(_spread_problem(f"the log {kind} of the sites {patterns} in {name} minus the {spec.kernel}'s",
                                        kernel_parts[part], value))
    problems += [_spread_problem(f"{label} minus the log prior that the {spec.kernel} builds from Priors and the hooks",
                                 kernel_parts[label], value) for label, value in references.items()]
    log_joint = sum(collapsed_log_probs.values())
    problems.append(_spread_problem(f"log_density of {name} minus the {spec.kernel}'s log prior + log likelihood",
                                    kernel_log_target, log_joint))
    problems = [problem for problem in problems if problem]
    if problems:
        raise ModelMismatchError(
            f"the {spec.kernel} does not sample the target {name} states: {'; '.join(problems)}. {spec.supported}"
        )

    generative_name = _program_name(generative)
    for site, log_prob in generative_log_probs.items():
        if not np.allclose(log_prob, collapsed_log_probs[site], rtol=RTOL, atol=ATOL):
            problems.append(f"site {site!r} has other log probabilities in {generative_name} than in {name} "
                            f"(largest difference {float(np.max(np.abs(log_prob - collapsed_log_probs[site]))):.4g})")
    for label, (got, expected) in parameters.items():
        if not np.allclose(got, expected, rtol=RTOL, atol=1e-6):
            problems.append(f"{label} in {generative_name} differs from the one the {spec.kernel} integrates "
                            f"(largest difference {float(np.max(np.abs(got - expected))):.4g})")
    if problems:
        raise ModelMismatchError(
            f"{generative_name} and {name} state different models: {'; '.join(problems)}. {spec.supported}"
        )


HYPERPRIOR_PART = "hyperprior"
"""The part of a hyperprior site. The kernel's tables are built at the hyperparameter's mean
(``inference.hyperpriors.at_point``) and the programs' site stands there too, so the check compares the
kernel with the programs given the hyperparameter, and ``inference.hyperpriors`` rebuilds the same tables
from the same hooks at every other value."""


def with_hyperprior_sites(spec: TargetSpec, priors) -> TargetSpec:
    """``spec`` with a rule for the site of every hyperprior of ``priors`` that the kernel samples (shared
    by both programs); ValueError naming a hyperprior it does not sample."""
    found = hyperpriors.hyperpriors_of(priors)
    if not found:
        return spec
    hyperpriors.check_supported(spec.hyperpriors, priors)
    families = dict(spec.hyperpriors.families)
    rules = tuple(SiteRule(name, families[name], HYPERPRIOR_PART) for name in sorted(found))
    return spec._replace(sampled=spec.sampled + rules, shared=spec.shared + tuple(sorted(found)))


_PASSED = compiled_programs.package_cache(set())
"""Verdicts already reached: (spec, miniature structure, model bindings, priors) that passed."""


def _check(spec: TargetSpec, structure: tuple, priors, build: Callable) -> None:
    """:func:`check_target` on the miniature ``build()``, unless it passed for the same ``structure``,
    priors and model bindings: a refit checks nothing again."""
    verdict = (spec, structure, _bindings(spec.model), priors)
    try:
        hash(verdict)
    except TypeError:  # unhashable hyperparameters: checked on every fit
        verdict = None
    if verdict is not None and verdict in _PASSED:
        return
    check_target(spec, build(), priors)
    if verdict is not None:
        _PASSED.add(verdict)


def _rng():
    return np.random.default_rng(0)


# ---------------------------------------------------------------------------------------------- BRL

BRL_SUPPORTED = (
    "The fast BRL sampler follows Priors (lam, eta, alpha), the hooks models.brl.log_length_prior (log p(m), "
    "the length prior) and log_cardinality_prior (log p(c | the cardinalities left), the cardinality prior), a "
    "uniform choice among the unused antecedents of a cardinality, and theta_j ~ Dirichlet(alpha) integrated "
    "out. Write a new length or cardinality prior in those two hooks and new values in Priors; "
    "models.brl.log_prior, collapsed_model and model call them and stay as they are."
)
CATEGORICAL = ("CategoricalLogits", "CategoricalProbs")
BRL_CAPACITY = 4
"""Longest list of the BRL miniature (at most the fit's)."""
BRL_PER_CARDINALITY = 4
"""Antecedents of each cardinality in the BRL miniature (fewer when the fit has fewer, or when that
cardinality runs out within the fit's lists and must run out within the miniature's)."""
BRL_ROWS = 10


def _brl_programs(statics, arrays, priors):
    cardinalities, n_classes, capacity = statics
    truth_table, y = arrays["truth_table"], arrays["y"]
    kwargs = {"priors": priors, "max_length": capacity}
    return (
        (brl.collapsed_model, (truth_table, np.asarray(cardinalities), n_classes, y), kwargs),
        (brl.model, (truth_table, np.asarray(cardinalities), n_classes), {"y": y, **kwargs}),
    )


def _brl_kernel_states(static, data, raw):
    return jax.vmap(partial(brl_mh.list_state, static, data))(raw["rules"], raw["length"])


def _brl_values(statics, arrays, state):
    cardinalities, _, capacity = statics
    antecedents = jnp.maximum(state.rules, 0)  # any antecedent beyond the length: masked sites
    values = {"length": state.length}
    for j in range(capacity):
        values[f"antecedent_{j}"] = antecedents[j]
        values[f"cardinality_{j}"] = jnp.asarray(cardinalities)[antecedents[j]]
    return values


def _brl_references(statics, arrays, priors, values):
    cardinalities, _, capacity = statics
    rules = jnp.stack([values[f"antecedent_{j}"] for j in range(capacity)])
    rules = jnp.where(jnp.arange(capacity) < values["length"], rules, -1)
    return {"models.brl.log_prior": brl.log_prior(rules, values["length"], np.asarray(cardinalities),
                                                  hyperpriors.at_point(priors), capacity)}


def _brl_parameters(statics, arrays, trace, values):
    concentration = base_parameter(trace["theta"]["fn"], "concentration")
    n_classes = statics[1]
    alpha = jnp.exp(arrays["kernel"].likelihood.terms[1, :n_classes])  # log Gamma(a + 1) - log Gamma(a) = log a
    return {"the Dirichlet concentration of theta": (concentration, jnp.broadcast_to(alpha, concentration.shape))}


def _brl_kernel_parts(statics, arrays, states):
    length = arrays["kernel"].prior.length[states.length]
    return {"length": length, "list": states.log_prior - length, "likelihood": states.log_likelihood,
            "models.brl.log_prior": states.log_prior}


BRL_SPEC = TargetSpec(
    kernel="BRL Metropolis-Hastings kernel",
    model=brl,
    programs=_brl_programs,
    sampled=(
        SiteRule("length", CATEGORICAL, "length"),
        SiteRule(r"cardinality_\d+", CATEGORICAL, "list"),
        SiteRule(r"antecedent_\d+", CATEGORICAL, "list"),
        SiteRule("y", ("Unit",), "likelihood"),
    ),
    shared=("length", r"cardinality_\d+", r"antecedent_\d+"),
    integrated=(SiteRule("theta", ("Dirichlet",), "likelihood"), SiteRule("y", CATEGORICAL, "likelihood")),
    kernel_states=_brl_kernel_states,
    values=_brl_values,
    references=_brl_references,
    parameters=_brl_parameters,
    kernel_parts=_brl_kernel_parts,
    supported=BRL_SUPPORTED,
    hyperpriors=hyperpriors.BRL,
)


def brl_miniature_structure(cardinalities, capacity: int) -> tuple:
    """(K_c of the miniature for c = 1..C, its capacity): at most :data:`BRL_PER_CARDINALITY` antecedents
    of each cardinality the fit has, and lists of at most :data:`BRL_CAPACITY` rules, such that a
    cardinality runs out within a list exactly when it does in the fit (eq. 3's renormalisation)."""
    counts = brl.cardinality_counts(cardinalities)
    mini_capacity = min(int(capacity), BRL_CAPACITY)
    mini = np.where(counts >= capacity, np.minimum(counts, BRL_PER_CARDINALITY), np.minimum(counts, mini_capacity - 1))
    return tuple(int(k) for k in mini), min(mini_capacity, int(mini.sum()))


def _brl_prior_draw(rng, tables: brl.PriorTables, cardinalities, capacity):
    """A list drawn from the kernel's prior tables (Letham eqs. 2-4, as ``models.brl.rule_list_prior``)."""
    length = rng.choice(capacity + 1, p=_normalised(np.asarray(tables.length)))
    counts = np.asarray(tables.counts).copy()
    bits = 1 << np.arange(counts.size)
    rules = np.full(capacity, -1, np.int32)
    unused = np.ones(cardinalities.size, bool)
    for j in range(length):
        row = np.asarray(tables.cardinality)[((counts > 0) * bits).sum()]
        c = rng.choice(counts.size, p=_normalised(row))
        rules[j] = rng.choice(np.flatnonzero(unused & (cardinalities == c + 1)))
        unused[rules[j]] = False
        counts[c] -= 1
    return rules, length


def _normalised(log_weights):
    weights = np.exp(np.asarray(log_weights, np.float64) - np.max(log_weights))
    return weights / weights.sum()


def _brl_miniature(structure, n_classes: int, priors: brl.Priors) -> Miniature:
    counts, capacity = structure
    cardinalities = np.repeat(np.arange(1, len(counts) + 1), counts).astype(np.int32)
    rng = _rng()
    truth_table = rng.random((BRL_ROWS, cardinalities.size)) < 0.5
    y = rng.permutation(np.arange(BRL_ROWS) % n_classes).astype(np.int32)
    static, data = brl_mh.make_target(truth_table, cardinalities, n_classes, y, priors, capacity)
    rules, lengths = [], []
    for _ in range(N_STATES // 2):
        drawn = _brl_prior_draw(rng, data.prior, cardinalities, capacity)
        rules.append(drawn[0])
        lengths.append(drawn[1])
    possible = np.flatnonzero(np.asarray(data.prior.length) > LOG_ZERO)
    possible = possible[possible > 0] if possible.max() > 0 else possible  # the longest lists first
    for length in possible[np.linspace(0, possible.size - 1, N_STATES - N_STATES // 2).round().astype(int)][::-1]:
        order = rng.permutation(cardinalities.size)[:capacity]
        rules.append(np.where(np.arange(capacity) < length, order, -1).astype(np.int32))
        lengths.append(length)
    raw = jax.device_put({"rules": np.stack(rules).astype(np.int32), "length": np.asarray(lengths, np.int32)})
    arrays = {"truth_table": jax.device_put(np.asarray(truth_table)), "y": jax.device_put(np.asarray(y)), "kernel": data}
    return Miniature((tuple(int(c) for c in cardinalities), int(n_classes), int(capacity)), static, arrays, raw)


def outside_traces(check: Callable, *args) -> None:
    """Run ``check(*args)`` in a thread of its own: JAX traces per thread, so a check called from a NumPyro
    kernel's ``init`` compiles its own programs even under ``chain_method="parallel"``'s pmap trace."""
    with ThreadPoolExecutor(1) as thread:
        thread.submit(check, *args).result()


def check_brl(cardinalities, n_classes: int, priors: brl.Priors, capacity: int) -> None:
    """:func:`check_target` of the BRL kernel on the miniature of a fit of antecedents with these
    ``cardinalities``, ``n_classes`` classes, ``priors`` and lists of at most ``capacity`` rules."""
    structure = brl_miniature_structure(cardinalities, capacity)
    spec = with_hyperprior_sites(BRL_SPEC, priors)
    _check(spec, (structure, int(n_classes)), priors,
           partial(_brl_miniature, structure, int(n_classes), hyperpriors.at_point(priors)))


# ---------------------------------------------------------------------------------------------- BCM

BCM_SUPPORTED = (
    "The fast BCM sampler follows Priors, the hooks models.bcm.omega_distribution (one Bernoulli per "
    "cluster and feature), prototype_distribution (one Categorical over the observations per cluster, the logits of observation i "
    "not depending on the number of observations: the sampler pads the observations with inert rows), "
    "z_concentration (pi_i ~ Dirichlet, integrated out) and g (phi_sj ~ Dirichlet(g), integrated out). "
    "Write the edit in those hooks or in Priors; models.bcm.collapsed_model, model and "
    "subspace_and_prototype_prior call them and stay as they are."
)
BCM_N_VALUES = (2, 3, 2)
"""Values per feature of the BCM miniature (several features, a padded one)."""
BCM_ROWS = 6
"""Rows of the BCM miniature (at least the number of clusters)."""
BCM_PADDING_ROWS = 2
"""Padding rows of the BCM miniature's kernel target, as ``fit_bcm`` pads its observations: the check covers
the padded target (the padding rows inert, the prototypes' prior kept over the observations, which an
edited prototype_distribution whose logits depend on the number of rows fails)."""


def _bcm_programs(statics, arrays, priors):
    n_clusters, n_values = statics
    x = arrays["x"]
    return (
        (bcm.collapsed_model, (x, n_clusters), {"priors": priors, "n_values": np.asarray(n_values)}),
        (bcm.model, (x.shape[0], np.asarray(n_values), n_clusters), {"priors": priors, "x": x}),
    )


def _bcm_kernel_states(static, data, raw):
    return jax.vmap(partial(bcm_gibbs.state_from_params, static, data))(raw["omega"], raw["prototype"], raw["z"])


def _bcm_values(statics, arrays, state):
    return {"omega": state.omega, "prototype": state.prototype, "z": state.z[: len(arrays["x"])]}


def _bcm_parameters(statics, arrays, trace, values):
    data = arrays["kernel"]
    features = jnp.arange(data.x.shape[1])
    g_used = data.g_values[values["omega"], features, data.x[values["prototype"]]]  # (S, P, V)
    phi = base_parameter(trace["phi"]["fn"], "concentration")
    pi = base_parameter(trace["pi"]["fn"], "concentration")
    return {
        "the Dirichlet concentration of pi": (pi, jnp.broadcast_to(data.pi_concentration, pi.shape)),
        "the Dirichlet concentration of phi": (jnp.where(data.value_mask, phi, 0.0), g_used),
    }


def _bcm_kernel_parts(statics, arrays, states):
    data = arrays["kernel"]
    n_clusters, n_features = data.omega_log_prob.shape[:2]
    clusters = jnp.arange(n_clusters)
    omega = data.omega_log_prob[clusters[:, None], jnp.arange(n_features), states.omega].sum((-2, -1))
    prototype = data.prototype_log_prob[clusters, states.prototype].sum(-1)
    return {"omega": omega, "prototype": prototype, "z": states.log_prior - omega - prototype,
            "likelihood": states.log_likelihood}


BCM_SPEC = TargetSpec(
    kernel="BCM collapsed Gibbs kernel",
    model=bcm,
    programs=_bcm_programs,
    sampled=(
        SiteRule("omega", ("BernoulliProbs", "BernoulliLogits"), "omega"),
        SiteRule("prototype", CATEGORICAL, "prototype"),
        SiteRule("z", ("PolyaCategorical",), "z"),
        SiteRule("x", ("PolyaCategorical",), "likelihood"),
    ),
    shared=("omega", "prototype"),
    integrated=(
        SiteRule("prototype_value", CATEGORICAL, "likelihood"),
        SiteRule("phi", ("Dirichlet",), "likelihood"),
        SiteRule("pi", ("Dirichlet",), "z"),
        SiteRule("z", CATEGORICAL, "z"),
        SiteRule("x", CATEGORICAL, "likelihood"),
    ),
    kernel_states=_bcm_kernel_states,
    values=_bcm_values,
    references=lambda statics, arrays, priors, values: {},
    parameters=_bcm_parameters,
    kernel_parts=_bcm_kernel_parts,
    supported=BCM_SUPPORTED,
    hyperpriors=hyperpriors.BCM,
)


def _bcm_miniature(n_clusters: int, priors: bcm.Priors) -> Miniature:
    n_values = np.asarray(BCM_N_VALUES)
    n_obs, n_features = max(BCM_ROWS, n_clusters), n_values.size
    rng = _rng()
    x = (rng.random((n_obs, n_features)) * n_values).astype(np.int32)
    static, data = bcm_gibbs.make_target(x, n_clusters, priors, n_values, padded_rows=n_obs + BCM_PADDING_ROWS)
    half, rest = N_STATES // 2, N_STATES - N_STATES // 2
    omega_probs = np.exp(np.asarray(data.omega_log_prob, np.float64)[..., 1])
    omega_possible = np.asarray(data.omega_log_prob) > LOG_ZERO
    prototype_weights = np.stack([_normalised(row) for row in np.asarray(data.prototype_log_prob)])
    pi = rng.dirichlet(np.asarray(data.pi_concentration, np.float64), (half, n_obs))  # the prior's z: pi_i, then z_ij
    omega = np.concatenate([
        rng.random((half, n_clusters, n_features)) < omega_probs,
        np.where(omega_possible.all(-1), rng.random((rest, n_clusters, n_features)) < 0.5, omega_possible[..., 1]),
    ])
    prototype = np.concatenate([
        np.stack([[rng.choice(static.n_obs, p=weights) for weights in prototype_weights] for _ in range(half)]),
        np.stack([[rng.choice(np.flatnonzero(weights > 0)) for weights in prototype_weights] for _ in range(rest)]),
    ])
    z = np.concatenate([
        (rng.random((half, n_obs, n_features, 1)) > np.cumsum(pi, -1)[:, :, None, :]).sum(-1).clip(0, n_clusters - 1),
        rng.integers(0, n_clusters, (rest, n_obs, n_features)),
    ])
    z = np.concatenate([z, rng.integers(0, n_clusters, (N_STATES, BCM_PADDING_ROWS, n_features))], 1)  # ignored
    raw = jax.device_put({"omega": omega.astype(np.int32), "prototype": prototype.astype(np.int32), "z": z.astype(np.int32)})
    return Miniature((int(n_clusters), BCM_N_VALUES), static, {"kernel": data, "x": x}, raw)


def check_bcm(n_clusters: int, priors: bcm.Priors) -> None:
    """:func:`check_target` of the BCM kernel on the miniature of a fit of ``n_clusters`` clusters under
    ``priors``."""
    spec = with_hyperprior_sites(BCM_SPEC, priors)
    _check(spec, (int(n_clusters),), priors, partial(_bcm_miniature, int(n_clusters), hyperpriors.at_point(priors)))


# ---------------------------------------------------------------------------------------------
# Kernels that assume one generative program outright (MGM's coordinate ascent, Bayesian Sets'
# closed form): every site must have the family and parameters the kernel's formulas assume
# ---------------------------------------------------------------------------------------------


class SiteAssumption(NamedTuple):
    """What a kernel assumes of one site: its distribution ``family`` and ``parameters``, a function of
    the traced site values returning {parameter name: the value the kernel's formulas use}."""

    family: str
    parameters: Callable


class _AssumptionKey(NamedTuple):
    """The static part of one assumption check: the program, ``build(extra, priors) -> (args, kwargs,
    assumptions)`` (a module-level function) with its hashable ``extra``, every binding of the model module,
    and the priors' class (values traced), ``_Concrete`` priors, or None."""

    program: Callable
    build: Callable
    extra: object
    bindings: tuple
    priors: object


_ASSUMED_SITE_FACTS: dict = {}


@partial(jax.jit, static_argnums=0, compiler_options={"xla_backend_optimization_level": 0})
def _parameter_gaps(key: _AssumptionKey, prior_values, point):
    """Per site and assumed parameter, the largest absolute difference between the program's parameter and
    the assumed one, with the sites set to ``point``; records the sites' (family, observed) in
    ``_ASSUMED_SITE_FACTS[key]``."""
    priors = _priors_of(key.priors, prior_values)
    args, kwargs, assumptions = key.build(key.extra, priors)
    trace = handlers.trace(handlers.seed(handlers.substitute(key.program, point), 0)).get_trace(*args, **kwargs)
    _ASSUMED_SITE_FACTS[key] = _site_facts(trace)
    values = {name: site["value"] for name, site in trace.items() if site["type"] == "sample"}
    gaps = {}
    for name, site in trace.items():
        assumption = assumptions.get(name)
        if site["type"] != "sample" or assumption is None or family(site["fn"]) != assumption.family:
            continue
        for parameter, assumed in assumption.parameters(values).items():
            actual = getattr(base_distribution(site["fn"]), parameter)
            actual, assumed = jnp.broadcast_arrays(jnp.asarray(actual, float), jnp.asarray(assumed, float))
            gaps[(name, parameter)] = jnp.max(jnp.abs(actual - assumed))
    return gaps


def _traced_parameters(program, build, extra, priors, point: dict) -> tuple[dict, dict]:
    """Trace ``program`` (its arguments from ``build(extra, priors)``) under jit with its sites set to
    ``point`` (a value per site, so no sampler is compiled; a site missing from it is sampled), the
    hyperparameter values as arguments (as constants when a hook needs them concrete): the sites' (family,
    observed) and the ``_parameter_gaps``. One compiled program per key, whatever the values."""
    bindings = _bindings(sys.modules[program.__module__])
    key = _AssumptionKey(program, build, extra, bindings, None if priors is None else type(priors))
    prior_values = {} if priors is None else _prior_values(priors)
    try:
        gaps = _parameter_gaps(key, prior_values, point)
    except (TypeError, jax.errors.JAXTypeError):  # non-numeric hyperparameters, or NumPy on traced values
        key, prior_values = key._replace(priors=_Concrete(priors)), {}
        gaps = _parameter_gaps(key, prior_values, point)
    return _ASSUMED_SITE_FACTS[key], {name: float(value) for name, value in gaps.items()}


def check_assumptions(program, build, extra, priors, point: dict, kernel: str, supported: str) -> None:
    """Raise :class:`ModelMismatchError` unless ``program``'s sites are exactly those of the assumptions of
    ``build(extra, priors) -> (args, kwargs, assumptions)``, each with the assumed family and parameters (to
    float rounding) at the sites' values ``point``."""
    name = _program_name(program)
    assumptions = build(extra, priors)[2]
    facts, gaps = _traced_parameters(program, build, extra, priors, point)
    for site, (site_family, _) in facts.items():
        if site not in assumptions:
            raise ModelMismatchError(f"{name} has a site {site!r} ({site_family}) that the {kernel} does not handle; "
                                     f"it handles {sorted(assumptions)}. {supported}")  # fmt: skip
        if site_family != assumptions[site].family:
            raise ModelMismatchError(f"{name}: site {site!r} is {site_family}; the {kernel} handles it only as "
                                     f"{assumptions[site].family}. {supported}")  # fmt: skip
    for site in assumptions:
        if site not in facts:
            raise ModelMismatchError(f"{name} has no site {site!r}, which the {kernel} assumes. {supported}")
    for (site, parameter), gap in gaps.items():
        if not gap <= 1e-5:
            raise ModelMismatchError(
                f"{name}: site {site!r} has a {parameter} other than the one the {kernel} assumes (they differ by up "
                f"to {gap:.3g}). {supported}"
            )


_ASSUMPTIONS_PASSED = compiled_programs.package_cache(set())


def _check_once(module, program_name: str, priors, extra, check: Callable) -> None:
    verdict = (program_name, _bindings(module), priors, extra)
    if verdict in _ASSUMPTIONS_PASSED:
        return
    check()
    _ASSUMPTIONS_PASSED.add(verdict)


MGM_MINIATURE = (3, 3, 2)
"""Observations, dimensions and clusters of the MGM miniature."""


def _mgm_assumptions(exact_or: bool, priors):
    """(args, kwargs, assumptions) of the MGM check for ``priors`` (traced values in the compiled check)."""
    from interpretable_zoo.models import mgm

    n_obs, n_dims, n_clusters = MGM_MINIATURE
    assumptions = {
        "pi_l": SiteAssumption("Dirichlet", lambda v: {"concentration": jnp.full(n_dims, priors.alpha_l / n_dims)}),
        "pi_f": SiteAssumption("Dirichlet", lambda v: {"concentration": jnp.asarray(priors.alpha_f)}),
        "l": SiteAssumption("CategoricalProbs", lambda v: {"probs": v["pi_l"]}),
        "f": SiteAssumption("CategoricalProbs", lambda v: {"probs": v["pi_f"]}),
        "y": SiteAssumption("BernoulliProbs", lambda v: {"probs": priors.rho}),
        "gamma": SiteAssumption("Beta", lambda v: {"concentration1": priors.sigma1, "concentration0": priors.sigma2}),
        "t": SiteAssumption("BernoulliProbs", lambda v: {"probs": v["gamma"]}),
        "beta": SiteAssumption("Beta", lambda v: dict(zip(
            ("concentration1", "concentration0"), jnp.moveaxis(mgm.beta_parameters(v["y"], v["t"], priors), -1, 0)))),
        "pi": SiteAssumption("Dirichlet", lambda v: {"concentration": jnp.full(n_clusters, priors.alpha_z)}),
        "z": SiteAssumption("CategoricalProbs", lambda v: {"probs": v["pi"]}),
        "i": SiteAssumption("BernoulliProbs", lambda v: {"probs": v["beta"][v["z"]]}),
        "w": SiteAssumption("GroupEmission", lambda v: {"present": v["i"], "formula": v["f"], "assignment": v["l"],
                                                        "s": priors.s}),  # fmt: skip
    }
    return (n_obs, n_dims, n_clusters, priors), {"n_groups": n_dims, "exact_or": exact_or}, assumptions


def check_mgm(priors, exact_or: bool) -> None:
    """``models.mgm.model`` is the program whose ELBO ``inference.mgm_vi`` climbs: Dirichlet pi_l, pi_f
    and pi (concentrations alpha_l / G, alpha_f, alpha_z), Categorical l, f, z, Bernoulli(rho) y,
    Beta(sigma1, sigma2) gamma, Bernoulli(gamma) t, beta from ``beta_parameters``, Bernoulli(beta_z) i and
    the group emission with s (eqs. 1-3). Checked on a miniature (:data:`MGM_MINIATURE`) once per priors
    and model-file bindings, by one compiled program whatever the prior values."""
    from interpretable_zoo.models import mgm

    supported = ("The coordinate-ascent updates follow Priors and the hooks beta_parameters and log_structure_prior "
                 "of models/mgm.py, not other families or parameters written in the program. Write a new Beta prior "
                 "of beta given y and t in beta_parameters(y, t, priors), a new prior of the partition and formulas "
                 "in log_structure_prior, and other values in Priors (alpha_l, alpha_f for pi_l and pi_f, rho for y, "
                 "sigma1 and sigma2 for gamma, alpha_z for pi, s for w); model calls them and stays as it is.")  # fmt: skip
    point = {name: np.asarray(value, np.int32 if name in ("l", "f", "z") else np.float32) for name, value in {
        "pi_l": [0.2, 0.3, 0.5], "pi_f": [0.4, 0.6], "l": [0, 2, 2],
        "f": [1, 0, 1], "y": [1.0, 0.0, 1.0], "gamma": [0.3, 0.6, 0.8],
        "t": [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]], "beta": [[0.2, 0.7, 0.9], [0.6, 0.1, 0.4]],
        "pi": [0.45, 0.55], "z": [0, 1, 1],
        "i": [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]],
        "w": [[0.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0]],
    }.items()}  # fmt: skip
    _check_once(mgm, "mgm.model", priors, exact_or, lambda: check_assumptions(
        mgm.model, _mgm_assumptions, exact_or, priors, point, "MGM coordinate ascent", supported))


def _bayesian_sets_assumptions(_, __):
    """(args, kwargs, assumptions) of the Bayesian Sets check: a Beta prior of three features."""
    alpha, beta = np.array([0.5, 2.0, 1.25], np.float32), np.array([1.5, 0.25, 3.0], np.float32)
    assumptions = {
        "theta": SiteAssumption("Beta", lambda v: {"concentration1": alpha, "concentration0": beta}),
        "x": SiteAssumption("BernoulliProbs", lambda v: {"probs": v["theta"]}),
    }
    return (alpha, beta, 2), {}, assumptions


def check_bayesian_sets() -> None:
    """``models.bayesian_sets.model`` is the program whose marginal the closed-form scores integrate
    (eqs. 7-9): theta_j ~ Beta(alpha_j, beta_j), x_ij ~ Bernoulli(theta_j). Checked on a miniature (3
    features, 2 items) once per model-file bindings."""
    from interpretable_zoo.models import bayesian_sets

    supported = ("The closed-form scores hold only for theta_j ~ Beta(alpha_j, beta_j) and Bernoulli features, with "
                 "alpha and beta from Priors (kappa, or explicit alpha and beta) or the hook beta_hyperparameters of "
                 "models/bayesian_sets.py. Write other Beta parameters there (e.g. theta ~ Beta(alpha + 1, beta + 1) as "
                 "a beta_hyperparameters returning (alpha + 1, beta + 1)); model stays as it is.")  # fmt: skip
    point = {"theta": jnp.array([0.2, 0.5, 0.9]), "x": jnp.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]])}
    _check_once(bayesian_sets, "bayesian_sets.model", None, None, lambda: check_assumptions(
        bayesian_sets.model, _bayesian_sets_assumptions, None, None, point, "Bayesian Sets closed form", supported))
