"""The `Dataset` container every loader returns, and where the real data files are found."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse

DATA_HOME_ENV = "INTERPRETABLE_ZOO_DATA"


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A data set: a sample-by-feature matrix, optional labels and the names that explain them.

    ``X`` is a DataFrame for categorical or mixed tables, a uint8 ndarray for binary matrices, a
    float ndarray for numeric ones and a float64 CSR matrix (values 1.0) for large sparse binary ones.
    ``y`` holds integer label codes, or a 2-D 0/1 array with one column per label for multi-label data;
    ``target_names[k]`` names code ``k`` (or column ``k``). Lengths are checked on construction.
    """

    name: str
    X: np.ndarray | scipy.sparse.csr_matrix | pd.DataFrame
    y: np.ndarray | None
    feature_names: tuple[str, ...]
    target_names: tuple[str, ...] | None
    sample_names: tuple[str, ...] | None
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n_samples, n_features = self.X.shape
        if len(self.feature_names) != n_features:
            raise ValueError(f"feature_names has {len(self.feature_names)} names for {n_features} columns of X")
        if self.y is not None and len(self.y) != n_samples:
            raise ValueError(f"y has {len(self.y)} entries for {n_samples} rows of X")
        if self.sample_names is not None and len(self.sample_names) != n_samples:
            raise ValueError(f"sample_names has {len(self.sample_names)} names for {n_samples} rows of X")

    def __repr__(self) -> str:
        labels = "no labels" if self.y is None else f"y {self.y.shape}"
        return f"Dataset({self.name!r}, X {type(self.X).__name__} {self.X.shape}, {labels})"


class DataHomeMissing(ValueError):
    """Neither ``data_home`` nor the ``INTERPRETABLE_ZOO_DATA`` environment variable names a data folder."""


def resolve_data_home(data_home: str | os.PathLike | None = None) -> Path:
    """The real-data folder: ``data_home`` if given, else the ``INTERPRETABLE_ZOO_DATA`` environment
    variable; :class:`DataHomeMissing` (a ValueError) naming both when neither is set."""
    if data_home is None:
        data_home = os.environ.get(DATA_HOME_ENV) or None
    if data_home is None:
        raise DataHomeMissing(
            f"no data folder: pass data_home= or set the {DATA_HOME_ENV} environment variable "
            "to the folder of real datasets"
        )
    return Path(data_home)


def data_file(relative_path: str, data_home: str | os.PathLike | None = None) -> Path:
    """The path of one data file under the data folder; FileNotFoundError naming both when it is absent."""
    home = resolve_data_home(data_home)
    path = home / relative_path
    if not path.is_file():
        raise FileNotFoundError(f"data file {relative_path} not found in data home {home}")
    return path
