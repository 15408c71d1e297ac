"""The three-class mixture of Gaussians of Bien & Tibshirani (2011), sec. 6.1.

Each class is a mixture of 10 Gaussians in the plane, in the manner of Hastie, Tibshirani and Friedman's
(2009, sec. 2.3.3) two-class simulation: the component means of class l are drawn from N(c_l, I) around
a class centre c_l (here the corners of an equilateral triangle of circumradius ``separation``), and
each point picks a component of its class uniformly and is drawn from N(mean, I / 5).
"""

from __future__ import annotations

import numpy as np

from .base import Dataset

N_CLASSES = 3


def class_centres(separation: float = 1.5) -> np.ndarray:
    """(3, 2) class centres c_l: the corners of an equilateral triangle centred at the origin."""
    angles = np.pi / 2 + 2 * np.pi * np.arange(N_CLASSES) / N_CLASSES
    return separation * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def make_gaussian_mixture(
    n_per_class: int = 100,
    *,
    n_components: int = 10,
    separation: float = 1.5,
    component_variance: float = 0.2,
    seed: int = 0,
    component_means: np.ndarray | None = None,
) -> Dataset:
    """Draw ``n_per_class`` points of each of three classes, each class a mixture of ``n_components`` Gaussians.

    Pass the ``component_means`` of an earlier draw (``extras["component_means"]``, shape (3, n_components, 2))
    to draw a test set from the same mixture. X is float64 (3 n_per_class, 2), y the class codes 0, 1, 2.

    Example:
        >>> train = iz.datasets.make_gaussian_mixture(n_per_class=50)
        >>> train.X.shape, train.target_names, train.extras["component_means"].shape
        ((150, 2), ('class 0', 'class 1', 'class 2'), (3, 10, 2))
        >>> test = iz.datasets.make_gaussian_mixture(20, seed=1, component_means=train.extras["component_means"])
        >>> test.X.shape, test.y[::20].tolist()
        ((60, 2), [0, 1, 2])
    """
    if n_per_class < 1:
        raise ValueError(f"n_per_class: must be at least 1, got {n_per_class}")
    if n_components < 1:
        raise ValueError(f"n_components: must be at least 1, got {n_components}")
    if component_variance <= 0:
        raise ValueError(f"component_variance: must be positive, got {component_variance}")
    rng = np.random.default_rng(seed)
    if component_means is None:
        centres = class_centres(separation)
        component_means = centres[:, None, :] + rng.standard_normal((N_CLASSES, n_components, 2))
    else:
        component_means = np.asarray(component_means, dtype=np.float64)
        if component_means.ndim != 3 or component_means.shape[0] != N_CLASSES or component_means.shape[2] != 2:
            raise ValueError(f"component_means: must have shape (3, n_components, 2), got {component_means.shape}")
    y = np.repeat(np.arange(N_CLASSES), n_per_class)
    components = rng.integers(component_means.shape[1], size=len(y))
    X = component_means[y, components] + np.sqrt(component_variance) * rng.standard_normal((len(y), 2))
    return Dataset(
        name="gaussian_mixture",
        X=X,
        y=y,
        feature_names=("x1", "x2"),
        target_names=tuple(f"class {label}" for label in range(N_CLASSES)),
        sample_names=None,
        extras={"component_means": component_means, "component_variance": component_variance},
    )
