"""Counting XLA compilations in a test. JAX reports a ``backend_compile`` event, with the program's name,
for every program it does not find in memory (compiled, or loaded from the persistent cache); a program
found in memory reports none."""

import contextlib

import jax


@contextlib.contextmanager
def programs_compiled():
    """The names of the programs compiled (or loaded from the persistent cache) inside the block, so that
    a test asserting ``== []`` says which program it did not expect."""
    with _recorded(lambda event, kwargs: kwargs.get("fun_name", event) if "backend_compile" in event else None) as names:
        yield names


@contextlib.contextmanager
def compile_pipeline_events():
    """Every stage of JAX's compile pipeline reported inside the block (tracing, lowering, backend
    compile), as event names: ``== []`` means nothing was traced again either."""
    with _recorded(lambda event, kwargs: event if event.startswith(PIPELINE) else None) as events:
        yield events


PIPELINE = "/jax/core/compile/"
"""The prefix of the duration events of JAX's compile pipeline."""


@contextlib.contextmanager
def _recorded(entry):
    """A list of ``entry(event, kwargs)`` for each duration event JAX reports inside the block (None: left out)."""
    entries = []

    def listener(event, duration, **kwargs):
        value = entry(event, kwargs)
        if value is not None:
            entries.append(value)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield entries
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
