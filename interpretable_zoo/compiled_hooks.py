"""Prior hooks of a model file evaluated as one compiled program.

Evaluated operation by operation, every JAX operation of a hook compiles a program of its own (tens of them
per fit in a new process). :func:`evaluate` traces the hooks once instead, with the hyperparameters as the
program's arguments, so that editing a prior value recompiles nothing.
"""

from __future__ import annotations

import dataclasses
import inspect
from functools import partial

import jax
import numpy as np

from interpretable_zoo import compiled_programs


def evaluate(model, function, priors, *arguments):
    """``function(priors, *arguments)`` as one compiled program: the fields of ``priors`` (a dataclass) enter
    as traced arguments, ``arguments`` (hashable: sizes, counts) as constants. ``model``: the model file
    (module) whose hooks ``function`` calls; the program is traced again whenever one of its functions is
    replaced (a hook edited in a running session). A hook that needs a hyperparameter concrete (NumPy on
    it, Python control flow) gets the priors as constants instead. The values are concrete even when
    called under a trace, unless the priors themselves are traced (then they are part of that trace)."""
    hooks = tuple((name, value) for name, value in vars(model).items() if inspect.isfunction(value))
    values = prior_values(priors)
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(values)):
        return _traced(function, hooks, type(priors), arguments, values)  # part of the trace the priors are in
    try:
        return _executable(_traced, (function, hooks, type(priors), arguments), (values,))
    except (TypeError, jax.errors.JAXTypeError):
        return _executable(_concrete, (function, hooks, priors, arguments), ())


def prior_values(priors) -> dict:
    """The fields of ``priors`` (a dataclass) by name: what :func:`priors_with` takes back."""
    return {field.name: getattr(priors, field.name) for field in dataclasses.fields(priors)}


def priors_with(priors_type, values: dict):
    """A ``priors_type`` whose fields are ``values`` (traced ones included), made without running
    ``__post_init__``'s checks, which need concrete numbers."""
    priors = object.__new__(priors_type)
    for name, value in values.items():
        object.__setattr__(priors, name, value)
    return priors


_EXECUTABLES = compiled_programs.package_cache({})


def _executable(program, static: tuple, dynamic: tuple):
    """``program(*static, *dynamic)`` run as a compiled executable on the concrete ``dynamic`` arguments, so
    that its values are concrete even when called in a trace (a jitted function would join the trace)."""
    types = tuple(  # what the executable is compiled for: shape, dtype, weak type (a Python number), x64 mode
        (np.shape(leaf), np.result_type(leaf), getattr(leaf, "weak_type", isinstance(leaf, (bool, int, float, complex))))
        for leaf in jax.tree.leaves(dynamic)
    )
    key = (program, static, jax.tree.structure(dynamic), types, jax.config.jax_enable_x64)
    if key not in _EXECUTABLES:
        _EXECUTABLES[key] = program.lower(*static, *dynamic).compile()
    return _EXECUTABLES[key](*dynamic)


@partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _traced(function, hooks, priors_type, arguments, values):
    return function(priors_with(priors_type, values), *arguments)


@partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _concrete(function, hooks, priors, arguments):
    return function(priors, *arguments)
