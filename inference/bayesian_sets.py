"""Bayesian Sets queries: score every item by one sparse product, rank, explain, choose the set size.

``BayesianSets(X)`` keeps the binary item-by-feature matrix X sparse (scipy CSR, float64) or dense, and
reads the prior and every score formula from :mod:`interpretable_zoo.models.bayesian_sets`:

- ``log_scores(query)`` returns log p(x | D_c) - log p(x) for every item: c + X q for one query (eq. 15),
  and for a list of queries one sparse x dense product X [q_1 ... q_B];
- ``query(query, top_k)`` ranks the candidates and explains each returned item by the weights q_j of the
  features it has (its log score is c plus their sum), and gives each item its posterior probability of
  belonging to the query's cluster, from which the size of the completed set follows (the items with
  probability at least 1/2; the prior membership rate rho is estimated by maximum marginal likelihood
  unless ``Priors.membership_rate`` fixes it);
- ``query(queries, top_k)`` on a batch returns each query's top k with scores and reasons
  (:class:`BayesianSetsBatch`) by a pruned walk over the items that share a feature with the query
  (``inference.bayesian_sets_top_k``), within BATCH_BYTES of working memory, never holding the
  batch x items score matrix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import pandas as pd
import scipy.optimize
import scipy.sparse
from scipy.special import expit

from interpretable_zoo.inference import memory
from interpretable_zoo.inference.explanation import ExplainedResultMixin, plain, records
from interpretable_zoo.inference.names import resolve_names
from interpretable_zoo.inference.validation import check_binary_matrix, check_positive_int
from interpretable_zoo.machine import usable_cores
from interpretable_zoo.models import bayesian_sets as bs_model

MEMBERSHIP_THRESHOLD = 0.5
"""An item joins the completed set when its posterior probability of membership is at least this."""

BATCH_BYTES = 1 << 26
"""Working memory of one chunk of a batched top-k query: the queries' weights and the base scores of their
sizes (a chunk holds at least one query)."""


def _is_single_query(query) -> bool:
    """A single query is a flat sequence of item indices or names; a batch is a sequence of those."""
    if isinstance(query, np.ndarray):
        return query.ndim == 1
    if isinstance(query, (str, bytes)) or not isinstance(query, Sequence):
        raise ValueError(f"query: expected a sequence of item indices or names, got {type(query).__name__}")
    return not any(isinstance(item, (Sequence, np.ndarray)) and not isinstance(item, str) for item in query)


def estimate_membership_rate(log_scores) -> float:
    """The membership rate rho maximising the marginal likelihood sum_i log(rho score_i + 1 - rho) of the candidates.

    Each candidate is a member of the query's cluster with probability rho, else drawn from the background
    model; the log likelihood is concave in rho and its stationary point is the fixed point
    rho = mean_i P(member | x_i) (the EM update). rho = 0 when the mean score is at most 1 (the candidates
    look no more like the query than background items do) and rho = 1 when the mean inverse score is at most 1.
    """
    log_scores = np.asarray(log_scores, dtype=np.float64)
    if log_scores.size == 0:
        raise ValueError("log_scores: no candidates to estimate the membership rate from")
    if not np.all(np.isfinite(log_scores)):
        raise ValueError("log_scores: must be finite")
    values, counts = np.unique(log_scores, return_counts=True)  # items often share a score
    weights = counts / log_scores.size

    def log_mean_exp(log_values: np.ndarray) -> float:
        top = log_values.max()
        return float(top + np.log(np.sum(weights * np.exp(log_values - top))))

    if log_mean_exp(values) <= 0:
        return 0.0
    if log_mean_exp(-values) <= 0:
        return 1.0

    def excess_membership(log_odds: float) -> float:  # decreasing in log_odds, zero at the optimum
        return float(np.sum(weights * expit(values + log_odds)) - expit(log_odds))

    low, high = -1.0, 1.0
    while excess_membership(low) <= 0 and low > -700:
        low *= 2
    while excess_membership(high) >= 0 and high < 700:
        high *= 2
    if excess_membership(low) <= 0:
        return float(expit(low))
    if excess_membership(high) >= 0:
        return float(expit(high))
    return float(expit(scipy.optimize.brentq(excess_membership, low, high, xtol=1e-12)))


@dataclass(frozen=True, eq=False, repr=False)
class BayesianSetsResult(ExplainedResultMixin):
    """The answer to one query: the ranked items with their scores, membership and reasons.

    Attributes:
        items: indices of the returned items, best first.
        names: their names.
        log_scores: log score(x) of each.
        membership: posterior probability that each item belongs to the query's cluster (1 for query items).
        in_query: whether each returned item is one of the query's items (only when they are included).
        reasons: per returned item, its features with the largest weights q_j, as (feature name, q_j)
            pairs; the item's log score is c plus the sum of q_j over all its features.
        query: the query's item indices.
        query_names: their names.
        constant: c.
        defining_features: the features with the largest q_j overall, as (name, q_j) pairs (what the
            query's items share).
        membership_rate: the prior rate rho used.
        set_size: the number of candidates (query items excluded) whose membership probability is at
            least 1/2, the size of the completed set.
    """

    items: np.ndarray
    names: tuple[str, ...]
    log_scores: np.ndarray
    membership: np.ndarray
    in_query: np.ndarray
    reasons: tuple[tuple[tuple[str, float], ...], ...]
    query: np.ndarray
    query_names: tuple[str, ...]
    constant: float
    defining_features: tuple[tuple[str, float], ...]
    membership_rate: float
    set_size: int

    def explain_frame(self) -> pd.DataFrame:
        """The returned items, best first (index ``rank`` from 1): ``item`` (row of X), ``name``, ``in_query``,
        ``log_score``, ``membership`` (P(member)), and as lists ``top_features`` and ``top_weights``: the
        features of the item with the largest weights q_j (its reasons)."""
        return pd.DataFrame(
            {
                "item": self.items,
                "name": list(self.names),
                "in_query": self.in_query,
                "log_score": self.log_scores,
                "membership": self.membership,
                "top_features": [[feature for feature, _ in reasons] for reasons in self.reasons],
                "top_weights": [[weight for _, weight in reasons] for reasons in self.reasons],
            },
            index=pd.RangeIndex(1, len(self.items) + 1, name="rank"),
        )

    def explain(self) -> str:
        """The completed set as text: the query, what defines it, and each returned item with its reasons
        (the rows of :meth:`explain_frame`)."""
        lines = [
            f"Query ({len(self.query)} items): " + ", ".join(self.query_names),
            "Defining features (largest q_j): "
            + ", ".join(f"{name} ({weight:+.2f})" for name, weight in self.defining_features),
            f"Completed set: {self.set_size} further items with P(member) >= {MEMBERSHIP_THRESHOLD} "
            f"(membership rate {self.membership_rate:.3g}); log score = c + sum of q_j over an item's features, "
            f"c = {self.constant:.2f}",
        ]
        for rank, row in self.explain_frame().iterrows():
            mark = " [query]" if row["in_query"] else ""
            because = ", ".join(f"{f} ({w:+.2f})" for f, w in zip(row["top_features"], row["top_weights"]))
            lines.append(
                f"{rank:>3}. {row['name']}{mark}: log score {row['log_score']:.2f}, P(member) {row['membership']:.3f}; "
                f"because of {because or 'no features'}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """:meth:`explain_frame`'s items (``items``) with the query and what defines it, JSON-ready."""
        return {
            "model": "Bayesian Sets",
            "query": plain(self.query),
            "query_names": list(self.query_names),
            "defining_features": [{"feature": f, "weight": w} for f, w in self.defining_features],
            "constant": self.constant,
            "membership_rate": self.membership_rate,
            "set_size": self.set_size,
            "items": records(self.explain_frame()),
        }

    def _card(self):
        facts = {"query": ", ".join(self.query_names), "completed set size": self.set_size,
                 "defining features": ", ".join(f for f, _ in self.defining_features)}
        return "Bayesian Sets", facts, self.explain_frame(), None


@dataclass(frozen=True, eq=False)
class BayesianSetsBatch:
    """The top-k answers to a batch of B queries, each ranked as :meth:`~interpretable_zoo.inference.bayesian_sets.BayesianSets.query` ranks one.

    Membership probabilities and the completed set's size need every score of a query (the membership
    rate is estimated from them); :meth:`~interpretable_zoo.inference.bayesian_sets.BayesianSets.query`
    on one query gives them.

    Attributes:
        items: (B, k) indices of each query's best items, best first (ties to the lower index), -1 past
            the last candidate.
        log_scores: (B, k) their log scores (-inf padding).
        constants: (B,) each query's c.
        reason_features: (B, k, n_reasons) per returned item its features with the largest weights q_j
            (-1 padding); an item's log score is c plus the sum of q_j over all its features.
        reason_weights: (B, k, n_reasons) those weights (nan padding).
        queries: the queries' item indices.
        item_names: the names of every item (the rows of X).
    """

    items: np.ndarray
    log_scores: np.ndarray
    constants: np.ndarray
    reason_features: np.ndarray
    reason_weights: np.ndarray
    queries: tuple[np.ndarray, ...]
    item_names: tuple[str, ...]
    feature_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.queries)

    def names(self, query: int) -> tuple[str, ...]:
        """The names of query ``query``'s returned items, best first."""
        return tuple(self.item_names[i] for i in self.items[query] if i >= 0)

    def reasons(self, query: int) -> tuple[tuple[tuple[str, float], ...], ...]:
        """Per returned item of query ``query``: its (feature name, q_j) pairs, largest weight first."""
        return tuple(
            tuple((self.feature_names[j], float(w)) for j, w in zip(features, weights) if j >= 0)
            for item, features, weights in zip(self.items[query], self.reason_features[query], self.reason_weights[query])
            if item >= 0
        )

    def explain(self, query: int) -> str:
        """Query ``query`` and its returned items with their log scores and reasons, as text."""
        lines = [
            f"Query {query} ({len(self.queries[query])} items): " + ", ".join(self.item_names[i] for i in self.queries[query]),
            f"log score = c + sum of q_j over an item's features, c = {self.constants[query]:.2f}",
        ]
        for rank, (name, score, reasons) in enumerate(
            zip(self.names(query), self.log_scores[query], self.reasons(query)), start=1
        ):
            because = ", ".join(f"{feature} ({weight:+.2f})" for feature, weight in reasons) or "no features"
            lines.append(f"{rank:>3}. {name}: log score {score:.2f}; because of {because}")
        return "\n".join(lines)


class BayesianSets:
    """Bayesian Sets over a binary item-by-feature matrix X (rows are items), sparse or dense.

    Sparse input (any scipy format) is stored as float64 CSR; dense input as a float64 array. The prior
    (``models.bayesian_sets.Priors``, kappa = 2 by default) is set from the feature means of X;
    ``kappa=`` is a shorthand for ``priors=Priors(kappa=kappa)``.

    Example:
        >>> import numpy as np
        >>> data = iz.datasets.load_digits()  # 1797 images of 8 x 8 pixels
        >>> sets = iz.BayesianSets(data.X > 8, feature_names=data.feature_names)  # items: images; features: dark pixels
        >>> result = sets.query(np.flatnonzero(data.y == 0)[:3], top_k=10)  # three images of a zero
        >>> data.y[result.items]  # the ten best-scoring other images are zeros too
        array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        >>> result.set_size, round(result.membership_rate, 2)  # the completed set: items with P(member) >= 1/2
        (164, 0.1)
    """

    def __init__(
        self,
        X,
        *,
        priors: bs_model.Priors | None = None,
        kappa: float | None = None,
        item_names=None,
        feature_names=None,
    ):
        if kappa is not None:
            if priors is not None:
                raise ValueError("kappa: give either priors or kappa, not both")
            priors = bs_model.Priors(kappa=kappa)
        if priors is None:
            priors = bs_model.Priors()
        if not isinstance(priors, bs_model.Priors):
            raise ValueError(f"priors: expected models.bayesian_sets.Priors, got {type(priors).__name__}")
        if feature_names is None and hasattr(X, "columns"):
            feature_names = list(X.columns)
        if item_names is None and hasattr(X, "index") and hasattr(X, "columns"):
            item_names = list(X.index)
        self.X = check_binary_matrix(X, sparse=True, min_rows=2, dims=("item", "feature"))
        from interpretable_zoo.inference import target_check  # JAX and NumPyro only when a model is built

        target_check.check_bayesian_sets()  # the model file's program is the one the closed form integrates
        self.priors = priors
        self.n_items, self.n_features = self.X.shape
        for argument, names in (("item_names", item_names), ("feature_names", feature_names)):
            if names is not None and (isinstance(names, (str, bytes)) or not isinstance(names, Iterable)):
                raise ValueError(f"{argument}: expected a sequence of names, got {type(names).__name__}")
        self.item_names = resolve_names(
            item_names, self.n_items, argument="item_names", default_prefix="item_", counted="items", distinct=False
        )
        self.feature_names = resolve_names(
            feature_names, self.n_features, argument="feature_names", default_prefix="feature_", counted="features"
        )
        feature_means = np.asarray(self.X.sum(axis=0)).ravel() / self.n_items
        hyperparameters = bs_model.beta_hyperparameters(priors, feature_means)
        if not isinstance(hyperparameters, tuple) or len(hyperparameters) != 2:
            raise ValueError("beta_hyperparameters: must return the pair (alpha, beta) of per-feature arrays")
        self.alpha, self.beta = (np.asarray(value, dtype=np.float64) for value in hyperparameters)
        self.informative = bs_model.informative_features(self.alpha, self.beta, feature_means)
        self._index_of_name: dict[str, int | None] | None = None
        self._terms_by_size: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._csr: scipy.sparse.csr_matrix | None = None
        self._csc: scipy.sparse.csc_matrix | None = None

    # -- queries -------------------------------------------------------------------------------------
    def _index_of_names(self) -> dict[str, int | None]:
        """Item name -> its index, or None for a name that several items share."""
        if self._index_of_name is None:
            index_of_name: dict[str, int | None] = {}
            for index, name in enumerate(self.item_names):
                index_of_name[name] = None if name in index_of_name else index
            self._index_of_name = index_of_name
        return self._index_of_name

    def _item_index(self, item) -> int:
        if isinstance(item, str):
            index = self._index_of_names()[item]
            if index is None:
                raise ValueError(f"query: several items are named {item!r}; give its index instead")
            return index
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, Integral):
            raise ValueError(f"query: items must be integer indices or item names, got {item!r}")
        if not 0 <= item < self.n_items:
            raise ValueError(f"query: item index {item} is out of range for {self.n_items} items")
        return int(item)

    def query_indices(self, query) -> np.ndarray:
        """One query (item indices or names) as a checked int64 array: non-empty, in range, no duplicates."""
        if not isinstance(query, np.ndarray) and (isinstance(query, (str, bytes)) or not isinstance(query, Sequence)):
            raise ValueError(f"query: expected a sequence of item indices or names, got {type(query).__name__}")
        if isinstance(query, np.ndarray) and query.ndim == 1 and query.dtype.kind in "iu" and query.size:
            outside = (query < 0) | (query >= self.n_items)
            if outside.any():
                raise ValueError(f"query: item index {query[outside][0]} is out of range for {self.n_items} items")
            indices = query.astype(np.int64)
        else:
            indices = self._indices_of_items(query.tolist() if isinstance(query, np.ndarray) else list(query))
        if np.unique(indices).size != indices.size:
            values, counts = np.unique(indices, return_counts=True)
            raise ValueError(f"query: duplicate items {values[counts > 1].tolist()}")
        return indices

    def _indices_of_items(self, items: list) -> np.ndarray:
        if not items:
            raise ValueError("query: is empty; give at least one item")
        unknown = [item for item in items if isinstance(item, str) and item not in self._index_of_names()]
        if unknown:
            plural = "s" if len(unknown) > 1 else ""
            raise ValueError(f"query: no item{plural} named {', '.join(map(repr, unknown))} ({len(items)} query items)")
        return np.array([self._item_index(item) for item in items], dtype=np.int64)

    def _batch(self, query) -> tuple[list[np.ndarray], bool]:
        if _is_single_query(query):
            return [self.query_indices(query)], True
        if len(query) == 0:
            raise ValueError("query: the batch of queries is empty")
        return [self.query_indices(single) for single in query], False

    def score_coefficients(self, query) -> tuple[np.ndarray, np.ndarray]:
        """(c, q) of log score(x) = c + q . x for one query (shapes () and (J,)) or a batch ((B,) and (B, J))."""
        queries, single = self._batch(query)
        c, q = self._coefficients(queries)
        return (c[0], q[0]) if single else (c, q)

    def _coefficients(self, queries: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(c, q) for a batch of checked queries; the counts s_j come from one sparse product S X."""
        return self._coefficients_from_counts(self._counts(queries), queries)

    def _counts(self, queries: list[np.ndarray]):
        """The queries' counts of ones s_j per feature: (B, J), sparse for a batch."""
        if len(queries) == 1 and scipy.sparse.issparse(self.X):
            starts, stops = self.X.indptr[queries[0]], self.X.indptr[queries[0] + 1]
            features = np.concatenate([self.X.indices[a:b] for a, b in zip(starts, stops)])
            return np.bincount(features, minlength=self.n_features)[None, :]
        sizes = np.array([indices.size for indices in queries])
        indicator = scipy.sparse.csr_matrix(
            (np.ones(sizes.sum()), np.concatenate(queries), np.concatenate([[0], np.cumsum(sizes)])),
            shape=(len(queries), self.n_items),
        )
        counts = scipy.sparse.csr_matrix(indicator @ self.X)
        counts.sort_indices()  # the product leaves them unsorted; sorted, c sums as a single query's does
        return counts

    def _coefficients_from_counts(self, n_ones, queries: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        sizes = np.array([indices.size for indices in queries])
        return bs_model.score_coefficients(
            n_ones, sizes, self.alpha, self.beta, self.informative, size_terms=self._size_terms(np.unique(sizes))
        )

    def _size_terms(self, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``models.bayesian_sets.query_size_terms`` for these query sizes, computed once per size and kept."""
        missing = [size for size in sizes.tolist() if size not in self._terms_by_size]
        if missing:
            constant_terms, weights = bs_model.query_size_terms(missing, self.alpha, self.beta, self.informative)
            self._terms_by_size.update(zip(missing, zip(constant_terms, weights)))
        constant_terms, weights = zip(*(self._terms_by_size[size] for size in sizes.tolist()))
        return np.stack(constant_terms), np.stack(weights)

    def log_scores(self, query) -> np.ndarray:
        """log p(x | D_c) - log p(x) of every item: shape (n_items,) for one query, (B, n_items) for B queries.

        A batch is scored by one product X Q^T with the queries' weights as the columns of Q (eq. 15).
        """
        queries, single = self._batch(query)
        if single:
            return self._score_one(queries[0])[2]
        per_query = 8 * (self.n_items + 3 * self.n_features)  # a column of scores; q, its transpose and counts
        memory.check_memory(
            per_query * len(queries),
            f"query: scoring a batch of {len(queries)} queries over {self.n_items} items",
            f"score fewer queries per call (each needs {memory.format_bytes(per_query)})",
        )
        c, q = self._coefficients(queries)
        scores = self.X @ np.ascontiguousarray(q.T)  # scipy's sparse x dense product wants C order
        scores += c
        return scores.T

    def _score_one(self, indices: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(c, q, log scores of every item) for one checked query: c + X q (eq. 15)."""
        c, q = self._coefficients([indices])
        scores = self.X @ q[0]
        scores += c[0]
        return float(c[0]), q[0], scores

    def cosine_similarities(self, query) -> np.ndarray:
        """The baseline Bayesian Sets is compared with: cosine similarity of every item to the query's mean vector.

        Items without any feature get 0. Returns shape (n_items,).
        """
        indices = self.query_indices(query)
        query_mean = np.asarray(self.X[indices].mean(axis=0)).ravel()
        item_norms = np.sqrt(np.asarray(self.X.sum(axis=1)).ravel())  # binary rows: |x|^2 = sum x
        query_norm = np.linalg.norm(query_mean)
        if query_norm == 0:
            return np.zeros(self.n_items)
        products = self.X @ query_mean
        return np.divide(products, item_norms * query_norm, out=np.zeros(self.n_items), where=item_norms > 0)

    # -- batched top-k -------------------------------------------------------------------------------
    def _rows(self) -> scipy.sparse.csr_matrix:
        """X as CSR (the stored matrix when sparse), kept."""
        if self._csr is None:
            self._csr = self.X if scipy.sparse.issparse(self.X) else scipy.sparse.csr_matrix(self.X)
        return self._csr

    def _columns(self) -> scipy.sparse.csc_matrix:
        """X's pattern by columns (each feature's items; CSC without the values, all 1), kept."""
        if self._csc is None:
            rows = self._rows()
            pattern = scipy.sparse.csr_matrix((np.ones(rows.nnz, dtype=np.int8), rows.indices, rows.indptr), rows.shape)
            self._csc = pattern.tocsc()
        return self._csc

    def _top_k_batch(self, queries: list[np.ndarray], top_k: int, include_query: bool, n_reasons: int) -> BayesianSetsBatch:
        """The top ``top_k`` items of every query by the pruned walk of ``inference.bayesian_sets_top_k``, in
        chunks of queries of neighbouring sizes whose weights q (8 J bytes a query) and base scores (8 n_items
        bytes a query size) fit in BATCH_BYTES (a chunk holds at least one query)."""
        rows = self._rows()
        per_query, per_size = 8 * self.n_features, 8 * self.n_items  # a query's q; a size's base scores
        index_bytes = rows.indices.itemsize + 1  # a row index and an int8 1 per one
        column_copy = 0 if self._csc is not None else index_bytes * rows.nnz + rows.indptr.itemsize * (self.n_features + 1)
        memory.check_memory(
            column_copy + per_query + per_size + 4 * self.n_items * usable_cores(),
            f"query: ranking a batch over {self.n_items} items (a copy of X by columns, kept; per query size a "
            "base score per item; per core a mark per item)",
            "answer the queries one at a time (one score per item each)",
        )
        sizes = np.array([indices.size for indices in queries])
        by_size = np.argsort(sizes, kind="stable")
        chunks, start, used = [], 0, 0
        for position, query in enumerate(by_size):
            new_size = position == start or sizes[query] != sizes[by_size[position - 1]]
            cost = per_query + (per_size if new_size else 0)
            if position > start and used + cost > BATCH_BYTES:
                chunks.append(by_size[start:position])
                start, used = position, per_query + per_size
            else:
                used += cost
        chunks.append(by_size[start:])
        answers = [self._top_k_chunk([queries[b] for b in chunk], top_k, include_query, n_reasons) for chunk in chunks]
        in_order = np.argsort(np.concatenate(chunks))
        items, scores, constants, features, weights = (np.concatenate(part)[in_order] for part in zip(*answers))
        return BayesianSetsBatch(
            items, scores, constants, features, weights, tuple(queries), self.item_names, self.feature_names
        )

    def _top_k_chunk(self, queries: list[np.ndarray], top_k: int, include_query: bool, n_reasons: int):
        from interpretable_zoo.inference import bayesian_sets_top_k as pruned  # numba only when a batch is ranked

        counts = self._counts(queries)
        c, q = self._coefficients_from_counts(counts, queries)
        size_weights = self._size_terms(np.unique([indices.size for indices in queries]))[1]
        items, scores = pruned.top_k(
            self._rows(), self._columns(), counts, q, c, queries, size_weights, self.informative, include_query, top_k
        )
        features, reason_weights = self._reasons(items, q, n_reasons)
        return items, scores, c, features, reason_weights

    def _reasons(self, items: np.ndarray, q: np.ndarray, n_reasons: int) -> tuple[np.ndarray, np.ndarray]:
        """(features, weights), each (B, k, n_reasons): per returned item the features with the largest q_j,
        ties to the earlier stored feature (as :meth:`query`'s reasons), padded with -1 and nan."""
        B, k = items.shape
        features = np.full((B, k, n_reasons), -1, dtype=np.int64)
        weights = np.full((B, k, n_reasons), np.nan)
        slot = np.flatnonzero(items.ravel() >= 0)
        if n_reasons == 0 or slot.size == 0:
            return features, weights
        item_rows = self._rows()[items.ravel()[slot]]
        lengths = np.diff(item_rows.indptr)
        group = np.repeat(np.arange(slot.size), lengths)
        weight = q[slot[group] // k, item_rows.indices]
        order = np.lexsort((np.arange(len(group)), -weight, group))
        rank = np.arange(len(order)) - item_rows.indptr[group[order]]
        keep = order[rank < n_reasons]
        target = (slot[group[keep]], rank[rank < n_reasons])
        features.reshape(B * k, n_reasons)[target] = item_rows.indices[keep]
        weights.reshape(B * k, n_reasons)[target] = weight[keep]
        return features, weights

    # -- answers -------------------------------------------------------------------------------------
    def _features_of(self, item: int) -> np.ndarray:
        if scipy.sparse.issparse(self.X):
            return self.X.indices[self.X.indptr[item] : self.X.indptr[item + 1]]
        return np.flatnonzero(self.X[item])

    def _top_weights(self, features: np.ndarray, q: np.ndarray, count: int) -> tuple[tuple[str, float], ...]:
        order = np.argsort(-q[features], kind="stable")[:count]
        return tuple((self.feature_names[j], float(q[j])) for j in features[order])

    def query(self, query, top_k: int | None = 10, *, include_query: bool = False, n_reasons: int = 5):
        """Rank the items for one query and explain them; returns a :class:`BayesianSetsResult`. For a batch
        (a sequence of queries) returns a :class:`BayesianSetsBatch` of each query's ``top_k`` items with
        their scores and reasons, computed without the batch x items score matrix.

        top_k: how many items to return (ties at the last place to the lower index), or None (one query
        only) for the completed set chosen by the membership rule (every candidate with P(member) >= 1/2).
        include_query: rank the query's own items too, marked ``in_query``, instead of leaving them out.
        n_reasons: features listed per returned item.
        """
        queries, single = self._batch(query)
        if top_k is not None:
            top_k = check_positive_int(top_k, "top_k")
        n_reasons = check_positive_int(n_reasons, "n_reasons", minimum=0)
        if not isinstance(include_query, (bool, np.bool_)):
            raise ValueError(f"include_query: expected True or False, got {include_query!r}")
        if not single:
            if top_k is None:
                raise ValueError(
                    "top_k: a batch of queries needs a number of items per query; the completed set (top_k=None) "
                    "is answered one query at a time"
                )
            return self._top_k_batch(queries, top_k, bool(include_query), n_reasons)
        indices = queries[0]
        c, q, scores = self._score_one(indices)

        is_query = np.zeros(self.n_items, dtype=bool)
        is_query[indices] = True
        rate = self.priors.membership_rate
        if rate is None:
            rate = estimate_membership_rate(scores[~is_query]) if indices.size < self.n_items else 0.0
        with np.errstate(divide="ignore"):  # rate 0 or 1 gives infinite log odds: membership 0 or 1
            membership = expit(bs_model.membership_log_odds(scores, rate))
        members = (membership >= MEMBERSHIP_THRESHOLD) & ~is_query
        set_size = int(np.count_nonzero(members))

        eligible = np.ones(self.n_items, dtype=bool) if include_query else ~is_query
        if top_k is None:
            ranked = np.flatnonzero(members | (is_query & eligible))
        else:
            ranked = np.flatnonzero(eligible)
            if top_k < ranked.size:  # the top_k best and every item tied with the last of them
                ranked = ranked[scores[ranked] >= -np.partition(-scores[ranked], top_k - 1)[top_k - 1]]
        ranked = ranked[np.lexsort((ranked, -scores[ranked]))][:top_k]  # best first, ties by index
        return BayesianSetsResult(
            items=ranked,
            names=tuple(self.item_names[i] for i in ranked),
            log_scores=scores[ranked],
            membership=np.where(is_query[ranked], 1.0, membership[ranked]),
            in_query=is_query[ranked],
            reasons=tuple(self._top_weights(self._features_of(i), q, n_reasons) for i in ranked),
            query=indices,
            query_names=tuple(self.item_names[i] for i in indices),
            constant=c,
            defining_features=self._top_weights(np.arange(self.n_features), q, n_reasons),
            membership_rate=float(rate),
            set_size=set_size,
        )


def precision_at_k(bayes_sets: BayesianSets, query, relevant, k: int = 10) -> tuple[float, float]:
    """Fractions of relevant items among the top ``k`` non-query items of Bayesian Sets and of the cosine baseline.

    relevant: (n_items,) 0/1 or bool labels, e.g. one genre column of MovieLens.
    """
    k = check_positive_int(k, "k")
    relevant = np.asarray(relevant)
    if relevant.shape != (bayes_sets.n_items,):
        raise ValueError(f"relevant: expected shape ({bayes_sets.n_items},), got {relevant.shape}")
    result = bayes_sets.query(query, top_k=k)
    cosine = bayes_sets.cosine_similarities(result.query)
    cosine[result.query] = -np.inf
    cosine_top = np.argsort(-cosine, kind="stable")[:k]
    return float(np.mean(relevant[result.items] != 0)), float(np.mean(relevant[cosine_top] != 0))
