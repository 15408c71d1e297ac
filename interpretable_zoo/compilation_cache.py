"""JAX's persistent compilation cache, on by default: a compiled program is written to a folder, and a later
process that needs the same program (same shapes, JAX version and device) loads it instead of compiling.

The folder is ``$INTERPRETABLE_ZOO_CACHE_DIR``, else ``$XDG_CACHE_HOME/interpretable-zoo/jax``, else
``~/.cache/interpretable-zoo/jax``; ``INTERPRETABLE_ZOO_CACHE_DIR=off`` (or ``0``, ``false``, ``no``, empty)
turns the cache off. A cache configured in JAX itself (``JAX_COMPILATION_CACHE_DIR`` or
``jax.config.update("jax_compilation_cache_dir", ...)`` before the first use of this package's models,
inference or diagnostics) is left as it is, and so is any ``JAX_PERSISTENT_CACHE_*`` variable.
"""

from __future__ import annotations

import os
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
