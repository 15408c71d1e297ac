"""Data for the Bayesian Case Model: exact draws of its generative process, the smiley faces of sec. 3.1,
and the USPS digits as BCM's sec. 4.1 uses them (7 grey-level bins, a few observations per digit)."""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pandas as pd
from numpyro.handlers import block, condition, seed, trace

from interpretable_zoo import compiled_hooks
from interpretable_zoo.datasets.base import Dataset, one_draw
from interpretable_zoo.datasets.preprocessing import bin_levels
from interpretable_zoo.datasets.real import load_usps
from interpretable_zoo.models import bcm

SMILEY_FEATURES = {
    "face_shape": ("circle", "square", "triangle"),
    "face_color": ("green", "orange", "purple"),
    "eye_shape": ("round", "star", "slit"),
    "mouth": ("smile", "frown", "open"),
}
# Planted subspaces (sec. 3.1: three clusters, two defining features each)
SMILEY_SUBSPACES = (("face_shape", "face_color"), ("face_color", "eye_shape"), ("eye_shape", "mouth"))
SMILEY_PRIORS = bcm.Priors(alpha=0.1, lam=1.0, c=50.0, q=0.5)


def _g_table(priors: bcm.Priors, n_candidates: int):
    """g(v, b, v') of :func:`~interpretable_zoo.models.bcm.g` for every omega bit b, candidate value v and value v'."""
    values = jnp.arange(n_candidates)
    return bcm.g(values[None, :], jnp.arange(2)[:, None], values, priors)


def _omega_log_prior(priors: bcm.Priors, n_clusters: int, n_features: int):
    """log p(omega_sj = b) of :func:`~interpretable_zoo.models.bcm.omega_distribution` for b = 0, 1, (S, P, 2)."""
    prior = bcm.omega_distribution(priors, n_clusters, n_features)
    return jnp.stack([prior.log_prob(jnp.full((n_clusters, n_features), b)) for b in (0, 1)], -1)


def _prototype_matters(n_values, priors: bcm.Priors) -> np.ndarray:
    """(P, 2): whether g(v, omega_sj = b) depends on the prototype value v, for b = 0, 1."""
    mask = bcm.value_mask(n_values)
    table = np.asarray(compiled_hooks.evaluate(bcm, _g_table, priors, mask.shape[1]))  # (2, V candidate, V)
    table = np.where(mask[:, None, None, :], table[None], 0.0)  # (P, 2, V candidate, V)
    varies = (table != table[:, :, :1, :]) & mask[:, None, :, None]
    return varies.any((2, 3))


def conditioned_model(n_obs: int, n_values, n_clusters: int, priors: bcm.Priors | None = None, omega=None):
    """Exact draws of BCM's process conditioned on each prototype being an observation (see ``models.bcm``).

    A NumPyro program for ``Predictive`` (data site ``x``; latent sites ``omega``, ``prototype``,
    ``prototype_value``, ``phi``, ``pi``, ``z``) whose draws have the collapsed sampler's target as their
    exact posterior. Conditioning on observation p_s agreeing with prototype s where g ignores the
    prototype value (omega_sj = 0) has probability 1/V_j whatever else was drawn: it tilts omega to
    p(omega_sj = b) proportional to its prior ``models.bcm.omega_distribution`` (1/V_j more if g ignores
    the prototype value under b),
    after which those values are read off the observation. The remaining agreement is enforced by
    rejection: omega (tilted) and ``model`` are redrawn (``lax.while_loop``) until observation p_s carries
    prototype s's values wherever g depends on them. ``omega`` (S, P), when given, is fixed instead of
    drawn (the draws are then exact conditionally on it).

    Example:
        The draw behind ``make_smiley_faces(30)``: 30 faces, 4 features of 3 values, 3 clusters, omega fixed:

        >>> import jax, numpyro
        >>> from interpretable_zoo.datasets.smiley_faces import SMILEY_PRIORS
        >>> omega = [[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
        >>> predictive = numpyro.infer.Predictive(iz.datasets.conditioned_model, num_samples=1)
        >>> draws = predictive(jax.random.PRNGKey(0), 30, [3, 3, 3, 3], 3, SMILEY_PRIORS, omega)
        >>> sorted(draws), draws["x"].shape, draws["prototype"].shape
        (['omega', 'phi', 'pi', 'prototype', 'prototype_value', 'x', 'z'], (1, 30, 4), (1, 3))
    """
    priors = priors or bcm.Priors()
    n_values = np.asarray(n_values, np.int64)
    n_features = len(n_values)
    matters = _prototype_matters(n_values, priors)  # (P, 2)
    log_prior = np.asarray(compiled_hooks.evaluate(bcm, _omega_log_prior, priors, n_clusters, n_features))  # (S, P, 2)
    log_weight = log_prior - np.where(matters, 0.0, np.log(n_values)[:, None])  # (S, P, 2)
    tilted_logits = jnp.asarray(log_weight[..., 1] - log_weight[..., 0])
    matters = jnp.asarray(matters)
    sites = ("omega", "prototype", "prototype_value", "phi", "pi", "z", "x")

    def draw(key):
        key_omega, key_model = jax.random.split(key)
        if omega is None:
            drawn = jax.random.bernoulli(key_omega, jax.nn.sigmoid(tilted_logits), (n_clusters, n_features))
        else:
            drawn = jnp.asarray(omega)
        conditioned = trace(condition(seed(bcm.model, key_model), {"omega": drawn.astype(jnp.int32)}))
        with block():  # keep the inner draw's sites out of the outer program's trace
            model_trace = conditioned.get_trace(n_obs, n_values, n_clusters, priors)
        return {name: model_trace[name]["value"] for name in sites}

    def redraw(carry):
        key, _, _ = carry
        key, subkey = jax.random.split(key)
        values = draw(subkey)
        must_agree = matters[jnp.arange(n_features), values["omega"]]  # (S, P)
        agree = values["x"][values["prototype"]] == values["prototype_value"]
        return key, values, jnp.all(agree | ~must_agree)

    key = numpyro.prng_key()
    empty = jax.tree.map(lambda leaf: jnp.zeros(leaf.shape, leaf.dtype), jax.eval_shape(draw, key))
    _, values, _ = jax.lax.while_loop(lambda carry: ~carry[2], redraw, (key, empty, jnp.array(False)))
    values["prototype_value"] = values["x"][values["prototype"]]
    for name in sites:
        numpyro.sample(name, dist.Delta(values[name], event_dim=jnp.ndim(values[name])))


def make_smiley_faces(n_faces: int = 240, seed: int = 0) -> Dataset:
    """The smiley faces of BCM sec. 3.1: ``n_faces`` faces drawn from the model with alpha = 0.1, q = 0.5,
    lambda = 1, c = 50, three clusters with the planted two-feature subspaces ``SMILEY_SUBSPACES``.

    X is a DataFrame of the four categorical features; y the dominant cluster of each face (argmax pi_i);
    ``extras`` hold the drawn ``omega``, ``prototype``, ``pi``, ``z`` and ``phi``.

    Example:
        >>> faces = iz.datasets.make_smiley_faces(n_faces=30)
        >>> faces.X.shape, faces.feature_names
        ((30, 4), ('face_shape', 'face_color', 'eye_shape', 'mouth'))
        >>> faces.extras["omega"]  # the planted subspaces: two features per cluster
        array([[1, 1, 0, 0],
               [0, 1, 1, 0],
               [0, 0, 1, 1]], dtype=int32)
    """
    if isinstance(n_faces, bool) or not isinstance(n_faces, numbers.Integral) or n_faces < 3:
        raise ValueError(f"n_faces: expected an integer of at least 3, got {n_faces!r}")
    names = list(SMILEY_FEATURES)
    omega = np.array([[name in subspace for name in names] for subspace in SMILEY_SUBSPACES], np.int32)
    n_values = np.array([len(levels) for levels in SMILEY_FEATURES.values()])
    draws = one_draw(conditioned_model, seed, int(n_faces), n_values, len(SMILEY_SUBSPACES), SMILEY_PRIORS, omega)
    x = draws["x"]
    frame = pd.DataFrame(
        {name: pd.Categorical.from_codes(x[:, j], categories=levels) for j, (name, levels) in enumerate(SMILEY_FEATURES.items())}
    )
    frame.index = [f"face_{i}" for i in range(n_faces)]
    return Dataset(
        name="smiley_faces",
        X=frame,
        y=draws["pi"].argmax(1),
        feature_names=tuple(names),
        target_names=tuple(f"cluster_{s}" for s in range(len(SMILEY_SUBSPACES))),
        sample_names=tuple(frame.index),
        extras={name: draws[name] for name in ("omega", "prototype", "pi", "z", "phi")},
    )


def load_usps_bcm(per_digit: int = 70, *, n_bins: int = 7, split: str = "train", seed: int = 0, data_home=None) -> Dataset:
    """USPS as in BCM sec. 4.1: ``per_digit`` (10 to 70 in the paper) random observations of each digit,
    grey levels cut into ``n_bins`` (7) equal bins, X int codes (10 * per_digit, 256), y the digits.

    Example:
        >>> usps = iz.datasets.load_usps_bcm(per_digit=10)
        >>> usps.X.shape, int(usps.X.min()), int(usps.X.max()), usps.y.tolist().count(3)
        ((100, 256), 0, 6, 10)
        >>> usps.sample_names[:2]  # rows of the USPS training split
        ('usps_train_116', 'usps_train_288')
    """
    if isinstance(per_digit, bool) or not isinstance(per_digit, numbers.Integral) or per_digit < 1:
        raise ValueError(f"per_digit: expected a positive integer, got {per_digit!r}")
    usps = load_usps(split, data_home)
    rng = np.random.default_rng(seed)
    chosen = []
    for digit in range(10):
        members = np.flatnonzero(usps.y == digit)
        if per_digit > len(members):
            raise ValueError(f"per_digit: digit {digit} has only {len(members)} observations, asked for {per_digit}")
        chosen.append(np.sort(rng.choice(members, per_digit, replace=False)))
    chosen = np.concatenate(chosen)
    return Dataset(
        name=f"usps_bcm_{per_digit}_per_digit",
        X=bin_levels(usps.X[chosen], n_bins),
        y=usps.y[chosen],
        feature_names=usps.feature_names,
        target_names=usps.target_names,
        sample_names=tuple(f"usps_{split}_{i}" for i in chosen),
    )
