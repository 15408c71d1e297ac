"""Memory checks before large allocations: an estimate compared with the memory the system has available."""

from __future__ import annotations

import os
from pathlib import Path

_MEMINFO = Path("/proc/meminfo")
_CGROUP_FILES = (
    (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")),
    (Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"), Path("/sys/fs/cgroup/memory/memory.usage_in_bytes")),
)


class InsufficientMemoryError(MemoryError):
    """A computation would need more memory than is available; the message gives the estimate and the remedy."""


def available_bytes() -> int | None:
    """Memory available to new allocations: ``MemAvailable`` of /proc/meminfo (else the free physical
    pages, ``os.sysconf``), lowered to what a container's cgroup limit leaves; None where nothing can be read."""
    system = _meminfo_available()
    if system is None:
        try:
            system = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            pass
    limits = [value for value in (system, _cgroup_available()) if value is not None]
    return min(limits) if limits else None


def _meminfo_available() -> int | None:
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
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


def check_memory(needed_bytes: float, what: str, remedy: str) -> None:
    """InsufficientMemoryError when ``needed_bytes`` exceeds the available memory.

    The message reads "{what} needs about 5.4 GiB, more than the 2.1 GiB available; {remedy}", so ``what``
    names the argument and the structure (e.g. "X: the 100000 x 100000 cover matrix") and ``remedy``
    says what to change.
    """
    available = available_bytes()
    if available is not None and needed_bytes > available:
        raise InsufficientMemoryError(
            f"{what} needs about {format_bytes(needed_bytes)}, more than the {format_bytes(available)} available; "
            + remedy
        )


def format_bytes(n_bytes: float) -> str:
    """A byte count in the largest binary unit below it, e.g. "5.4 GiB"."""
    for power, unit in ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n_bytes >= 1024**power:
            return f"{n_bytes / 1024**power:.3g} {unit}"
    return f"{n_bytes:.0f} bytes"
