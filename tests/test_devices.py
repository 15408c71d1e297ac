"""Chains split over several devices give the same draws as on one (issue: chains across devices).

JAX fixes its device count at start-up, so the fits run in a subprocess that asks the CPU for four
devices (``--xla_force_host_platform_device_count=4``).
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
    for name, fit in fits.items():
        for devices in ((1, 2, 4) if name == "brl" else (1, 4)):
            result = fit(devices, 3)
            report[f"{name}/{devices}"] = draws(result)
            report[f"{name}/{devices}/used"] = len(result.run.ladder.rng_key.sharding.device_set)
        report[f"{name}/other seed"] = draws(fit(4, 4))
    for devices in (3, 5):
        try:
            fits["brl"](devices, 3)
        except ValueError as error:
            report[f"error/{devices}"] = str(error)
    print(json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def report():
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4"}
    completed = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_the_subprocess_sees_four_devices(report):
    assert report["devices_seen"] == 4


@pytest.mark.parametrize("name, devices", [("brl", 2), ("brl", 4), ("bcm", 4)])
def test_same_seed_same_draws_on_more_devices(report, name, devices):
    assert report[f"{name}/{devices}/used"] == devices  # the chains really were split
    assert report[f"{name}/1/used"] == 1
    assert report[f"{name}/{devices}"] == report[f"{name}/1"]


@pytest.mark.parametrize("name", ["brl", "bcm"])
def test_another_seed_gives_other_draws(report, name):
    """Negative control: the comparison above can fail."""
    assert report[f"{name}/other seed"] != report[f"{name}/1"]


@pytest.mark.parametrize("devices", [3, 5])
def test_a_device_count_that_does_not_fit_is_named(report, devices):
    assert report[f"error/{devices}"].startswith("devices:")
