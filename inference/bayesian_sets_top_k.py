"""Exact top-k items of a batch of Bayesian Sets queries, without scoring every item (a compiled sparse walk).

An item's log score is c + sum_j q_j x_j (eq. 15). Where the query has no ones (s_j = 0) the weight q_j
depends on the query only through its size N (sec. 3; ``models.bayesian_sets.query_size_terms``), so
an item sharing no feature with the query scores c + base_N(x), with base_N = X q(N) common to all
queries of size N; the query's own features raise their weights by gains g_j = q_j - q_j(N) > 0. Per query:

1. the k best items of base_N (less the query's items) are scored; any other item without a query
   feature scores its base, so it cannot outrank them;
2. the query's features are walked by decreasing gain, threshold-algorithm style. An item first met in a
   feature's column has no feature among the columns already walked, so it scores at most its base plus
   the largest gains left, as many as it has features; it is scored only if that bound reaches the k-th
   best score so far;
3. the walk stops once no item not yet met can reach the k-th best: neither the next base score plus
   every gain left, nor the positive weights left (the weights q_j(N) of absent features are negative).

Every score the kernel keeps is the item's row sum of q in stored order, the arithmetic of scipy's
sparse product X q, so the answers equal the full score matrix's to the last bit, ties to the lower
index included. Bounds are compared with a relative slack of ``BOUND_SLACK``, far above the rounding of
a sum. The walk stops at data-dependent points, so it is compiled with numba rather than XLA, its code
cached on disk by the first batch on a machine (docs/decisions/bayesian-sets-top-k.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import scipy.sparse

from interpretable_zoo.machine import usable_cores

BOUND_SLACK = 1e-9
"""Relative margin on every pruning bound, taken of the magnitudes involved (the base, c and twice the query's
summed gains): the rounding of a sum of J terms is below J x 1.1e-16 of its magnitudes."""

PIECES_PER_THREAD = 4
"""Queries are cut into this many pieces per core, so that a core left with the costlier queries does not
hold the others up."""


@numba.njit(cache=True, inline="always")
def _row_sum(row_starts, row_features, weights, item):
    """sum_j q_j over the item's stored features, in stored order (the product's own arithmetic)."""
    total = 0.0
    for position in range(row_starts[item], row_starts[item + 1]):
        total += weights[row_features[position]]
    return total


@numba.njit(cache=True, inline="always")
def _offer(items, scores, item, score):
    """Insert (item, score) into the best-first lists (ties to the lower index) if it ranks among them."""
    last = items.shape[0] - 1
    if not (score > scores[last] or (score == scores[last] and (items[last] < 0 or item < items[last]))):
        return
    slot = last
    while slot > 0 and (score > scores[slot - 1] or (score == scores[slot - 1] and item < items[slot - 1])):
        items[slot] = items[slot - 1]
        scores[slot] = scores[slot - 1]
        slot -= 1
    items[slot] = item
    scores[slot] = score


@numba.njit(cache=True, nogil=True)
def _row_sums_of_range(row_starts, row_features, weights, sums, first_item, stop_item):
    """sums[:, first_item:stop_item] = X w for each row w of ``weights`` (G, J), by :func:`_row_sum`."""
    for group in range(weights.shape[0]):
        for item in range(first_item, stop_item):
            sums[group, item] = _row_sum(row_starts, row_features, weights[group], item)


@numba.njit(cache=True, nogil=True)
def _top_k_of_range(row_starts, row_features, column_starts, column_items, weights, constants, query_starts,
                    query_items, include_query, size_group, base_scores, base_order_starts, base_order, gain_starts,
                    gain_features, gains, top_items, top_scores, first_query, stop_query):
    """Fill rows ``first_query:stop_query`` of ``top_items`` / ``top_scores`` (B, k), initialised to -1 /
    -inf, with those queries' best items.

    X is given both ways (CSR ``row_*``, CSC ``column_*``); ``weights`` (B, J) and ``constants`` (B,) are
    the queries' q and c. Query b has items ``query_items[query_starts[b]:query_starts[b + 1]]``, size group
    ``size_group[b]`` with ``base_scores[g]`` = base_N of every item and ``base_order[base_order_starts[g]:
    base_order_starts[g + 1]]`` the best items of base_N (ties to the lower index), at least k plus the
    query's size plus one of them unless that is all items; its informative features holding ones,
    ``gain_features[gain_starts[b]:gain_starts[b + 1]]``, by decreasing ``gains`` (clipped at 0).
    Weights q_j(N) <= 0 (eq. 14) bound an unseen item by the positive q_j of the features left too.
    """
    n_items = row_starts.shape[0] - 1
    k = top_items.shape[1]
    seen_by = np.full(n_items, -1, dtype=np.int32)  # the last query that met each item
    most_features = 0
    for b in range(first_query, stop_query):
        most_features = max(most_features, gain_starts[b + 1] - gain_starts[b])
    totals = np.zeros(most_features + 1)  # totals[m]: the query's first m gains summed
    positive_left = np.zeros(most_features + 1)  # positive_left[m]: the positive q_j of the gains from m on
    for b in range(first_query, stop_query):
        q, c = weights[b], constants[b]
        items, scores = top_items[b], top_scores[b]
        for position in range(query_starts[b], query_starts[b + 1]):
            item = query_items[position]
            seen_by[item] = b
            if include_query:
                _offer(items, scores, item, _row_sum(row_starts, row_features, q, item) + c)

        group = size_group[b]
        taken, next_base = 0, -np.inf
        for position in range(base_order_starts[group], base_order_starts[group + 1]):
            item = base_order[position]
            if seen_by[item] == b:
                continue
            if taken == k:
                next_base = base_scores[group, item]
                break
            seen_by[item] = b
            _offer(items, scores, item, _row_sum(row_starts, row_features, q, item) + c)
            taken += 1

        first, count = gain_starts[b], gain_starts[b + 1] - gain_starts[b]
        for walked in range(count):
            totals[walked + 1] = totals[walked] + gains[first + walked]
        positive_left[count] = 0.0
        for walked in range(count - 1, -1, -1):
            positive_left[walked] = positive_left[walked + 1] + max(q[gain_features[first + walked]], 0.0)
        for walked in range(count):
            left = min(next_base + totals[count] - totals[walked], positive_left[walked])
            if left + c + BOUND_SLACK * (abs(next_base) + abs(c) + 2 * totals[count] + positive_left[0]) < scores[k - 1]:
                break
            feature = gain_features[first + walked]
            for position in range(column_starts[feature], column_starts[feature + 1]):
                item = column_items[position]
                if seen_by[item] == b:
                    continue
                seen_by[item] = b
                n_features = row_starts[item + 1] - row_starts[item]
                reach = totals[min(walked + n_features, count)] - totals[walked]
                base = base_scores[group, item]
                if base + c + reach + BOUND_SLACK * (abs(base) + abs(c) + 2 * totals[count]) < scores[k - 1]:
                    continue
                _offer(items, scores, item, _row_sum(row_starts, row_features, q, item) + c)


def top_k(rows, columns, counts, weights, constants, queries, size_weights, informative, include_query, k):
    """(items, scores), each (B, k): every query's ``k`` best items and their log scores, best first, ties
    to the lower index, padded with -1 and -inf when fewer items are eligible.

    ``rows`` / ``columns``: X as CSR and CSC; ``counts``: the queries' s_j (B, J); ``weights`` (B, J) and
    ``constants`` (B,): their q and c; ``size_weights``: q_j(N) for each distinct query size, in increasing
    size (``models.bayesian_sets.query_size_terms``). The queries run in pieces over the CPU's cores.
    """
    sizes = np.array([indices.size for indices in queries])
    size_group = np.searchsorted(np.unique(sizes), sizes)
    items = np.full((len(queries), k), -1, dtype=np.int64)
    scores = np.full((len(queries), k), -np.inf)
    base_scores = np.empty((len(size_weights), rows.shape[0]))
    gain_starts, gain_features, gains = _gains_by_query(counts, weights, size_weights, size_group, informative)
    cores = usable_cores()  # one piece of queries on each core at a time
    pool = ThreadPoolExecutor(cores)
    try:  # on Ctrl-C the pieces not started are dropped, and the running ones end within a piece
        item_cuts = np.linspace(0, rows.shape[0], cores + 1).astype(np.int64)
        list(pool.map(lambda piece: _row_sums_of_range(rows.indptr, rows.indices, size_weights, base_scores,
                                                       item_cuts[piece], item_cuts[piece + 1]), range(cores)))
        order_starts, order = _base_order(base_scores, min(rows.shape[0], k + sizes.max() + 1))
        query_cuts = np.linspace(0, len(queries), min(len(queries), PIECES_PER_THREAD * cores) + 1).astype(np.int64)
        arguments = (rows.indptr, rows.indices, columns.indptr, columns.indices, weights, constants,
                     np.concatenate([[0], np.cumsum(sizes)]), np.concatenate(queries), include_query, size_group,
                     base_scores, order_starts, order, gain_starts, gain_features, gains, items, scores)
        list(pool.map(lambda piece: _top_k_of_range(*arguments, query_cuts[piece], query_cuts[piece + 1]),
                      range(len(query_cuts) - 1)))
    finally:
        pool.shutdown(cancel_futures=True)
    return items, scores


def _base_order(base_scores: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, items): per row of ``base_scores`` (G, n) its ``length`` best items best first, ties to the
    lower index, with every item tied with the last of them."""
    n_items = base_scores.shape[1]
    orders = []
    for scores in base_scores:
        if length < n_items:
            candidates = np.flatnonzero(scores >= -np.partition(-scores, length - 1)[length - 1])
        else:
            candidates = np.arange(n_items)
        orders.append(candidates[np.lexsort((candidates, -scores[candidates]))])
    starts = np.concatenate([[0], np.cumsum([len(order) for order in orders])])
    return starts, np.concatenate(orders)


def _gains_by_query(counts, weights, size_weights, size_group, informative):
    """(starts, features, gains): each query's informative features with s_j > 0 by decreasing gain
    q_j - q_j(N), ties to the lower feature, the gains clipped at 0 (the bounds need them non-negative)."""
    counts = scipy.sparse.coo_matrix(counts)
    keep = (counts.data != 0) & informative[counts.col]
    queries, features = counts.row[keep].astype(np.int64), counts.col[keep].astype(np.int64)
    gains = weights[queries, features] - size_weights[size_group[queries], features]
    order = np.lexsort((features, -gains, queries))
    starts = np.searchsorted(queries[order], np.arange(weights.shape[0] + 1))
    return starts, features[order], np.maximum(gains[order], 0.0)
