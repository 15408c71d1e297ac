"""Synthetic rule-list data: random binary features, a rule list and labels drawn from BRL's model."""

from __future__ import annotations

import itertools

import numpy as np

from interpretable_zoo.models import brl

from .base import Dataset, one_draw


def planted_rule_lists(
    n_samples: int = 500,
    n_features: int = 6,
    *,
    priors: brl.Priors | None = None,
    max_cardinality: int = 2,
    max_length: int = 5,
    feature_probability: float = 0.5,
    n_classes: int = 2,
    seed: int = 0,
) -> Dataset:
    """X: (n_samples, n_features) uint8 with independent Bernoulli(``feature_probability``) entries;
    the antecedents are all conjunctions of 1..``max_cardinality`` features; a list, its theta and y
    are one draw of :func:`~interpretable_zoo.models.brl.model` (lists of at most ``max_length`` rules).

    ``extras``: ``antecedents`` (tuples of column indices), ``rules`` (the planted list as antecedent
    indices), ``theta`` ((len(rules) + 1, L) label probabilities, default rule last).

    Example:
        >>> data = iz.datasets.planted_rule_lists(n_samples=100, n_features=4)
        >>> data.X.shape, data.feature_names, data.target_names
        ((100, 4), ('x0', 'x1', 'x2', 'x3'), ('0', '1'))
        >>> data.extras["antecedents"][:6]  # 4 single features, then the 6 pairs
        [(0,), (1,), (2,), (3,), (0, 1), (0, 2)]
        >>> data.extras["theta"].shape == (len(data.extras["rules"]) + 1, 2)  # a row per rule and the default
        True
    """
    priors = brl.Priors() if priors is None else priors
    for name, value in (("n_samples", n_samples), ("n_features", n_features), ("max_cardinality", max_cardinality)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not 0 < feature_probability < 1:
        raise ValueError(f"feature_probability must lie in (0, 1), got {feature_probability!r}")
    rng = np.random.default_rng(seed)
    X = (rng.random((n_samples, n_features)) < feature_probability).astype(np.uint8)
    antecedents = [c for k in range(1, max_cardinality + 1) for c in itertools.combinations(range(n_features), k)]
    table = np.stack([X[:, list(a)].all(axis=1) for a in antecedents], axis=1)
    cardinalities = np.array([len(a) for a in antecedents])
    capacity = brl.list_capacity(len(antecedents), max_length)
    draw = one_draw(brl.model, seed, table, cardinalities, n_classes, priors=priors, max_length=capacity)
    length = int(draw["length"])
    rules = tuple(int(draw[f"antecedent_{j}"]) for j in range(length))
    theta = draw["theta"]
    return Dataset(
        name="planted_rule_list",
        X=X,
        y=draw["y"].astype(np.int64),
        feature_names=tuple(f"x{j}" for j in range(n_features)),
        target_names=tuple(str(label) for label in range(n_classes)),
        sample_names=None,
        extras={"antecedents": antecedents, "rules": rules, "theta": np.vstack([theta[:length], theta[-1:]])},
    )
