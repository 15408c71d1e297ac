"""Argument checks shared by every public entry point: each returns the checked value (or nothing, when
it only checks), or raises a ValueError whose message starts with the argument's name."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
import scipy.sparse
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import validate_data

from interpretable_zoo.inference import memory

NUMERIC_COLUMN_LEVELS = 32
"""A DataFrame column of integers with more distinct values than this is a numeric feature, not categories."""


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """``value`` as an int, or a ValueError naming ``name`` when it is not an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name}: must be at least {minimum}, got {value}")
    return value


SEED_LIMIT = 2**32
"""Seeds are integers below this. A JAX key made from a larger one keeps only its low 32 bits (2**32 would
give seed 0's draws) or overflows."""


def check_seed(seed) -> int:
    """``seed`` as an int, or a ValueError naming it unless it is an integer in [0, :data:`SEED_LIMIT`)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"seed: must be an integer in [0, 2**32), got {seed!r}")
    return int(seed)


FLOAT32_POSITIVE = (float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max))
"""The positive normal range of float32, in which the samplers compute their prior tables."""


def check_float32_positive(value: float, name: str) -> None:
    """A ValueError naming ``name`` unless the positive ``value`` lies in :data:`FLOAT32_POSITIVE`: in
    float32 a larger value overflows to inf and a smaller one to 0, and the tables built from it are NaN."""
    low, high = FLOAT32_POSITIVE
    if not low <= value <= high:
        raise ValueError(f"{name}: {value!r} lies outside [{low:.3g}, {high:.3g}], the positive range of float32 "
                         "in which the samplers compute")


def check_flag(value, name: str) -> bool:
    """``value`` as a bool, or a ValueError naming ``name`` unless it is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def check_number(value, name: str) -> float:
    """``value`` as a float, or a ValueError naming ``name`` unless it is a finite real number (not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)


def check_sampling_options(num_samples, num_warmup, num_chains, seed) -> None:
    """ValueError naming the argument, before anything compiles, unless ``num_samples`` is None or at least
    1, ``num_warmup`` None or at least 0, ``num_chains`` at least 1 (integers) and ``seed`` a seed
    (:func:`check_seed`)."""
    if num_samples is not None:
        check_positive_int(num_samples, "num_samples")
    if num_warmup is not None:
        check_positive_int(num_warmup, "num_warmup", minimum=0)
    check_positive_int(num_chains, "num_chains")
    check_seed(seed)


def check_n_clusters(n_clusters, n_obs: int, name: str = "n_clusters") -> int:
    """A number of clusters between 1 and the number of observations ``n_obs``."""
    n_clusters = check_positive_int(n_clusters, name)
    if n_clusters > n_obs:
        raise ValueError(f"{name}: {n_clusters} clusters for only {n_obs} observations")
    return n_clusters


def check_binary_matrix(
    X,
    name: str = "X",
    *,
    dtype=np.float64,
    sparse: bool = False,
    min_rows: int = 1,
    dims: tuple[str, str] = ("observation", "feature"),
):
    """``X`` (array, DataFrame, or with ``sparse`` a scipy sparse matrix, kept as CSR without explicit
    zeros) as a 0/1 matrix of ``dtype`` with at least ``min_rows`` rows and one column. ``dims`` names
    a row and a column in the messages."""
    rows, columns = dims
    matrix = _as_matrix(X, name, sparse=sparse, dims=(f"{rows}s", f"{columns}s"))
    if scipy.sparse.issparse(matrix):
        matrix = scipy.sparse.csr_matrix(matrix, dtype=np.float64, copy=True)
        matrix.sum_duplicates()
        values = matrix.data
    else:
        matrix = values = np.ascontiguousarray(matrix, dtype=np.float64)
    if np.isnan(values).any():
        raise ValueError(f"{name}: contains NaN")
    if not np.isin(values, (0, 1)).all():
        found = np.unique(values[~np.isin(values, (0, 1))])[:5]
        raise ValueError(
            f"{name}: must be binary (0/1), found values {found}; binarise it first, e.g. datasets.binarize"
        )
    _check_size(matrix.shape, name, f"{min_rows} {rows}{'s' if min_rows > 1 else ''} and 1 {columns}",
                min_rows=min_rows, dims=dims)
    if scipy.sparse.issparse(matrix):
        matrix.eliminate_zeros()
    return matrix.astype(dtype, copy=False)


def check_real_matrix(value, name: str, *, nonnegative: bool = False) -> np.ndarray:
    """``value`` as a finite float64 matrix with at least one row and one column (and no negative entry when
    ``nonnegative``, as a dissimilarity)."""
    array = numeric_matrix(value, name).astype(np.float64, copy=False)
    low, high = array.min(), array.max()  # reductions: no temporary as large as the matrix
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    if nonnegative and low < 0:
        raise ValueError(f"{name}: a dissimilarity is never negative, got values down to {low:.6g}")
    return array


def numeric_matrix(value, name: str) -> np.ndarray:
    """``value`` as a numeric matrix with at least one row and one column, its values not yet read (an
    array is not copied): for a check that reads a sample of a large matrix before
    :func:`check_real_matrix` reads all of it."""
    array = _as_matrix(value, name)
    _check_size(array.shape, name, "one row and one column")
    return array


def _check_size(shape, name: str, needed: str, *, min_rows: int = 1, dims: tuple[str, str] = ("row", "column")):
    """ValueError unless a matrix of ``shape`` has ``min_rows`` rows and a column; the message says what is
    ``needed`` and, when an axis is empty, how many rows or columns were found (in scikit-learn's words)."""
    if shape[0] >= min_rows and shape[1] >= 1:
        return
    if 0 in shape:
        axis = dims[1] if shape[1] == 0 else dims[0]
        minimum = 1 if shape[1] == 0 else min_rows
        raise ValueError(f"{name}: needs at least {needed}; found 0 {axis}(s) (shape={shape}) while a minimum of "
                         f"{minimum} is required (an empty matrix)")  # fmt: skip
    raise ValueError(f"{name}: needs at least {needed}, got shape {shape}")


def refuse_masked(value, name: str = "X"):
    """``value``, or the data of a NumPy masked array without masked cells; a masked cell would otherwise be
    read as data (np.asarray drops the mask), so an array with any is refused naming ``name``."""
    if not isinstance(value, np.ma.MaskedArray):
        return value
    if np.ma.is_masked(value):
        raise ValueError(f"{name}: a masked array (numpy.ma) with {int(np.ma.count_masked(value))} masked cells, whose "
                         f"values would be read as data; fill them ({name}.filled(value)) or drop their rows first")
    return np.ma.getdata(value)


def _as_matrix(value, name: str, *, sparse: bool = False, dims: tuple[str, str] = ("rows", "columns")):
    """``value`` as a 2-D array of numbers or booleans (a scipy sparse matrix kept as it is when ``sparse``);
    an object array is read as numbers (TypeError when a cell is neither a string nor a number); a masked
    array only without masked cells (:func:`refuse_masked`)."""
    value = refuse_masked(value, name)
    if scipy.sparse.issparse(value):
        if not sparse:
            raise ValueError(f"{name}: sparse matrices are not supported; pass a dense array ({name}.toarray())")
        matrix = value
    else:
        try:
            matrix = np.asarray(value)
        except ValueError as error:  # ragged nested sequences
            raise ValueError(f"{name}: cannot be read as a 2-D array ({error})") from None
    if matrix.ndim != 2:
        reshape = f"; Reshape your data: {name}.reshape(1, -1) for one sample, {name}.reshape(-1, 1) for one feature"
        raise ValueError(f"{name}: expected a 2-D matrix ({dims[0]} x {dims[1]}), got shape {matrix.shape}"
                         f"{reshape if matrix.ndim == 1 else ''}")  # fmt: skip
    if matrix.dtype == object:
        _check_cells(matrix, name)
        try:
            matrix = matrix.astype(np.float64)
        except ValueError as error:  # strings that are not numbers
            raise ValueError(f"{name}: expected numbers (a numeric or boolean matrix), got {error}") from None
    if np.iscomplexobj(matrix):
        raise ValueError(f"{name}: expected numbers (a numeric or boolean matrix); Complex data not supported, got "
                         f"dtype {matrix.dtype}")  # fmt: skip
    if not (np.issubdtype(matrix.dtype, np.number) or matrix.dtype == bool):
        raise ValueError(f"{name}: expected numbers (a numeric or boolean matrix), got dtype {matrix.dtype}")
    return matrix


def _check_cells(matrix: np.ndarray, name: str) -> None:
    """TypeError naming ``name`` when a cell of an object array is neither a string nor a number (ValueError
    when it is None, a missing value)."""
    for cell in matrix.flat:
        if cell is None:
            raise ValueError(f"{name}: contains missing values (None)")
        if not isinstance(cell, (str, numbers.Number, np.bool_)):
            raise TypeError(f"{name}: every cell's argument must be a string or a number, got a {type(cell).__name__}")


def check_estimator_input(estimator, X, *, reset: bool, tables: bool = False):
    """``X`` as a scikit-learn estimator's ``fit`` (``reset``) or ``predict`` / ``transform`` receives it, checked
    before the estimator's own checks. Arrays are read by ``_as_matrix`` (sparse, complex and 1-D input
    refused, object arrays of numbers read as numbers); with ``tables`` (estimators of categorical or mixed
    columns) a DataFrame is kept as it is and an array of strings too. Then, as scikit-learn's
    ``validate_data``: at least one row and one column, and the number of features and column names
    recorded in fit (``n_features_in_``, ``feature_names_in_``) or compared with the fitted ones
    ("X has 6 features, but ... is expecting 4")."""
    X = refuse_masked(X)
    frame = X if isinstance(X, pd.DataFrame) else None
    if not (tables and frame is not None):
        try:
            X = _as_matrix(X, "X")
        except ValueError:
            if not tables or not _is_string_table(X):
                raise
            X = np.asarray(X)
    _check_size(X.shape, "X", "one row and one column", dims=("sample", "feature"))
    validate_data(estimator, X if frame is None else frame, skip_check_array=True, reset=reset)  # column names
    return X


def _is_string_table(X) -> bool:
    """Whether ``X`` is a 2-D array of strings (and numbers), read as categories."""
    array = np.asarray(X) if not scipy.sparse.issparse(X) else None
    if array is None or array.ndim != 2:
        return False
    if array.dtype == object:
        _check_cells(array, "X")
        return True
    return array.dtype.kind == "U"


def encode_labels(y, n_rows: int, method: str) -> tuple[np.ndarray, np.ndarray]:
    """(classes, codes) of the class labels ``y``, classes in sorted order; ValueError unless ``y`` is
    1-D, one label per training point (``n_rows``), of one orderable type, without missing labels, with at
    least two classes (``method`` names what needs them in that message)."""
    if y is None:
        raise ValueError(f"y: the class labels are required; {method} requires y to be passed, but the target y is None")
    try:
        y = np.asarray(y)
    except ValueError as error:  # ragged nested sequences
        raise ValueError(f"y: cannot be read as a 1-D array of labels ({error})") from None
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(DataConversionWarning("A column-vector y was passed when a 1d array was expected; y is "
                                            "read as y.ravel()"), stacklevel=3)  # fmt: skip
        y = y.ravel()
    if y.ndim != 1 or len(y) != n_rows:
        raise ValueError(f"y: must be 1-D with one label per training point ({n_rows}), got shape {y.shape}")
    if y.dtype.kind == "f" and np.isnan(y).any():
        raise ValueError("y: contains NaN")
    if y.dtype.kind == "c":
        raise ValueError(f"y: labels must be integers, strings or other orderable values, got dtype {y.dtype}")
    if y.dtype.kind in "biuf" and type_of_target(y) == "continuous":
        fractional = y[y != np.round(y)][:3]
        raise ValueError(
            f"y: continuous values such as {', '.join(f'{v:.6g}' for v in fractional)}: {method} needs discrete class "
            "labels (Unknown label type: continuous); for a numeric outcome, bin it into classes first"
        )
    if y.dtype == object and any(
        label is None or (isinstance(label, float) and np.isnan(label)) for label in y.tolist()
    ):
        raise ValueError("y: contains missing labels (None or NaN)")
    try:
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError:
        kinds = sorted({type(label).__name__ for label in y.tolist()})
        raise ValueError(
            f"y: labels of different types ({', '.join(kinds)}) cannot be ordered; give labels of one type"
        ) from None
    if len(classes) < 2:
        found = f"a single class ({classes[0]!r})" if len(classes) else "no labels"
        raise ValueError(f"y: has {found}; {method} needs at least two classes, got {len(classes)} class"
                         f"{'' if len(classes) == 1 else 'es'}")  # fmt: skip
    return classes, codes.reshape(-1)


def check_categorical_table(X, name: str = "X", *, counts_from_codes: bool = True) -> None:
    """Refuse a categorical table that would be misread as categories: complex numbers, a ragged array, a
    DataFrame column of numbers (floating point but for whole numbers, or numbers with more than
    :data:`NUMERIC_COLUMN_LEVELS` distinct values: bin them first) and, when the number of categories of a feature is 1 + its largest code
    (``counts_from_codes``), an array whose largest code in some column reaches the number of rows (more
    categories than observations: codes that are not 0..k-1, such as identifiers or raw measurements), and a
    masked array with masked cells (:func:`refuse_masked`)."""
    refuse_masked(X, name)
    if isinstance(X, pd.DataFrame):
        for column in X.columns:
            series = X[column]
            if isinstance(series.dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(series):
                continue
            kind = pd.api.types.infer_dtype(series, skipna=True)
            levels = series.nunique()
            fractional = kind in ("floating", "mixed-integer-float", "decimal", "complex")
            if fractional and kind != "complex" and levels <= NUMERIC_COLUMN_LEVELS and _integral(series):
                continue  # ordinal codes held as floats, as KBinsDiscretizer(encode="ordinal") writes them
            if fractional or (kind == "integer" and levels > NUMERIC_COLUMN_LEVELS):
                raise ValueError(
                    f"{name}: column {column!r} holds numbers ({series.dtype}, {levels} distinct values), not "
                    f"categories; bin it first (e.g. pd.cut({name}[{column!r}], 5) or datasets.bin_levels), or, if "
                    f"its values are category labels, pass {name}[{column!r}].astype('category')"
                )
        return
    try:
        array = np.asarray(X)
    except ValueError as error:  # ragged nested sequences
        raise ValueError(f"{name}: cannot be read as a 2-D array ({error})") from None
    if np.iscomplexobj(array):
        raise ValueError(f"{name}: expected integer category codes or a DataFrame, got complex numbers ({array.dtype})")
    if not counts_from_codes or array.ndim != 2 or array.size == 0 or not np.issubdtype(array.dtype, np.number):
        return
    largest = array.max(axis=0)
    if not np.all(np.isfinite(largest)):
        return  # NaN or infinite codes: the encoder says so
    j = int(np.argmax(largest))
    n_obs = array.shape[0]
    if largest[j] >= max(n_obs, 2):
        raise ValueError(
            f"{name}: column {j} has codes up to {largest[j]:.0f}, so {largest[j] + 1:.0f} categories, more than the "
            f"{n_obs} observations ({np.unique(array[:, j]).size} distinct codes occur); the tables of a categorical "
            "model grow with the square of the largest number of categories. Re-encode the column as codes "
            f"0..k-1 of the values that occur (np.unique({name}[:, {j}], return_inverse=True)[1]), bin it if it "
            "is a measurement, or give n_values to keep every category"
        )


def _integral(series: pd.Series) -> bool:
    """Whether every non-missing value of a numeric column is a whole number."""
    values = pd.to_numeric(series.dropna(), errors="coerce").to_numpy(dtype=float)
    return bool(np.all(np.isfinite(values) & (values == np.round(values))))


def check_category_memory(n_values, feature_names, needed_bytes: float, name: str = "X") -> None:
    """ValueError naming the feature with the most categories when ``needed_bytes`` (an estimate of the
    memory of tables padded to that number of categories) exceeds the available memory (or ``memory_limit``)."""
    available = memory.allowed_bytes()
    if available is None or needed_bytes <= available:
        return
    j = int(np.argmax(n_values))
    raise ValueError(
        f"{name}: feature {feature_names[j]!r} has {int(n_values[j])} categories, the most of any feature; the "
        f"tables are padded to that number and grow with its square, needing at least "
        f"{memory.format_bytes(needed_bytes)}, more than {memory.bound_text(available)}; merge or bin its "
        "categories, or leave the feature out"
    )
