"""Antecedents for rule lists: binary items from tables, and frequent itemsets mined per class.

Letham et al. (2015) pre-mine the antecedent set A with FP-growth: every itemset (a conjunction of
items) whose support within some class reaches ``min_support`` and whose cardinality is at most
``max_cardinality``. Items are one-hot values of categorical columns, their negations, and quantile
thresholds of numeric columns. The miner here is level-wise and exact: the supports of all one-item
extensions of the frequent k-itemsets come from one boolean matrix product per class and level. Items
from the same source column are never combined (such conjunctions are empty, redundant or one item).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from interpretable_zoo.inference.names import resolve_names
from interpretable_zoo.inference.validation import check_binary_matrix


@dataclass(frozen=True)
class ItemEncoder:
    """How a table becomes binary items; fitted by :func:`fit_item_encoder`, applied by :meth:`transform`.

    ``columns[k]`` is a source column label with either ``values`` (categorical: items ``col=v``, plus
    ``col!=v`` when the column has more than two values and ``negations``) or ``thresholds`` (numeric:
    items ``col<=t`` and ``col>t``).
    """

    columns: tuple
    values: tuple  # per column: tuple of category values, or None for numeric columns
    thresholds: tuple  # per column: tuple of cut points, or None for categorical columns
    item_names: tuple[str, ...]
    item_columns: np.ndarray  # source column position of each item
    negations: bool = True

    def transform(self, frame) -> np.ndarray:
        """The (n, n_items) uint8 item matrix of a table with the fitted columns."""
        frame = _as_frame(frame, "X")
        missing = [column for column in self.columns if column not in frame.columns]
        if missing:
            raise ValueError(f"X lacks the columns {missing} seen in fit")
        blocks = []
        for column, values, thresholds in zip(self.columns, self.values, self.thresholds):
            series = frame[column]
            if series.isna().any():
                raise ValueError(f"X has missing values (NaN) in column {column!r}")
            if values is not None:
                unseen = sorted({str(value) for value in series[~series.isin(values)]})
                if unseen:
                    warnings.warn(
                        f"X: column {column!r} has values not seen in fit ({', '.join(unseen[:5])}); their rows "
                        f"satisfy no {column}=value item",
                        stacklevel=2,
                    )
                equal = np.stack([(series == value).to_numpy() for value in values], axis=1)
                blocks += [equal, ~equal] if len(values) > 2 and self.negations else [equal]
            else:
                numbers_ = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
                if np.isnan(numbers_).any():
                    raise ValueError(f"X has non-numeric values in the numeric column {column!r}")
                _check_finite(numbers_, column)
                below = numbers_[:, None] <= np.asarray(thresholds)[None, :]
                blocks += [below, ~below]
        return np.concatenate(blocks, axis=1).astype(np.uint8)


def _as_frame(X, name: str) -> pd.DataFrame:
    if isinstance(X, pd.DataFrame):
        return X
    array = np.asarray(X)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a DataFrame or a 2-D array, got shape {array.shape}")
    return pd.DataFrame(array, columns=[f"x{j}" for j in range(array.shape[1])])


def _check_finite(values: np.ndarray, column) -> None:
    if np.isinf(values).any():
        raise ValueError(f"X: column {column!r} has infinite values; replace them or drop their rows")


def _format_number(value: float) -> str:
    return f"{value:.4g}"


def fit_item_encoder(X, *, n_bins: int = 4, negations: bool = True) -> ItemEncoder:
    """Items of a DataFrame (or array) with mixed columns.

    Categorical, object, boolean and two-valued numeric columns give one item per value (``sex=male``)
    and, for more than two values and ``negations``, its negation (``c1!=x``); other numeric columns
    give ``n_bins - 1`` quantile thresholds, each as ``age<=30`` and ``age>30``.
    """
    if not isinstance(negations, (bool, np.bool_)):
        raise ValueError(f"negations must be True or False, got {negations!r}")
    if isinstance(n_bins, bool) or not isinstance(n_bins, numbers.Integral) or n_bins < 2:
        raise ValueError(f"n_bins must be an integer of at least 2, got {n_bins!r}")
    frame = _as_frame(X, "X")
    if frame.shape[1] == 0 or frame.shape[0] == 0:
        raise ValueError(f"X must have at least one row and one column, got shape {frame.shape}")
    columns, values_per_column, thresholds_per_column, names, item_columns = [], [], [], [], []
    for position, column in enumerate(frame.columns):
        series = frame[column]
        if series.isna().any():
            raise ValueError(f"X has missing values (NaN) in column {column!r}")
        numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        if numeric:
            _check_finite(series.to_numpy(dtype=float), column)
        distinct = series.astype("category").cat.categories if not numeric else np.unique(series.to_numpy())
        if numeric and len(distinct) > 2:
            cuts = np.unique(np.quantile(series.to_numpy(dtype=float), np.arange(1, n_bins) / n_bins))
            cuts = cuts[cuts < series.max()]
            if cuts.size == 0:
                continue
            values, thresholds = None, tuple(float(c) for c in cuts)
            column_names = [f"{column}<={_format_number(c)}" for c in cuts] + [f"{column}>{_format_number(c)}" for c in cuts]
        else:
            values, thresholds = tuple(distinct), None
            negated = [f"{column}!={v}" for v in values] if len(values) > 2 and negations else []
            column_names = [f"{column}={v}" for v in values] + negated
        columns.append(column)
        values_per_column.append(values)
        thresholds_per_column.append(thresholds)
        names += column_names
        item_columns += [position] * len(column_names)
    if not names:
        raise ValueError("X has no column with two or more distinct values")
    return ItemEncoder(
        tuple(columns), tuple(values_per_column), tuple(thresholds_per_column), tuple(names), np.array(item_columns), bool(negations)
    )


def binary_items(X, feature_names=None) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """Items of a binary matrix: each column and its negation ("name", "not name").

    Returns (items (n, 2p) uint8, item names, source column of each item).
    """
    X = check_binary_matrix(X, dtype=np.uint8)
    names = resolve_names(feature_names, X.shape[1], argument="feature_names")
    columns = np.arange(X.shape[1])
    return np.hstack([X, 1 - X]), names + tuple(f"not {name}" for name in names), np.concatenate([columns, columns])


def mine_antecedents(
    items,
    y,
    *,
    min_support: float = 0.1,
    max_cardinality: int = 2,
    item_columns=None,
) -> list[tuple[int, ...]]:
    """Itemsets with support >= ``min_support`` within at least one class, of 1..``max_cardinality`` items.

    Support is the fraction of a class's samples that hold every item of the set (Letham et al.; per
    class as in Yang et al.). Items with the same ``item_columns`` entry are not combined. Returns
    sorted tuples of item indices, by cardinality then lexicographically. ValueError when none qualifies.
    """
    items = check_binary_matrix(items, "items", dtype=bool)
    y = np.asarray(y)
    if y.shape != (items.shape[0],):
        raise ValueError(f"y must have one label per row of items ({items.shape[0]}), got shape {y.shape}")
    if isinstance(min_support, bool) or not isinstance(min_support, numbers.Real) or not 0 < min_support <= 1:
        raise ValueError(f"min_support must be a fraction in (0, 1], got {min_support!r}")
    if isinstance(max_cardinality, bool) or not isinstance(max_cardinality, numbers.Integral) or max_cardinality < 1:
        raise ValueError(f"max_cardinality must be a positive integer, got {max_cardinality!r}")
    n_items = items.shape[1]
    item_columns = np.arange(n_items) if item_columns is None else np.asarray(item_columns)
    if item_columns.shape != (n_items,):
        raise ValueError(f"item_columns must give one source column per item ({n_items}), got shape {item_columns.shape}")

    found: set[tuple[int, ...]] = set()
    for label in np.unique(y):
        rows = items[y == label]
        needed = min_support * rows.shape[0]
        matrix = rows.astype(np.float32)
        frequent = [(int(i),) for i in np.flatnonzero(matrix.sum(axis=0) >= needed - 1e-9)]
        level = 1
        while frequent:
            found.update(frequent)
            if level == max_cardinality:
                break
            covers = np.stack([rows[:, list(itemset)].all(axis=1) for itemset in frequent]).astype(np.float32)
            supports = covers @ matrix  # (itemsets, items): support of each one-item extension
            extensions = set()
            for row, itemset in enumerate(frequent):
                used_columns = item_columns[list(itemset)]
                candidates = np.flatnonzero(supports[row] >= needed - 1e-9)
                for item in candidates[candidates > itemset[-1]]:
                    if item_columns[item] not in used_columns:
                        extensions.add(itemset + (int(item),))
            frequent = sorted(extensions)
            level += 1
    if not found:
        raise ValueError(f"no antecedent reaches min_support={min_support} in any class; lower min_support")
    return sorted(found, key=lambda itemset: (len(itemset), itemset))


def _holes(antecedents) -> tuple[list[list[tuple]], dict[tuple, list[int]]]:
    """(each antecedent's holes, its items less one of them, for each item; hole -> the antecedents with it)."""
    ordered = [tuple(sorted(items)) for items in antecedents]
    holes = [[items[:k] + items[k + 1 :] for k in range(len(items))] for items in ordered]
    by_hole: dict[tuple, list[int]] = {}
    for a, own in enumerate(holes):
        for hole in own:
            by_hole.setdefault(hole, []).append(a)
    return holes, by_hole


def antecedent_neighbours(antecedents) -> list[list[int]]:
    """For each antecedent (a tuple of item indices) the indices of its neighbours: the antecedents of as
    many items that share all but one of its items (a symmetric relation, for BRL's neighbour move)."""
    holes, by_hole = _holes(antecedents)
    return [sorted({b for hole in own for b in by_hole[hole]} - {a}) for a, own in enumerate(holes)]


def neighbour_counts(antecedents) -> np.ndarray:
    """The number of each antecedent's neighbours (:func:`antecedent_neighbours`) without listing them: a
    neighbour shares exactly one hole with it, so each hole adds the other antecedents that have it."""
    holes, by_hole = _holes(antecedents)
    return np.array([sum(len(by_hole[hole]) - 1 for hole in own) for own in holes], dtype=np.int64)


TRUTH_TABLE_GATHER_BYTES = 2**26
"""Bytes of item rows that :func:`truth_table` gathers at once (antecedents of one size, in chunks)."""


def truth_table(items, antecedents) -> np.ndarray:
    """(n, ``|A|``) bool: whether each sample holds every item of each antecedent, stored antecedent by
    antecedent (the transpose of a C-ordered (``|A|``, n) array): BRL packs and gathers each antecedent's
    samples, and a sample-major table would be transposed first (benchmarks/RESULTS.md, brl_setup)."""
    items_by_row = np.ascontiguousarray(np.asarray(items).astype(bool).T)  # (items, n)
    by_antecedent = np.empty((len(antecedents), items_by_row.shape[1]), dtype=bool)
    by_size: dict[int, list[int]] = {}
    for k, antecedent in enumerate(antecedents):
        by_size.setdefault(len(antecedent), []).append(k)
    for size, indices in by_size.items():
        indices = np.asarray(indices)
        members = np.asarray([list(antecedents[k]) for k in indices], dtype=np.intp).reshape(len(indices), size)
        chunk = max(1, TRUTH_TABLE_GATHER_BYTES // max(1, size * items_by_row.shape[1]))
        for start in range(0, len(indices), chunk):
            by_antecedent[indices[start:start + chunk]] = items_by_row[members[start:start + chunk]].all(axis=1)
    return by_antecedent.T
