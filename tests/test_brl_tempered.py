"""BRL under the tempering engine, exactly: the posterior rung's draws against the enumerated posterior
(negative controls: a wrong prior, swaps that leave out the reference), and simulation-based
calibration of the tempered sampler."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from test_brl_sampler import CARDINALITIES, OTHER_PRIORS, gof_against_enumeration, list_sbc, list_sites, tiny_problem

from interpretable_zoo.inference import brl_mh, convergence, tempering
from interpretable_zoo.inference.brl import KERNEL
from interpretable_zoo.models import brl


def tempered_draws(priors, seed, kernel=KERNEL):
    """8 chains x 3000 kept scans of a 4-rung ladder with a tuned schedule on the tiny problem."""
    truth_table, y = tiny_problem()
    static, data = brl_mh.make_target(truth_table, CARDINALITIES, 2, y, priors, 5)
    run = convergence.sample(kernel, static, data, num_chains=8, seed=seed, n_temperatures=4, num_samples=3000,
                             tuning_rounds=2, scans_per_chunk=500, progress_bar=False)
    assert run.n_temperatures == 4 and 0 < run.swap_accept.mean() < 1
    return run.records


def test_tempered_sampler_matches_the_enumerated_posterior():
    result = gof_against_enumeration(tempered_draws(OTHER_PRIORS, seed=3), OTHER_PRIORS)
    assert result.passed(alpha=1e-3), result


def test_tempered_negative_control_wrong_prior_fails():
    result = gof_against_enumeration(tempered_draws(brl.Priors(lam=1.5), seed=3), brl.Priors())
    assert not result.passed(alpha=1e-3), result


def test_swaps_that_leave_out_the_reference_fail(monkeypatch):
    """The replicas follow the reference path (brl_mh), so swaps must weigh log p + log L - log r; swaps
    on log L alone (the prior path's) leave the posterior rung wrong."""
    monkeypatch.setattr(tempering, "path_log_likelihood", lambda states: states.log_likelihood)
    kernel = KERNEL._replace(record=partial(KERNEL.record))  # another static argument: traced again, with the patch
    result = gof_against_enumeration(tempered_draws(OTHER_PRIORS, seed=3, kernel=kernel), OTHER_PRIORS)
    assert not result.passed(alpha=1e-3), result


def test_simulation_based_calibration_of_the_tempered_sampler():
    """Lists and labels drawn from brl.model; each simulation fitted by one chain of a fixed 3-rung ladder
    (every part of it, swaps included, run inside jax.vmap over the simulations)."""
    truth_table, _ = tiny_problem(n=30, seed=4)
    capacity, priors = 5, brl.Priors(lam=2.0)
    num_warmup, num_draws, thin = 100, 60, 10
    static, template = brl_mh.make_target(truth_table, CARDINALITIES, 2, np.zeros(30, int), priors, capacity)
    schedule = jnp.array([0.0, 0.3, 1.0])
    n_scans = num_warmup + num_draws * thin

    def fit(rng_key, data):
        target = template._replace(label_bits=brl_mh.pack_labels(data["y"], 2, static.n_words))
        ladder = tempering.initial_ladder(KERNEL, static, target, rng_key[None], 3)
        _, _, (records, _, _) = tempering.ladder_scans(KERNEL, static, target, ladder, schedule, n_scans, n_scans)
        rules, lengths = records["rules"][num_warmup + thin - 1 :: thin, 0], records["length"][num_warmup + thin - 1 :: thin, 0]
        return list_sites(rules, lengths)

    result = list_sbc(jax.random.key(1), fit, truth_table, priors, capacity)
    assert result.passed(alpha=1e-3), result
