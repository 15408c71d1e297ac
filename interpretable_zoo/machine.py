"""What the machine lends this process, read without importing JAX."""

import os


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system reports one, else every core."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
