"""A second fit of the same shapes compiles nothing (Bayesian Sets compiles nothing at all; MGM and BRL
are covered in their own test files): data, priors and seeds enter the compiled programs
as arguments, never as constants (XLA backend compiles counted with jax.monitoring)."""

import contextlib

import jax
import numpy as np

from interpretable_zoo.inference.bcm import fit_bcm
from interpretable_zoo.inference.prototype_selection import select_prototypes
from interpretable_zoo.models import bcm


@contextlib.contextmanager
def counted_compiles():
    compiles = []
    listener = lambda event, duration, **_: compiles.append(event) if "backend_compile" in event else None  # noqa: E731
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield compiles
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def test_bcm_refit_with_other_data_priors_and_seed_compiles_nothing():
    rng = np.random.default_rng(0)
    options = dict(num_warmup=16, num_samples=16, num_chains=2, n_temperatures=2, n_values=3)
    first = fit_bcm(rng.integers(0, 3, (15, 6)), 3, seed=0, **options)
    first.transform(), first.explain()
    with counted_compiles() as compiles:
        second = fit_bcm(rng.integers(0, 3, (15, 6)), 3, seed=1, priors=bcm.Priors(alpha=0.5, q=0.3), **options)
        second.transform(), second.explain()
    assert compiles == []
    assert not np.array_equal(first.idata.posterior["omega"].values, second.idata.posterior["omega"].values)


def test_prototype_selection_refit_compiles_nothing():
    rng = np.random.default_rng(1)
    select_prototypes(rng.normal(size=(60, 4)), rng.integers(0, 3, 60), eps=1.0)
    with counted_compiles() as compiles:
        select_prototypes(rng.normal(size=(60, 4)), rng.integers(0, 3, 60), eps=1.5)
    assert compiles == []
