"""The XLA option that the package sets when it is imported, before JAX starts its backend.

XLA's CPU backend runs a loop by dispatching its body's operations one by one, each iteration. BRL's loops
are long runs of small operations, where that dispatch costs more than the operations do. XLA instead
compiles a whole loop as one function when the loop holds no scatter, sort or custom call and one iteration
accesses fewer bytes than ``xla_cpu_small_while_loop_byte_threshold`` (1 kB by default). With the threshold
raised to :data:`WHOLE_LOOP_BYTES`, BRL's Metropolis-Hastings steps compile as one function, and so does an
untempered fit's whole loop over scans (a tempered ladder's swap round holds a scatter). What that gains
and where it costs: ``xla_whole_loops`` in benchmarks/RESULTS.md and docs/decisions/brl-sampler.md.

XLA reads ``XLA_FLAGS`` once, when JAX starts its backend: the setting takes effect when the package is
imported before the process's first JAX computation, and then applies to every program of the process;
imported later, the package warns that it cannot (:data:`LATE_IMPORT_WARNING`). It leaves ``XLA_FLAGS``
alone when they pass ``--xla_backend_extra_options`` already, so that a user's own choice stands (for XLA's
default: ``--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024``). The option concerns
XLA's CPU backend only; on a GPU it changes nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

WHOLE_LOOP_OPTION = "xla_cpu_small_while_loop_byte_threshold"
WHOLE_LOOP_BYTES = 1 << 30
"""XLA's CPU backend compiles a loop whole below this many bytes accessed per iteration: above any of the
package's loops (adult's BRL ladder included), so that the operations a loop holds decide."""


def with_whole_loops(flags: str) -> str:
    """``flags`` (the value of ``XLA_FLAGS``) with :data:`WHOLE_LOOP_OPTION` raised to :data:`WHOLE_LOOP_BYTES`,
    or unchanged when they pass backend extra options of their own."""
    if "--xla_backend_extra_options" in flags:
        return flags
    return f"{flags} --xla_backend_extra_options={WHOLE_LOOP_OPTION}={WHOLE_LOOP_BYTES}".strip()


LATE_IMPORT_WARNING = (
    "interpretable_zoo was imported after JAX had started its CPU backend, so XLA's option to compile loops "
    "whole (interpretable_zoo.xla_flags) cannot take effect in this process, and BRL's sampler runs slower. "
    "Import interpretable_zoo before the first JAX computation, or start Python with XLA_FLAGS="
    f"--xla_backend_extra_options={WHOLE_LOOP_OPTION}={WHOLE_LOOP_BYTES}."
)


def compile_loops_whole(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set ``XLA_FLAGS`` in ``environ`` to :func:`with_whole_loops` of its value; True if that changed them."""
    flags = environ.get("XLA_FLAGS", "")
    environ["XLA_FLAGS"] = with_whole_loops(flags)
    return environ["XLA_FLAGS"] != flags


def cpu_backend_started() -> bool:
    """Whether JAX has started its backends in this process with the CPU as the default, after which XLA reads
    no more ``XLA_FLAGS`` (from JAX's private table of started backends; False where JAX is not imported, so
    no import here)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "_backends", None)) and bridge.default_backend() == "cpu"
