"""JAX's persistent compilation cache, on by default: a compiled program is written to a folder, and a later
process that needs the same program (same shapes, JAX version and device) loads it instead of compiling.

The folder is ``$INTERPRETABLE_ZOO_CACHE_DIR``, else ``$XDG_CACHE_HOME/interpretable-zoo/jax``, else
``~/.cache/interpretable-zoo/jax``; ``INTERPRETABLE_ZOO_CACHE_DIR=off`` (or ``0``, ``false``, ``no``, empty)
turns the cache off. A cache configured in JAX itself (``JAX_COMPILATION_CACHE_DIR`` or
``jax.config.update("jax_compilation_cache_dir", ...)`` before the first use of this package's models,
inference or diagnostics) is left as it is, and so is any ``JAX_PERSISTENT_CACHE_*`` variable. Either
way, entries are written whole (:func:`_write_entries_whole`), so that processes may share the folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import warnings
from pathlib import Path

ENV_VAR = "INTERPRETABLE_ZOO_CACHE_DIR"
OFF_VALUES = frozenset({"", "0", "off", "false", "no"})
# JAX writes only programs that took at least this long to compile; its default (1 s) would leave out
# most of the programs a fit compiles, and loading even a small program is faster than compiling it.
MIN_COMPILE_TIME_SECS = 0.0


def cache_dir() -> Path | None:
    """The cache folder chosen by the environment, or None when ``INTERPRETABLE_ZOO_CACHE_DIR`` turns it off."""
    value = os.environ.get(ENV_VAR)
    if value is not None:
        return None if value.strip().lower() in OFF_VALUES else Path(value).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "interpretable-zoo" / "jax"


def configure() -> Path | None:
    """Point JAX's persistent cache at :func:`cache_dir` unless JAX already has a cache folder.

    Returns the folder JAX now uses, or None when there is no persistent cache. Called when the
    ``models``, ``inference`` or ``diagnostics`` subpackage is first imported, before anything compiles.
    """
    import jax

    _write_entries_whole()
    configured = jax.config.jax_compilation_cache_dir
    if configured or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return Path(configured) if configured else None
    folder = cache_dir()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        warnings.warn(
            f"{ENV_VAR}: cannot create the compilation cache folder {folder} ({error}); compiled programs "
            f"are not kept between runs. Set {ENV_VAR} to a writable folder, or to 'off'.",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME_SECS)
    return folder


def _write_entries_whole() -> None:
    """Have JAX's cache write each entry to a temporary file in the folder and rename it into place.

    Without a size limit JAX writes an entry in place (``Path.write_bytes``) and takes no lock, so a process
    that reads the entry while another writes it (the workers of a test run, jobs sharing the folder, the
    processes of one fit) reads a truncated program, and deserialising one can crash the process. A rename
    within a folder is atomic on POSIX: a reader then finds no entry or a whole one. JAX's own writer is
    kept where its cache has a size limit (then reads and writes hold a file lock), for folders given as
    URLs, and for a JAX whose cache module does not have the layout this replacement reads."""
    from jax._src import lru_cache

    cache, suffix = getattr(lru_cache, "LRUCache", None), getattr(lru_cache, "_CACHE_SUFFIX", None)
    if cache is None or suffix is None or getattr(cache.put, "writes_whole", False):
        return
    put_in_place = cache.put

    def put(self, key: str, value: bytes) -> None:
        if getattr(self, "eviction_enabled", True) or not key or "://" in str(self.path):
            return put_in_place(self, key, value)
        entry = Path(str(self.path)) / f"{key}{suffix}"
        if entry.exists():
            return
        partial = entry.with_name(f".{key}.{os.getpid()}.{secrets.token_hex(4)}.partial")
        try:  # created as JAX's own files are (mode 0o666 less the umask)
            with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as file:
                file.write(value)
            os.replace(partial, entry)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise

    put.writes_whole, put.__wrapped__ = True, put_in_place
    cache.put = put
