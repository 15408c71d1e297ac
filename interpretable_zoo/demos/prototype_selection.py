"""Prototype selection on the bundled wine data, and ``izoo fit prototype_selection``."""

from __future__ import annotations


def cli_demo() -> str:
    """Wine (bundled): standardised features, eps by 10-fold CV with the one-standard-error rule, test error vs 1-NN."""
    import numpy as np
    from sklearn.model_selection import train_test_split
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.preprocessing import StandardScaler

    from interpretable_zoo.datasets import load_wine
    from interpretable_zoo.inference.prototype_selection import PrototypeClassifier

    wine = load_wine()
    X_train, X_test, y_train, y_test = train_test_split(
        wine.X, wine.y, train_size=2 / 3, stratify=wine.y, random_state=0
    )
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    classifier = PrototypeClassifier(metric="l2").fit(X_train, y_train)
    error = np.mean(classifier.predict(X_test) != y_test)
    nn_error = np.mean(KNeighborsClassifier(1).fit(X_train, y_train).predict(X_test) != y_test)
    return (
        classifier.explain(max_prototypes=10)
        + f"\nWine, l2 on standardised features: test error {error:.1%} with {len(classifier.selection_.prototypes)} "
        f"prototypes (eps = {classifier.eps_:.3g} by 10-fold CV, one-SE rule); 1-NN on all {len(X_train)} "
        f"training points: {nn_error:.1%}"
    )


def cli_fit(X, y, *, seed: int, progress=None, **options):
    """``izoo fit prototype_selection``: the :class:`PrototypeClassifier` (eps by cross-validation unless
    given, its folds counted by a bar when ``progress``, None: outside CI) fitted to a numeric table and its
    labels; returns its :class:`PrototypeSelection`."""
    from interpretable_zoo.inference.prototype_selection import PrototypeClassifier

    if y is None:
        raise ValueError("y: prototype selection needs labels (--target)")
    return PrototypeClassifier(seed=seed, progress_bar=progress, **options).fit(X, y).selection_
