"""What the machine lends this process, read without importing JAX (``izoo`` sizes XLA's CPU pool from it
before JAX starts)."""

import os

SMALL_MACHINE_CORES = 2
"""Machines of at most this many cores, where BRL's programs ran faster on XLA's CPU pool of one thread than
on its default pool of a thread per core, with the same draws (``xla_thread_pool`` in
benchmarks/RESULTS.md; machines of more cores were not measured)."""


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system reports one, else every core."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def pool_is_sized(environ) -> bool:
    """Whether ``environ`` sizes XLA's CPU pool: PJRT_NPROC, or NPROC, which XLA reads after it; otherwise XLA
    runs a thread per usable core."""
    return "PJRT_NPROC" in environ or "NPROC" in environ


def one_pool_thread_would_help() -> bool:
    """Whether this process runs XLA's default pool of several threads on a machine of at most
    :data:`SMALL_MACHINE_CORES` cores, where a pool of one thread runs BRL's programs faster."""
    return 2 <= usable_cores() <= SMALL_MACHINE_CORES and not pool_is_sized(os.environ)
