"""Turning raw features into the discrete and binary ones the models need, and categorical tables into
the integer codes BCM samples over.

Numeric columns of mixed tables are left to callers: quantile binning belongs to the rule miner.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import pandas as pd


def _numeric_matrix(X) -> np.ndarray:
    """``X`` as a 2-D float array; ValueError when it is not 2-D, not numeric or holds NaN."""
    array = np.asarray(X)
    if array.ndim != 2:
        raise ValueError(f"X must be 2-D (samples x features), got {array.ndim}-D with shape {array.shape}")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise ValueError(f"X must be numeric, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if np.isnan(array).any():
        raise ValueError("X contains NaN")
    return array


def _finite_number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def bin_levels(X, n_bins: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Grey levels in [low, high] cut into ``n_bins`` equal-width bins, as integer codes 0..n_bins-1.

    Each bin is closed on the left; ``high`` itself falls in the last bin. BCM uses 7 bins on USPS.

    Example:
        >>> iz.datasets.bin_levels([[0.0, 0.2, 0.5, 1.0]], n_bins=4).tolist()
        [[0, 0, 2, 3]]
        >>> iz.datasets.bin_levels([[0, 8, 16]], n_bins=2, high=16).tolist()  # digits' grey levels 0-16
        [[0, 1, 1]]
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, Integral) or n_bins < 2:
        raise ValueError(f"n_bins must be an integer of at least 2, got {n_bins!r}")
    low, high = _finite_number(low, "low"), _finite_number(high, "high")
    if low >= high:
        raise ValueError(f"low must be below high, got low={low} and high={high}")
    levels = _numeric_matrix(X)
    if levels.min(initial=low) < low or levels.max(initial=high) > high:
        raise ValueError(f"X has values outside [low, high] = [{low}, {high}]")
    bins = np.floor((levels - low) / (high - low) * n_bins).astype(np.int64)
    return np.minimum(bins, n_bins - 1)


def binarize(X, threshold: float) -> np.ndarray:
    """A uint8 0/1 array: 1 where ``X`` is strictly greater than ``threshold``. MGM uses 0.5 on USPS.

    Example:
        >>> iz.datasets.binarize([[0.2, 0.5, 0.9]], threshold=0.5)
        array([[0, 0, 1]], dtype=uint8)
        >>> iz.datasets.binarize([[0, 3], [2, 0]], threshold=0).tolist()  # counts to "any"
        [[0, 1], [1, 0]]
    """
    threshold = _finite_number(threshold, "threshold")
    return (_numeric_matrix(X) > threshold).astype(np.uint8)


def one_hot(
    frame_or_array: pd.DataFrame | np.ndarray,
    columns: Iterable[Hashable] | None = None,
    *,
    negations: bool = False,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Binary items, one per value of each categorical column: (uint8 array (n, n_items), item names).

    Item names read ``column=value``; array columns are named ``x0``, ``x1``, ... by position.
    ``columns`` picks the columns to encode (labels of a DataFrame, positions in an array; default all).
    Values come in category order for categorical columns (unused categories included, so splits of one
    table get the same items) and in sorted order otherwise. With ``negations=True`` each column's
    value items are followed by one ``column!=value`` item per value (BRL mines both kinds).

    Example:
        >>> items, names = iz.datasets.one_hot(iz.datasets.load_titanic_table().X)
        >>> items.shape, names[:5]
        ((2201, 8), ('class=1st', 'class=2nd', 'class=3rd', 'class=crew', 'age=adult'))
        >>> iz.datasets.one_hot([[0, 2], [1, 2]], columns=[1], negations=True)
        (array([[1, 0], [1, 0]], dtype=uint8), ('x1=2', 'x1!=2'))
    """
    if isinstance(frame_or_array, pd.DataFrame):
        frame, prefix = frame_or_array, ""
    else:
        array = np.asarray(frame_or_array)
        if array.ndim != 2:
            raise ValueError(f"frame_or_array must be a DataFrame or a 2-D array, got {array.ndim}-D")
        frame, prefix = pd.DataFrame(array), "x"
    if columns is None:
        columns = list(frame.columns)
    elif isinstance(columns, str):
        raise ValueError(f"columns must be a list of column labels, got the string {columns!r}")
    else:
        columns = list(columns)
    unknown = [column for column in columns if column not in frame.columns]
    if unknown:
        raise ValueError(f"columns {unknown} are not in frame_or_array")
    if len(set(columns)) != len(columns):
        raise ValueError(f"columns repeats a column: {columns}")
    if not columns:
        raise ValueError("no columns to encode: columns is empty or frame_or_array has none")

    blocks, names = [], []
    for column in columns:
        values = frame[column].astype("category")
        codes = values.cat.codes.to_numpy()
        if (codes < 0).any():
            raise ValueError(f"frame_or_array has missing values (NaN/None) in column {column!r}")
        categories = values.cat.categories
        indicators = (codes[:, None] == np.arange(len(categories))).astype(np.uint8)
        blocks.append(indicators)
        names += [f"{prefix}{column}={value}" for value in categories]
        if negations:
            blocks.append(1 - indicators)
            names += [f"{prefix}{column}!={value}" for value in categories]
    return np.hstack(blocks), tuple(names)


@dataclass(frozen=True)
class CategoricalData:
    """A categorical matrix as integer codes, with the names that explain them.

    Example:
        >>> import pandas as pd
        >>> table = pd.DataFrame({"colour": ["red", "blue", "red"], "size": ["S", "L", "L"]})
        >>> data = iz.datasets.encode_categorical(table)
        >>> data.codes.tolist(), data.n_values.tolist()
        ([[1, 1], [0, 0], [1, 0]], [2, 2])
        >>> data.feature_names, data.value_names, data.sample_names
        (('colour', 'size'), (('blue', 'red'), ('L', 'S')), ('0', '1', '2'))
    """

    codes: np.ndarray  # (N, P) int32
    n_values: np.ndarray  # (P,)
    feature_names: tuple[str, ...]
    value_names: tuple[tuple[str, ...], ...]  # value_names[j][v] names code v of feature j
    sample_names: tuple[str, ...]


def encode_categorical(X, name: str = "X") -> CategoricalData:
    """Integer codes of a DataFrame (each column's values, in category or sorted order) or of an array of
    non-negative integer codes; ValueError naming ``name`` on empty, NaN, negative or non-integer input.

    Example:
        >>> import pandas as pd
        >>> smileys = pd.DataFrame({"mouth": ["smile", "frown", "smile"], "eyes": ["round", "round", "star"]})
        >>> iz.datasets.encode_categorical(smileys).codes.tolist()
        [[1, 0], [0, 0], [1, 1]]
        >>> data = iz.datasets.encode_categorical([[0, 2], [1, 0]])  # integer codes: values 0..max (at least 2)
        >>> data.n_values.tolist(), data.feature_names, data.value_names[1]
        ([2, 3], ('x0', 'x1'), ('0', '1', '2'))
    """
    if isinstance(X, pd.DataFrame):
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"{name}: empty, shape {X.shape}")
        if X.isna().any().any():
            raise ValueError(f"{name}: contains missing values (NaN) in columns {list(X.columns[X.isna().any()])}")
        codes, value_names = [], []
        for column in X.columns:
            categorical = X[column] if isinstance(X[column].dtype, pd.CategoricalDtype) else X[column].astype("category")
            codes.append(categorical.cat.codes.to_numpy())
            value_names.append(tuple(str(level) for level in categorical.cat.categories))
        codes = np.column_stack(codes).astype(np.int32)
        n_values = np.array([len(levels) for levels in value_names])
        return CategoricalData(codes, n_values, tuple(map(str, X.columns)), tuple(value_names), tuple(map(str, X.index)))
    array = np.asarray(X)
    if array.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D matrix (observations x features), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name}: empty, shape {array.shape}")
    if array.dtype == bool:
        array = array.astype(np.int32)
    if not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{name}: expected integer codes or a DataFrame, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating):
        if np.isnan(array).any():
            raise ValueError(f"{name}: contains NaN")
        if np.isinf(array).any():
            raise ValueError(f"{name}: contains infinity; expected integer category codes")
        if np.any(array != np.round(array)):
            raise ValueError(f"{name}: expected integer category codes, found non-integer values")
    if array.min() < 0:
        raise ValueError(f"{name}: category codes must be non-negative (Negative values in data), found {array.min()}")
    codes = array.astype(np.int32)
    n_values = np.maximum(codes.max(0) + 1, 2)
    value_names = tuple(tuple(str(v) for v in range(n)) for n in n_values)
    return CategoricalData(
        codes, n_values, tuple(f"x{j}" for j in range(codes.shape[1])), value_names, tuple(str(i) for i in range(len(codes)))
    )


def encode_like(X, data: CategoricalData) -> np.ndarray:
    """Codes (M, P) of new observations in the coding of the fitted ``data``: a DataFrame's values are
    looked up among the fitted value names of its columns, an array's codes must lie in the fitted ranges.
    ValueError naming ``X`` on a wrong number of features, unknown values or codes out of range.

    Example:
        >>> import pandas as pd
        >>> fitted = iz.datasets.encode_categorical(pd.DataFrame({"colour": ["red", "blue"], "size": ["S", "L"]}))
        >>> iz.datasets.encode_like(pd.DataFrame({"colour": ["blue", "red"], "size": ["S", "S"]}), fitted).tolist()
        [[0, 1], [1, 1]]
        >>> iz.datasets.encode_like(pd.DataFrame({"colour": ["green"], "size": ["S"]}), fitted)
        Traceback (most recent call last):
        ValueError: X: column 'colour' has values not seen when fitting: ['green']
    """
    n_features = len(data.feature_names)
    if isinstance(X, pd.DataFrame):
        if list(map(str, X.columns)) != list(data.feature_names):
            raise ValueError(f"X: expected the fitted columns {list(data.feature_names)[:5]}..., got {list(X.columns)[:5]}")
        if X.shape[0] == 0 or X.isna().any().any():
            raise ValueError("X: empty or contains missing values")
        codes = np.empty(X.shape, np.int32)
        for j, column in enumerate(X.columns):
            lookup = {name: code for code, name in enumerate(data.value_names[j])}
            values = X[column].astype(str)
            unknown = sorted(set(values) - lookup.keys())
            if unknown:
                raise ValueError(f"X: column {column!r} has values not seen when fitting: {unknown[:5]}")
            codes[:, j] = values.map(lookup).to_numpy()
        return codes
    codes = encode_categorical(X, "X").codes
    if codes.shape[1] != n_features:
        raise ValueError(f"X: expected {n_features} features as when fitting, got {codes.shape[1]}")
    out_of_range = np.flatnonzero((codes >= data.n_values).any(0))
    if out_of_range.size:
        raise ValueError(f"X: codes beyond the fitted ranges in features {out_of_range[:5].tolist()}")
    return codes
