"""BCM under the tempering engine, exactly: the posterior rung's draws, of the target as ``fit_bcm`` builds
it for a ladder, against the enumerated posterior (negative controls: a wrong prior, swaps with the sign of
the log likelihood turned), and simulation-based calibration of the tempered sampler (negative control: data
from another prior)."""

import dataclasses
from functools import partial

import jax.numpy as jnp
import numpy as np
import pytest
from test_bcm_exact import N_CLUSTERS, OTHER_PRIORS, X_TINY, exact_probabilities, gof_of_draws
from test_bcm_sbc import N_CLUSTERS as SBC_CLUSTERS
from test_bcm_sbc import N_VALUES, PRIORS, calibrate

from interpretable_zoo.inference import bcm_gibbs, convergence, tempering
from interpretable_zoo.inference.bcm import _kernel
from interpretable_zoo.models import bcm

KERNEL_WITH_Z = _kernel(store_z=True)  # the engine's BCM kernel, z kept in the draws


def ladder_target(priors):
    """X_TINY's target as ``fit_bcm`` builds it for a ladder (:func:`bcm_gibbs.fit_options`)."""
    return bcm_gibbs.make_target(X_TINY, N_CLUSTERS, priors, **bcm_gibbs.fit_options(tempered=True, platform="cpu"))


def tempered_draws(sampler_priors, seed, kernel=KERNEL_WITH_Z):
    """8 chains x 3000 kept scans of a 4-rung ladder with a tuned schedule on X_TINY; their params."""
    static, data = ladder_target(sampler_priors)
    run = convergence.sample(kernel, static, data, num_chains=8, seed=seed, n_temperatures=4, num_samples=3000,
                             tuning_rounds=2, scans_per_chunk=500, progress_bar=False)
    assert run.n_temperatures == 4 and 0 < run.swap_accept.mean() < 1
    return {name: run.records[name] for name in ("omega", "prototype", "z")}


def gof_against_enumeration(draws, exact_priors):
    states, probs = exact_probabilities(exact_priors)
    return gof_of_draws(draws, states, probs)


def test_tempered_sampler_matches_the_enumerated_posterior():
    result = gof_against_enumeration(tempered_draws(OTHER_PRIORS, seed=3), OTHER_PRIORS)
    assert result.passed(alpha=1e-3), result


def test_tempered_negative_control_wrong_prior_fails():
    result = gof_against_enumeration(tempered_draws(bcm.Priors(), seed=3), OTHER_PRIORS)
    assert not result.passed(alpha=1e-3), result


def test_swaps_with_the_sign_of_log_likelihood_turned_fail(monkeypatch):
    """A swap of rungs beta < beta' holding states x and x' is accepted with probability
    min(1, exp((beta' - beta) (log L(x) - log L(x')))); with the sign turned it favours the worse state at
    the posterior rung."""
    monkeypatch.setattr(tempering, "path_log_likelihood", lambda states: -states.log_likelihood)
    kernel = KERNEL_WITH_Z._replace(record=partial(KERNEL_WITH_Z.record))  # another static argument: traced again
    result = gof_against_enumeration(tempered_draws(OTHER_PRIORS, seed=3, kernel=kernel), OTHER_PRIORS)
    assert not result.passed(alpha=1e-3), result


def test_the_split_merge_move_runs_where_tuning_found_it_accepted(monkeypatch):
    """Once tuning ends, the move is kept to the rungs where it paid in the last tuning round (here: where
    it was accepted more often than on the median rung, so that on this small data set, where every rung
    accepts it most of the time, some rungs drop it): the sampling round attempts it exactly there, the
    posterior rung still matches the enumerated posterior, and extend keeps it."""
    facts, learn = [], KERNEL_WITH_Z.learn_proposal

    def recording_learn(*args):
        facts.append(args[-1])
        median_rate = np.median(facts[-1].move_rates["split_merge_accepted"])
        monkeypatch.setattr(bcm_gibbs, "SPLIT_MERGE_MIN_ACCEPTANCE", median_rate)
        return learn(*args)

    kernel = KERNEL_WITH_Z._replace(learn_proposal=recording_learn)
    static, data = ladder_target(OTHER_PRIORS)
    run = convergence.sample(kernel, static, data, num_chains=8, seed=3, n_temperatures=4, num_samples=3000,
                             tuning_rounds=2, scans_per_chunk=500, progress_bar=False)
    assert [fact.tuned for fact in facts] == [False, True]
    assert run.proposal == bcm_gibbs.learn_split_merge_rungs(static, data, None, None, None, facts[-1])
    attempted = (run.schedule <= run.proposal.max_beta) | (run.proposal.posterior & (run.schedule == 1.0))
    assert 0 < attempted.sum() < len(attempted)
    np.testing.assert_array_equal(~np.isnan(run.move_rates["split_merge_accepted"]), attempted)
    result = gof_against_enumeration({name: run.records[name] for name in ("omega", "prototype", "z")}, OTHER_PRIORS)
    assert result.passed(alpha=1e-3), result
    longer = convergence.extend(run, kernel, static, data, num_samples=500)
    assert longer.proposal == run.proposal
    np.testing.assert_array_equal(~np.isnan(longer.move_rates["split_merge_accepted"]), attempted)


SBC_SCHEDULE = jnp.array([0.0, 0.4, 1.0])
SBC_WARMUP, SBC_DRAWS = 100, 200


def tempered_fit(rng_key, data):
    """One chain of a fixed 3-rung ladder on a simulated data set (every part of it, swaps included,
    traceable, so that SBC runs it inside jax.vmap over the simulations); the posterior rung's draws."""
    static, target = bcm_gibbs.make_target(data["x"], SBC_CLUSTERS, PRIORS, N_VALUES)
    ladder = tempering.initial_ladder(KERNEL_WITH_Z, static, target, rng_key[None], len(SBC_SCHEDULE))
    n_scans = SBC_WARMUP + SBC_DRAWS
    _, _, (records, _, _) = tempering.ladder_scans(KERNEL_WITH_Z, static, target, ladder, SBC_SCHEDULE, n_scans, n_scans)
    return {name: records[name][SBC_WARMUP:, 0] for name in ("omega", "prototype", "z")}


@pytest.mark.parametrize(
    "simulated_priors, num_simulations, passes",
    [(PRIORS, 400, True), (dataclasses.replace(PRIORS, q=0.8), 100, False)],
    ids=["exact", "data_from_another_prior_must_fail"],
)
def test_simulation_based_calibration_of_the_tempered_sampler(simulated_priors, num_simulations, passes):
    """Data sets drawn from the model, each fitted by :func:`tempered_fit`, the draws ranked among the
    simulated values. Negative control: the data sets drawn under another prior of the subspace
    indicators than the one the fits target, on fewer data sets: a prior this far off fails with 100."""
    result = calibrate(tempered_fit, seed=2, simulated_priors=simulated_priors, num_simulations=num_simulations)
    assert result.passed(alpha=1e-3) == passes, result
