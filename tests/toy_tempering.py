"""A target kernel on a small lattice whose tempered posteriors are known exactly, for the engine's tests.

State x in {0, ..., M - 1}; prior p(x) and likelihood L(x) are tables (``LatticeData``). The local move
proposes x - 1 or x + 1 (probability 1/2 each, rejected off the lattice), accepted with the tempered
Metropolis ratio of p(x) L(x)^beta. With a deep valley of L between two modes, an untempered chain
started in one mode does not reach the other in thousands of steps, while the prior rung (beta = 0)
mixes in about M^2 steps: a small replica of the problem tempering solves.

``report_scale`` multiplies the log-likelihood the state reports to the engine (1 for the true kernel):
any other value makes the engine's swaps target the wrong tempered distributions, while the local moves
stay right, which is the negative control of the swap rule.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import random

from interpretable_zoo.inference.tempering import TargetKernel


class LatticeStatic(NamedTuple):
    n_sites: int


class LatticeData(NamedTuple):
    log_prior: jnp.ndarray  # (M,) normalised
    log_likelihood: jnp.ndarray  # (M,)
    report_scale: jnp.ndarray  # ()


class LatticeState(NamedTuple):
    x: jnp.ndarray
    log_prior: jnp.ndarray
    log_likelihood: jnp.ndarray


def _state(data, x):
    return LatticeState(x, data.log_prior[x], data.report_scale * data.log_likelihood[x])


def init(static, data, key):
    return _state(data, random.randint(key, (), 0, static.n_sites))


def _metropolis(static, data, state, proposal, key_accept, beta):
    """Accept or reject a move to site ``proposal`` (rejected off the lattice) at inverse temperature beta."""
    inside = (proposal >= 0) & (proposal < static.n_sites)
    proposal = jnp.clip(proposal, 0, static.n_sites - 1)
    log_ratio = (data.log_prior[proposal] - data.log_prior[state.x]) + beta * (
        data.log_likelihood[proposal] - data.log_likelihood[state.x]
    )
    accept = inside & (jnp.log(random.uniform(key_accept)) < log_ratio)
    return _state(data, jnp.where(accept, proposal, state.x)), accept


def _step_one(static, data, state, key, beta):
    key_move, key_accept = random.split(key)
    return _metropolis(static, data, state, state.x + jnp.where(random.bernoulli(key_move), 1, -1), key_accept, beta)


def step(static, data, states, keys, betas):
    """The new states and, as the info, whether each replica's move was accepted."""
    return jax.vmap(lambda s, k, b: _step_one(static, data, s, k, b))(states, keys, betas)


def summaries(static, data, states):
    return {"x": states.x.astype(jnp.float32)}


def record(static, data, states):
    return {"x": states.x}


KERNEL = TargetKernel(init, step, summaries, record)


def bimodal(n_sites: int = 12, slope: float = 3.0, report_scale: float = 1.0, tilt: float = 0.1):
    """Modes at 2 and M - 3 (the left one 0.7 nats higher), log L falling by ``slope`` per site away from
    the nearest mode; a prior tilted by ``tilt`` per site. Returns (static, data, exact posterior, log Z)."""
    x = np.arange(n_sites)
    log_likelihood = -slope * np.minimum(np.abs(x - 2), np.abs(x - (n_sites - 3))) + 0.7 * (x < n_sites / 2)
    log_prior = tilt * x - np.logaddexp.reduce(tilt * x)
    log_joint = log_prior + log_likelihood
    log_evidence = np.logaddexp.reduce(log_joint)
    data = LatticeData(jnp.asarray(log_prior), jnp.asarray(log_likelihood), jnp.asarray(report_scale))
    return LatticeStatic(n_sites), data, np.exp(log_joint - log_evidence), float(log_evidence)


class JumpData(NamedTuple):
    """The lattice's data and the share of proposals that jump two sites instead of one (the proposal that
    :data:`LEARNING_KERNEL` learns; every share leaves each tempered posterior invariant)."""

    lattice: LatticeData
    jump_share: jnp.ndarray  # ()


def _jump_step_one(static, data, state, key, beta):
    key_move, key_jump, key_accept = random.split(key, 3)
    distance = jnp.where(random.uniform(key_jump) < data.jump_share, 2, 1)
    proposal = state.x + distance * jnp.where(random.bernoulli(key_move), 1, -1)
    return _metropolis(static, data.lattice, state, proposal, key_accept, beta)


def learn_jump_share(static, data, records, states, share, facts):
    """The next round's jump share, from the round's posterior-rung draws (their share right of the
    middle) and the replicas' final sites: any deterministic function of them tests the engine's plumbing."""
    right = float(np.mean(np.asarray(records["x"]) >= static.n_sites // 2))
    return np.float32(0.1 + 0.4 * right + 0.05 * float(np.mean(np.asarray(states.x) % 2)))


def _jump_init(static, data, key):
    return init(static, data.lattice, key)


def _jump_step(static, data, states, keys, betas):
    return jax.vmap(lambda s, k, b: _jump_step_one(static, data, s, k, b))(states, keys, betas)


def _jump_summaries(static, data, states):
    return summaries(static, data.lattice, states)


def _jump_record(static, data, states):
    return record(static, data.lattice, states)


def with_jump_share(static, data, share):
    return data._replace(jump_share=jnp.asarray(share, jnp.float32))


LEARNING_KERNEL = TargetKernel(_jump_init, _jump_step, _jump_summaries, _jump_record, learn_jump_share, with_jump_share)
"""The lattice kernel with a proposal adapted from round to round (:class:`JumpData`)."""


def jump_data(data: LatticeData) -> JumpData:
    """``data`` for :data:`LEARNING_KERNEL`, no jumps before the first round has taught a share."""
    return JumpData(data, jnp.zeros((), jnp.float32))
