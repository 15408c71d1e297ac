"""Samplers and optimisers, one file per algorithm, each imported at first use (``interpretable_zoo.inference.brl``)."""

from interpretable_zoo.compilation_cache import configure
from interpretable_zoo.lazy import lazy_attributes

configure()  # the persistent compilation cache is set before any sampler compiles

__getattr__, __dir__ = lazy_attributes(__name__, {})
