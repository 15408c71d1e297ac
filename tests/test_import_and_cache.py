"""Lazy import (``import interpretable_zoo`` loads no numerical library, the public API still resolves) and
the persistent compilation cache (on by default, moved or turned off by INTERPRETABLE_ZOO_CACHE_DIR)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import interpretable_zoo as iz
from interpretable_zoo import compilation_cache

HEAVY = ("jax", "numpyro", "arviz", "sklearn", "pandas", "scipy", "matplotlib")
MODEL_FILES = ("bayesian_sets", "bcm", "brl", "mgm", "prototype_selection")

# Counts JAX's compile requests ('backend_compile' events: one per program, whether compiled or loaded
# from the persistent cache), the requests served from the cache, and the programs written to it, for
# the prototype-selection cover matrix of a small data set.
COMPILE_AND_COUNT = """
import json, jax
counts = {"backend_compile": 0, "cache_hits": 0, "cache_writes": 0}
def on_duration(event, duration, **kwargs):
    if "backend_compile" in event:
        counts["backend_compile"] += 1
def on_event(event, **kwargs):
    if event == "/jax/compilation_cache/cache_hits":
        counts["cache_hits"] += 1
    if event == "/jax/compilation_cache/cache_misses":  # recorded when an entry is written
        counts["cache_writes"] += 1
jax.monitoring.register_event_duration_secs_listener(on_duration)
jax.monitoring.register_event_listener(on_event)
import numpy as np
from interpretable_zoo.inference.set_cover import ball_cover
X = np.random.default_rng(0).normal(size=(40, 3))
ball_cover(X, None, 1.0)
counts["cache_dir"] = jax.config.jax_compilation_cache_dir
print(json.dumps(counts))
"""


def run_python(code: str, env: dict[str, str], *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *options, "-c", code], capture_output=True, text=True, env=env, check=True)


def clean_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """This process's environment without any cache setting, with the user cache folder under ``tmp_path``."""
    cache_settings = ("JAX_COMPILATION_CACHE_DIR", "JAX_ENABLE_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith((*cache_settings, compilation_cache.ENV_VAR))}
    env["XDG_CACHE_HOME"] = str(tmp_path / "user-cache")
    env.update(overrides)
    return env


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


def test_import_and_help_load_no_numerical_library(tmp_path):
    code = (
        "import sys, json, contextlib, io\n"
        "import interpretable_zoo\n"
        f"after_import = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "from interpretable_zoo import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    cli.main(['--help'])\n"
        f"after_help = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "print(json.dumps([after_import, after_help]))\n"
    )
    after_import, after_help = json.loads(run_python(code, clean_env(tmp_path)).stdout)
    assert after_import == [] and after_help == []


def test_public_api_resolves():
    namespace: dict = {}
    exec("from interpretable_zoo import *", namespace)
    assert set(iz.__all__) <= set(namespace)
    for package in (iz.datasets, iz.diagnostics):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
        assert set(package.__all__) <= set(dir(package))
    assert set(iz.__all__) <= set(dir(iz))
    for name in MODEL_FILES:
        assert getattr(iz.models, name).__name__ == f"interpretable_zoo.models.{name}"
        assert name in dir(iz.models)
    assert iz.models.bcm.Priors().__class__.__module__ == "interpretable_zoo.models.bcm"
    assert iz.inference.brl.fit_brl is iz.fit_brl
    assert iz.__version__ == "0.1.0"
    with pytest.raises(AttributeError, match="has no attribute 'no_such_model'"):
        iz.models.no_such_model


def test_arviz_refactor_warning_is_silenced_wherever_arviz_is_first_imported(tmp_path):
    # ArviZ warns once a day, stamping a file in the user cache folder: a fresh folder per run
    quiet = run_python("import interpretable_zoo as iz; iz.diagnostics.summary", clean_env(tmp_path / "a"), "-W", "always")
    assert "ArviZ is undergoing a major refactor" not in quiet.stderr
    control = run_python("import arviz", clean_env(tmp_path / "b"), "-W", "always")
    assert "ArviZ is undergoing a major refactor" in control.stderr


def test_default_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv(compilation_cache.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compilation_cache.cache_dir() == tmp_path / "interpretable-zoo" / "jax"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # not absolute: ignored, as the XDG spec says
    assert compilation_cache.cache_dir() == Path.home() / ".cache" / "interpretable-zoo" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert compilation_cache.cache_dir() == Path.home() / ".cache" / "interpretable-zoo" / "jax"
    for off in ("off", "OFF", "0", ""):
        monkeypatch.setenv(compilation_cache.ENV_VAR, off)
        assert compilation_cache.cache_dir() is None


def test_compiled_programs_are_cached_and_a_warm_run_compiles_nothing(tmp_path):
    folder = tmp_path / "cache"
    env = clean_env(tmp_path, **{compilation_cache.ENV_VAR: str(folder)})
    cold = json.loads(run_python(COMPILE_AND_COUNT, env).stdout)
    written = files_under(folder)
    entries = {name for name in written if name.endswith("-cache")}
    assert cold["cache_dir"] == str(folder)
    assert cold["backend_compile"] > 0 and cold["cache_writes"] > 0 and len(entries) == cold["cache_writes"]
    warm = json.loads(run_python(COMPILE_AND_COUNT, env).stdout)
    assert warm["backend_compile"] == cold["backend_compile"]
    assert warm["cache_hits"] == warm["backend_compile"] and warm["cache_writes"] == 0  # nothing compiled anew
    assert files_under(folder) == written
    assert files_under(tmp_path / "user-cache") == set()


def test_a_cache_entry_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    """Processes sharing the cache folder read entries while others write them: an entry is written to a
    temporary file that is renamed into place, so that it is never seen half-written (JAX's own writer,
    the control, writes the entry's file in place)."""
    from jax._src import lru_cache

    compilation_cache.configure()
    renames, rename = [], os.replace

    def watched(source, target):
        renames.append((Path(target).exists(), Path(source).read_bytes()))
        rename(source, target)

    monkeypatch.setattr(os, "replace", watched)
    value = bytes(range(256)) * 64
    cache = lru_cache.LRUCache(str(tmp_path / "ours"), max_size=-1)
    cache.put("entry", value)
    cache.put("entry", b"another value")  # an entry, once there, stays
    assert renames == [(False, value)] and cache.get("entry") == value
    assert files_under(tmp_path / "ours") == {"entry-cache"}
    renames.clear()
    monkeypatch.setattr(lru_cache.LRUCache, "put", lru_cache.LRUCache.put.__wrapped__)
    lru_cache.LRUCache(str(tmp_path / "jax"), max_size=-1).put("entry", value)
    assert renames == [] and files_under(tmp_path / "jax") == {"entry-cache"}


def test_cache_turned_off_writes_nothing(tmp_path):
    env = clean_env(tmp_path, **{compilation_cache.ENV_VAR: "off"})
    counts = json.loads(run_python(COMPILE_AND_COUNT, env).stdout)
    assert counts["cache_dir"] is None
    assert counts["backend_compile"] > 0 and counts["cache_hits"] == counts["cache_writes"] == 0
    assert files_under(tmp_path) == set()


@pytest.mark.parametrize("how", ["environment", "jax.config"])
def test_a_cache_configured_in_jax_is_left_as_it_is(tmp_path, how):
    theirs = str(tmp_path / "theirs")
    env = clean_env(tmp_path, **{compilation_cache.ENV_VAR: str(tmp_path / "ours")})
    code = "import jax\nbefore = jax.config.jax_persistent_cache_min_compile_time_secs\n"
    if how == "environment":
        env["JAX_COMPILATION_CACHE_DIR"] = theirs
    else:
        code += f"jax.config.update('jax_compilation_cache_dir', {theirs!r})\n"
    code += (
        "import interpretable_zoo.inference\n"
        "after = jax.config.jax_persistent_cache_min_compile_time_secs\n"
        "print(jax.config.jax_compilation_cache_dir, before == after)\n"
    )
    assert run_python(code, env).stdout.split() == [theirs, "True"]
    assert not (tmp_path / "ours").exists()


def test_an_unusable_cache_folder_is_a_warning_naming_the_variable(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = clean_env(tmp_path, **{compilation_cache.ENV_VAR: str(blocker / "cache")})
    code = "import jax, interpretable_zoo.inference\nprint(jax.config.jax_compilation_cache_dir)"
    result = run_python(code, env)
    assert result.stdout.strip() == "None"
    assert f"{compilation_cache.ENV_VAR}: cannot create the compilation cache folder" in result.stderr


def test_compiled_programs_are_released_when_the_mappings_run_low():
    """Four rounds of twenty programs compiled for new shapes: releasing them after each round (the share
    crossed, with a warning naming the limit) keeps the process's memory mappings where the first round
    left them, and a released program compiles again and agrees. Control: without releasing, every
    round adds its mappings; below the share, nothing is released."""
    import jax
    import jax.numpy as jnp

    from interpretable_zoo import compiled_programs

    programs = [jax.jit(lambda x, k=k: jnp.cumsum(jnp.sin(x) * k, axis=0) @ x.T) for k in range(20)]

    def compile_round(size: int) -> list:
        return [program(jnp.ones((size, size))) for program in programs]

    def rounds(sizes, release: bool) -> list[int]:
        held = []
        for size in sizes:
            compile_round(size)
            if release:
                with pytest.warns(RuntimeWarning, match=r"memory mappings that Linux allows it \(vm\.max_map_count\)"):
                    assert compiled_programs.release_if_mappings_run_low(share=0.0)
                assert all(program._cache_size() == 0 for program in programs)
            held.append(compiled_programs.mapping_count()[0])
        return held

    first = compile_round(8)
    assert not compiled_programs.release_if_mappings_run_low(share=1.0)
    assert all(program._cache_size() == 1 for program in programs)
    kept = rounds([16, 17, 18, 19], release=False)
    one_round = (kept[-1] - kept[0]) / 3
    assert one_round > 20 * 5  # a small program holds about ten
    released = rounds([20, 21, 22, 23], release=True)
    assert released[-1] < released[0] + one_round / 2
    for program, before in zip(programs, first):
        assert (program(jnp.ones((8, 8))) == before).all()
