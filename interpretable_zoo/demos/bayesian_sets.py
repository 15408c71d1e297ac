"""Bayesian Sets on scikit-learn's bundled digits."""

from __future__ import annotations


def cli_demo() -> str:
    """Bayesian Sets on scikit-learn's bundled digits, binarised at half the grey range: complete three zeros."""
    import numpy as np

    from interpretable_zoo.datasets import binarize, load_digits
    from interpretable_zoo.inference.bayesian_sets import BayesianSets

    digits = load_digits()
    X = binarize(digits.X, 8.0)
    names = [f"image {i} (digit {label})" for i, label in enumerate(digits.y)]
    model = BayesianSets(X, item_names=names, feature_names=digits.feature_names)
    query = np.flatnonzero(digits.y == 0)[:3]
    result = model.query(query, top_k=10, n_reasons=3)
    labels = digits.y[result.items]
    completed = model.query(query, top_k=None)
    completed_labels = digits.y[completed.items]
    return "\n".join(
        [
            result.explain(),
            f"Precision at 10 (digit 0): {np.mean(labels == 0):.2f}",
            f"Completed set: {completed.set_size} images, {np.mean(completed_labels == 0):.2f} of them zeros "
            f"({np.count_nonzero(completed_labels == 0)} of the {np.count_nonzero(digits.y == 0) - 3} other zeros)",
        ]
    )
