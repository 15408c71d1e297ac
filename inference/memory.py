"""Memory checks before large allocations: an estimate compared with the memory the system has available,
or with the ``memory_limit`` that a fit was given (:func:`limit`); and NumPy's large arrays allocated
without huge pages where filling them once would cost more than reading them saves (:func:`small_pages`)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import resource
from pathlib import Path

from interpretable_zoo import compiled_programs

try:
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:  # NumPy 1 names the module numpy.core; a NumPy without the switch leaves its pages as they are
    try:
        from numpy.core.multiarray import _set_madvise_hugepage
    except ImportError:
        _set_madvise_hugepage = None

_MEMINFO = Path("/proc/meminfo")
_CGROUP_FILES = (
    (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")),
    (Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"), Path("/sys/fs/cgroup/memory/memory.usage_in_bytes")),
)


class InsufficientMemoryError(MemoryError):
    """A computation would need more memory than is available; the message gives the estimate and the remedy."""


def available_bytes() -> int | None:
    """Memory available to new allocations: ``MemAvailable`` of /proc/meminfo (else the free physical
    pages, ``os.sysconf``), lowered to what a container's cgroup limit and the process's address-space limit
    (``ulimit -v``) leave; None where nothing can be read."""
    system = _meminfo_available()
    if system is None:
        try:
            system = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            pass
    limits = [value for value in (system, _cgroup_available(), _address_space_available()) if value is not None]
    return min(limits) if limits else None


def _meminfo_available() -> int | None:
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


_STATUS = Path("/proc/self/status")


def _address_space_available() -> int | None:
    """RLIMIT_AS minus the process's virtual size (``VmSize``); None without a limit or where unreadable."""
    try:
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmSize:"):
                return max(limit - int(line.split()[1]) * 1024, 0)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_available() -> int | None:
    """The cgroup memory limit minus current use (cgroup v2, else v1); None without a limit."""
    for limit_file, usage_file in _CGROUP_FILES:
        try:
            limit = limit_file.read_text().strip()
            usage = int(usage_file.read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 1 << 60:  # v1 writes "no limit" as a huge number, v2 as "max"
            return max(int(limit) - usage, 0)
    return None


_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("memory_limit", default=None)


def check_limit(memory_limit) -> int | None:
    """``memory_limit`` checked: None (the memory available when a check runs) or a positive number of bytes."""
    if memory_limit is None:
        return None
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, (int, float)) or not memory_limit >= 1:
        raise ValueError(f"memory_limit: expected None or a positive number of bytes (e.g. 8 * 2**30), got {memory_limit!r}")
    return int(memory_limit)


@contextlib.contextmanager
def limit(memory_limit):
    """Within the block, :func:`check_memory` compares with ``memory_limit`` bytes instead of the available
    memory (None keeps the available memory). The fits take ``memory_limit`` to raise the bound where the
    estimate is conservative or the machine can swap, or to lower it."""
    token = _LIMIT.set(check_limit(memory_limit))
    try:
        yield
    finally:
        _LIMIT.reset(token)


@contextlib.contextmanager
def small_pages():
    """Within the block, NumPy allocates without asking the kernel for transparent huge pages, and then
    restores its setting. The setting is process-wide but only a hint: arrays that another thread allocates
    meanwhile differ in speed alone.

    NumPy asks for them (``madvise(MADV_HUGEPAGE)``) for every array of 4 MiB or more. Where the kernel then
    compacts memory to find a huge page at the first touch (``/sys/kernel/mm/transparent_hugepage/defrag``
    = ``madvise``, a common default), a fresh array of a fragmented process can take over ten times as long
    to fill. The sampling engine's records are written once and read in order, which huge pages do not
    speed up (docs/decisions/tempering.md, "The draws are joined and judged without huge pages")."""
    if _set_madvise_hugepage is None:
        yield
        return
    before = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(before)


def honours_limit(fit):
    """``fit``, whose keyword-only argument ``memory_limit`` sets the :func:`limit` of every memory check
    made during the call, and which first releases the compiled programs in memory when the process runs
    low on memory mappings (:func:`~interpretable_zoo.compiled_programs.release_if_mappings_run_low`)."""
    default = inspect.signature(fit).parameters["memory_limit"].default

    @functools.wraps(fit)
    def limited(*args, **kwargs):
        compiled_programs.release_if_mappings_run_low()
        with limit(kwargs.get("memory_limit", default)):
            return fit(*args, **kwargs)

    return limited


USABLE_SHARE = 0.9
"""The share of the available memory that a checked computation may take. The rest is left to what no
estimate counts: compiling (XLA holds a program's buffers and its passes' copies while it compiles), the
interpreter and the allocator's slack; a run estimated at nearly all of the available memory can fail
inside XLA. A ``memory_limit`` is taken whole."""


def allowed_bytes() -> int | None:
    """The bound of :func:`check_memory`: the :func:`limit` in force, else :data:`USABLE_SHARE` of
    :func:`available_bytes`."""
    bound = _LIMIT.get()
    if bound is not None:
        return bound
    available = available_bytes()
    return None if available is None else int(available * USABLE_SHARE)


def check_memory(needed_bytes: float, what: str, remedy: str) -> None:
    """InsufficientMemoryError when ``needed_bytes`` exceeds the available memory (or the :func:`limit`).

    The message reads "{what} needs about 5.4 GiB, more than the 1.89 GiB usable (90% of the memory
    available); {remedy}", so ``what`` names the argument and the structure (e.g. "X: the 100000 x 100000
    cover matrix") and ``remedy`` says what to change; it ends by naming ``memory_limit``, which moves the bound.
    """
    available = allowed_bytes()
    if available is not None and needed_bytes > available:
        raise InsufficientMemoryError(
            f"{what} needs about {format_bytes(needed_bytes)}, more than {bound_text(available)}; {remedy} (or set "
            "memory_limit, in bytes, if the estimate is too cautious)"
        )


def bound_text(allowed: int) -> str:
    """``allowed`` (from :func:`allowed_bytes`) in words: "the 1.89 GiB usable (90% of the memory available)"
    or "the 1 GiB of memory_limit"."""
    if _LIMIT.get() is not None:
        return f"the {format_bytes(allowed)} of memory_limit"
    return f"the {format_bytes(allowed)} usable ({USABLE_SHARE:.0%} of the memory available)"


def format_bytes(n_bytes: float) -> str:
    """A byte count in the largest binary unit below it, e.g. "5.4 GiB"."""
    for power, unit in ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n_bytes >= 1024**power:
            return f"{n_bytes / 1024**power:.3g} {unit}"
    return f"{n_bytes:.0f} bytes"
