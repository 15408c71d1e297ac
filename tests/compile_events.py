"""Counting XLA compilations in a test. JAX reports a ``backend_compile`` event, with the program's name,
for every program it does not find in memory (compiled, or loaded from the persistent cache); a program
found in memory reports none."""

import contextlib

import jax


@contextlib.contextmanager
def programs_compiled():
    """The names of the programs compiled (or loaded from the persistent cache) inside the block, so that
    a test asserting ``== []`` says which program it did not expect."""
    names = []

    def listener(event, duration, **kwargs):
        if "backend_compile" in event:
            names.append(kwargs.get("fun_name", event))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield names
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
