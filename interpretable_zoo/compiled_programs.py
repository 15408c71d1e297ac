"""Compiled programs held in memory, and the memory mappings they use up.

XLA's CPU backend loads each compiled program's machine code into memory mappings of its own: about ten
for a small program, about 2,500 for the programs of one BCM fit of new shapes. Linux allows a process
``vm.max_map_count`` mappings (65,530 by default), and XLA does not fail cleanly when a compilation finds
none left: it crashes the process (SIGSEGV or abort) in compilation or in loading a cached program. A
long session that fits many shapes (a notebook, a test run, a sweep) reaches that limit.
:func:`clear_caches` releases every compiled program, JAX's and this package's;
:func:`release_if_mappings_run_low` does so when a process has used up a share of its mappings, and every
fit calls it before it compiles.
"""

from __future__ import annotations

import warnings
from pathlib import Path

_MAPS = Path("/proc/self/maps")
_MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")

MAPPING_SHARE = 0.5
"""The share of ``vm.max_map_count`` past which :func:`release_if_mappings_run_low` releases the compiled
programs: a fit's compilations then have the other half, many times what one needs."""

_PACKAGE_CACHES: list = []


def package_cache(container):
    """``container`` (an empty dict or set), registered as a cache that :func:`clear_caches` empties: of
    compiled executables (``jax.stages.Compiled``) that this package keeps, or of verdicts that spare a
    program's compilation (a check passed once is not run again), so that after a release the first call
    compiles what later calls of the same shapes need."""
    _PACKAGE_CACHES.append(container)
    return container


def clear_caches() -> None:
    """Release the compiled programs held in memory: JAX's (``jax.clear_caches()``) and this package's.
    Later calls compile again, from the persistent compilation cache where it is on.

    Example:
        >>> iz.clear_caches()  # e.g. between the fits of a long sweep over shapes
    """
    import gc

    import jax

    for cache in _PACKAGE_CACHES:
        cache.clear()
    jax.clear_caches()
    gc.collect()  # a program's mappings go when its executable is freed


def mapping_count() -> tuple[int, int] | None:
    """(memory mappings this process holds, ``vm.max_map_count``); None where Linux's /proc is unreadable."""
    try:
        with _MAPS.open("rb") as maps:
            held = sum(block.count(b"\n") for block in iter(lambda: maps.read(1 << 20), b""))
        return held, int(_MAX_MAP_COUNT.read_text())
    except (OSError, ValueError):
        return None


def release_if_mappings_run_low(share: float = MAPPING_SHARE) -> bool:
    """:func:`~interpretable_zoo.compiled_programs.clear_caches`, with a warning, when this process holds
    more than ``share`` of its ``vm.max_map_count`` memory mappings; returns whether it did."""
    counts = mapping_count()
    if counts is None or counts[0] <= share * counts[1]:
        return False
    clear_caches()
    after = mapping_count()
    now_held = f"{after[0]:,}" if after else "an unknown number of"
    warnings.warn(
        f"this process held {counts[0]:,} of the {counts[1]:,} memory mappings that Linux allows it "
        f"(vm.max_map_count), most of them compiled programs', and XLA crashes when a compilation finds none "
        f"left: released the compiled programs in memory (interpretable_zoo.clear_caches(), jax.clear_caches()), "
        f"{now_held} mappings now held; later calls compile again.",
        RuntimeWarning,
        stacklevel=3,
    )
    return True
