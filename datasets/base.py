"""The `Dataset` container every loader returns, and where the real data files are found."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse

DATA_HOME_ENV = "INTERPRETABLE_ZOO_DATA"


def one_draw(model, seed: int, *args, **kwargs) -> dict[str, np.ndarray]:
    """Every site of one draw of the NumPyro ``model(*args, **kwargs)`` (``Predictive``, one sample, from
    ``PRNGKey(seed)``) as host arrays, computed as one compiled program (run op by op, every operation would
    compile a program of its own)."""
    import jax
    from numpyro.infer import Predictive

    predictive = Predictive(model, num_samples=1)
    draws = jax.jit(lambda key: predictive(key, *args, **kwargs))(jax.random.PRNGKey(seed))
    return {name: np.asarray(value)[0] for name, value in draws.items()}


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A data set: a sample-by-feature matrix, optional labels and the names that explain them.

    ``X`` is a DataFrame for categorical or mixed tables, a uint8 ndarray for binary matrices, a
    float ndarray for numeric ones and a float64 CSR matrix (values 1.0) for large sparse binary ones.
    ``y`` holds integer label codes, or a 2-D 0/1 array with one column per label for multi-label data;
    ``target_names[k]`` names code ``k`` (or column ``k``). Lengths are checked on construction.

    Example:
        >>> wine = iz.datasets.load_wine()
        >>> wine
        Dataset('wine', X ndarray (178, 13), y (178,))
        >>> wine.feature_names[:3], wine.target_names, wine.sample_names
        (('alcohol', 'malic_acid', 'ash'), ('class_0', 'class_1', 'class_2'), None)
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


class DataFileError(ValueError):
    """A data file exists but does not hold what its loader expects: corrupt, truncated, or another file.

    The message names the data set and the file.

    Example:
        >>> from pathlib import Path
        >>> Path("data/zoo").mkdir(parents=True)
        >>> _ = Path("data/zoo/zoo.data").write_text("aardvark,1,0")  # a truncated copy
        >>> try:
        ...     iz.datasets.load_zoo(data_home="data")
        ... except iz.datasets.DataFileError as error:
        ...     print(error)
        zoo: data/zoo/zoo.data has 3 columns, expected 18; the file is corrupt, truncated or not the
        expected one
    """


_PARSER_ERRORS = (
    ValueError,
    OSError,
    EOFError,
    KeyError,
    IndexError,
    TypeError,
    zlib.error,
    scipy.io.matlab.MatReadError,
)
"""What h5py, scipy.io, NumPy, pandas and gzip raise on a corrupt, truncated or foreign file."""


@dataclass(frozen=True)
class DataFile:
    """One file of a named data set, whose checks raise a :class:`DataFileError` naming both."""

    dataset: str
    path: Path

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Errors of the parser reading this file become a :class:`DataFileError`."""
        try:
            yield
        except DataFileError:
            raise
        except _PARSER_ERRORS as error:
            message = " ".join(str(error).split())
            raise DataFileError(
                f"{self.dataset}: cannot read {self.path} ({type(error).__name__}: {message})"
            ) from error

    def require(self, condition, problem: str) -> None:
        """:class:`DataFileError` "{dataset}: {path} {problem}; ..." unless ``condition`` holds."""
        if not condition:
            raise DataFileError(
                f"{self.dataset}: {self.path} {problem}; the file is corrupt, truncated or not the expected one"
            )


class DataHomeMissing(ValueError):
    """Neither ``data_home`` nor the ``INTERPRETABLE_ZOO_DATA`` environment variable names a data folder.

    Example:
        >>> import os, unittest.mock
        >>> with unittest.mock.patch.dict(os.environ, {"INTERPRETABLE_ZOO_DATA": ""}):  # unset for this block
        ...     try:
        ...         iz.datasets.load_zoo()
        ...     except iz.datasets.DataHomeMissing as error:
        ...         print(error)
        no data folder: pass data_home= or set the INTERPRETABLE_ZOO_DATA environment variable
        to the folder of real datasets
    """


def resolve_data_home(data_home: str | os.PathLike | None = None) -> Path:
    """The real-data folder: ``data_home`` if given, else the ``INTERPRETABLE_ZOO_DATA`` environment
    variable; :class:`~interpretable_zoo.datasets.base.DataHomeMissing` (a ValueError) naming both when neither is set.

    Example:
        >>> import os, unittest.mock
        >>> str(iz.datasets.resolve_data_home("my_data"))
        'my_data'
        >>> with unittest.mock.patch.dict(os.environ, {"INTERPRETABLE_ZOO_DATA": "/srv/datasets"}):
        ...     print(iz.datasets.resolve_data_home())
        /srv/datasets
    """
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
