"""Chains split over several devices give the same draws as on one (issue: chains across devices), and so
does a process whose XLA thread pool has one thread.

JAX fixes its device count and XLA its CPU pool at start-up, so the fits run in subprocesses: one that asks
the CPU for four devices (``--xla_force_host_platform_device_count=4``) and keeps the default pool, one
with one device and a pool of one thread (``PJRT_NPROC=1``).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json
    from pathlib import Path

    import numpy as np
    import jax
    import interpretable_zoo as iz

    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, (60, 5)).astype(np.uint8)
    y = (X[:, 0] & X[:, 1]) | X[:, 3]
    codes = rng.integers(0, 3, (12, 6))
    fits = {
        "brl": lambda devices, seed: iz.fit_brl(X, y, num_samples=64, num_warmup=128, num_chains=4, n_temperatures=4,
                                                 seed=seed, devices=devices, progress_bar=False),
        "bcm": lambda devices, seed: iz.fit_bcm(codes, 2, num_samples=16, num_warmup=16, num_chains=4,
                                                 n_temperatures=2, seed=seed, devices=devices, progress_bar=False),
    }

    def draws(result):
        run = result.run
        return [np.asarray(v).tolist() for _, v in sorted({**run.summaries, **run.records}.items())]

    report = {"devices_seen": len(jax.devices())}
    several = len(jax.devices()) == 4
    for name, fit in fits.items():
        for devices in ((1, 2, 4) if name == "brl" else (1, 4)) if several else (1,):
            result = fit(devices, 3)
            report[f"{name}/{devices}"] = draws(result)
            report[f"{name}/{devices}/used"] = len(result.run.ladder.rng_key.sharding.device_set)
        if several:
            report[f"{name}/other seed"] = draws(fit(4, 4))
    for devices in (3, 5) if several else ():
        try:
            fits["brl"](devices, 3)
        except ValueError as error:
            report[f"error/{devices}"] = str(error)
    # the threads of XLA's CPU pool, by the name the runtime gives them (Linux only: None elsewhere)
    tasks = Path("/proc/self/task")
    report["pool_threads"] = sum(
        (task / "comm").read_text().startswith("tf_XLAEigen") for task in tasks.iterdir()
    ) if tasks.is_dir() else None
    print(json.dumps(report))
    """
)


def _run_script(extra_env):
    """SCRIPT's report, run with ``extra_env`` over this environment, less the variables that size XLA's CPU
    pool (PJRT_NPROC, then NPROC) unless ``extra_env`` sets them."""
    env = {name: value for name, value in os.environ.items() if name not in ("PJRT_NPROC", "NPROC")}
    completed = subprocess.run([sys.executable, "-c", SCRIPT], env={**env, **extra_env}, capture_output=True,
                               text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def report():
    return _run_script({"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4"})


@pytest.fixture(scope="module")
def one_thread_report():
    return _run_script({"PJRT_NPROC": "1"})


def test_the_subprocess_sees_four_devices(report):
    assert report["devices_seen"] == 4


@pytest.mark.parametrize("name, devices", [("brl", 2), ("brl", 4), ("bcm", 4)])
def test_same_seed_same_draws_on_more_devices(report, name, devices):
    assert report[f"{name}/{devices}/used"] == devices  # the chains really were split
    assert report[f"{name}/1/used"] == 1
    assert report[f"{name}/{devices}"] == report[f"{name}/1"]


@pytest.mark.parametrize("name", ["brl", "bcm"])
def test_same_seed_same_draws_with_a_pool_of_one_thread(report, one_thread_report, name):
    """XLA's CPU pool (one thread per core by default) splits work, not the draws: the same seed gives the
    same draws with a pool of one thread."""
    assert one_thread_report["devices_seen"] == 1
    if one_thread_report["pool_threads"] is not None:  # the pools, where the system names its threads
        assert one_thread_report["pool_threads"] == 1
        # the comparison's other side: the default pool, of at least one thread per core (and per forced device)
        assert report["pool_threads"] >= len(os.sched_getaffinity(0))
    assert one_thread_report[f"{name}/1"] == report[f"{name}/1"]


@pytest.mark.parametrize("name", ["brl", "bcm"])
def test_another_seed_gives_other_draws(report, name):
    """Negative control: the comparison above can fail."""
    assert report[f"{name}/other seed"] != report[f"{name}/1"]


@pytest.mark.parametrize("devices", [3, 5])
def test_a_device_count_that_does_not_fit_is_named(report, devices):
    assert report[f"error/{devices}"].startswith("devices:")
