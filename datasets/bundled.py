"""Real data that needs no files: scikit-learn's bundled copies and the 2201-passenger Titanic table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import sklearn.datasets
from sklearn.utils import Bunch

from .base import Dataset

TITANIC_LEVELS = {
    "class": ("1st", "2nd", "3rd", "crew"),
    "age": ("adult", "child"),
    "sex": ("male", "female"),
}
"""The category levels of the Titanic columns, shared by `load_titanic_table` and `load_titanic`."""

TITANIC_SURVIVAL = ("no", "yes")

# Dawson (1995), "The 'unusual episode' data revisited": everyone aboard the Titanic,
# (class, age, sex): (died, survived); the 32 cells sum to 2201, of whom 711 survived.
_TITANIC_COUNTS = {
    ("1st", "adult", "male"): (118, 57),
    ("1st", "adult", "female"): (4, 140),
    ("1st", "child", "male"): (0, 5),
    ("1st", "child", "female"): (0, 1),
    ("2nd", "adult", "male"): (154, 14),
    ("2nd", "adult", "female"): (13, 80),
    ("2nd", "child", "male"): (0, 11),
    ("2nd", "child", "female"): (0, 13),
    ("3rd", "adult", "male"): (387, 75),
    ("3rd", "adult", "female"): (89, 76),
    ("3rd", "child", "male"): (35, 13),
    ("3rd", "child", "female"): (17, 14),
    ("crew", "adult", "male"): (670, 192),
    ("crew", "adult", "female"): (3, 20),
    ("crew", "child", "male"): (0, 0),
    ("crew", "child", "female"): (0, 0),
}


def titanic_frame(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """A DataFrame of (class, age, sex) rows with the Titanic category levels."""
    frame = pd.DataFrame(rows, columns=list(TITANIC_LEVELS))
    return frame.astype({column: pd.CategoricalDtype(levels) for column, levels in TITANIC_LEVELS.items()})


def load_titanic_table() -> Dataset:
    """All 2201 people aboard the Titanic, one row each: X columns class, age, sex; y survived (1) or not (0).

    Example:
        >>> titanic = iz.datasets.load_titanic_table()
        >>> titanic.X.shape, titanic.feature_names, titanic.target_names
        ((2201, 3), ('class', 'age', 'sex'), ('no', 'yes'))
        >>> titanic.X["class"].cat.categories.tolist(), int(titanic.y.sum())  # the levels; 711 survived
        (['1st', '2nd', '3rd', 'crew'], 711)
    """
    rows, survived = [], []
    for passenger, counts in _TITANIC_COUNTS.items():
        for code, count in enumerate(counts):
            rows += [passenger] * count
            survived += [code] * count
    return Dataset(
        name="titanic_table",
        X=titanic_frame(rows),
        y=np.array(survived, dtype=np.int64),
        feature_names=tuple(TITANIC_LEVELS),
        target_names=TITANIC_SURVIVAL,
        sample_names=None,
    )


def _from_sklearn(name: str, bunch: Bunch) -> Dataset:
    return Dataset(
        name=name,
        X=bunch.data,
        y=bunch.target.astype(np.int64),
        feature_names=tuple(str(feature) for feature in bunch.feature_names),
        target_names=tuple(str(target) for target in bunch.target_names),
        sample_names=None,
    )


def load_digits() -> Dataset:
    """scikit-learn's 1797 8x8 handwritten digits: X float (1797, 64) grey levels 0-16, y digits 0-9.

    Example:
        >>> digits = iz.datasets.load_digits()
        >>> digits.X.shape, digits.feature_names[:2], digits.target_names[:3]
        ((1797, 64), ('pixel_0_0', 'pixel_0_1'), ('0', '1', '2'))
        >>> float(digits.X.max())
        16.0
    """
    return _from_sklearn("digits", sklearn.datasets.load_digits())


def load_wine() -> Dataset:
    """scikit-learn's UCI wine: X float (178, 13) chemical measurements, y cultivar 0-2.

    Example:
        >>> wine = iz.datasets.load_wine()
        >>> wine.X.shape, wine.feature_names[:3], wine.target_names
        ((178, 13), ('alcohol', 'malic_acid', 'ash'), ('class_0', 'class_1', 'class_2'))
    """
    return _from_sklearn("wine", sklearn.datasets.load_wine())


def load_breast_cancer() -> Dataset:
    """scikit-learn's Wisconsin diagnostic breast cancer: X float (569, 30), y 0 malignant / 1 benign.

    Example:
        >>> cancer = iz.datasets.load_breast_cancer()
        >>> cancer.X.shape, cancer.feature_names[:2], cancer.target_names
        ((569, 30), ('mean radius', 'mean texture'), ('malignant', 'benign'))
    """
    return _from_sklearn("breast_cancer", sklearn.datasets.load_breast_cancer())
