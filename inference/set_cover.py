"""Solvers for the prize-collecting set cover of prototype selection (Bien & Tibshirani 2011, sec. 3).

- :func:`cover_matrix` builds ``cover[i, j] = d(x_i, z_j) < eps`` from features, computing l1, l2 or
  cosine dissimilarities in tiles on the accelerator in float32 and settling the few pairs whose
  float32 value is too close to eps to decide by recomputing them exactly in float64, so the cover is
  the one float64 dissimilarities give, without ever holding the n x m float matrix.
- :func:`greedy` is the greedy algorithm of sec. 3.2 with the semantics of the authors' R package
  (protoclass), jit-compiled as one ``lax.while_loop``.
- :func:`solve_class_lp` and :func:`round_class_lp` are the per-class LP relaxation of eq. 4 (scipy's
  HiGHS) and the randomized rounding of sec. 3.1.
- :func:`pairwise_dissimilarity` gives the float64 dissimilarities of predictions;
  :func:`dissimilarity_quantiles` the exact quantiles of all pair dissimilarities (for choosing eps),
  streamed over the float32 tiles without holding the pairs; :func:`kmeans_candidates` the candidate
  set of sec. 4.2 augmented with per-class k-means centroids.
- :func:`cover_memory_bytes` estimates the memory of a cover matrix and its copies, which the public
  layer compares with the available memory before building one.

The objective functions themselves live in ``interpretable_zoo.models.prototype_selection``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
import scipy.sparse

from interpretable_zoo.models import prototype_selection as ps_model

METRICS = ("l1", "l2", "cosine")
_BLOCK_BYTES = 1 << 26  # bytes of intermediate values per block of dissimilarities
_UNIT_ROUNDOFF32 = 2.0**-24
_COVERED, _AMBIGUOUS = 1, 2
_FLOAT32_SAFE = 1e18


def check_metric(metric: str) -> str:
    """``metric`` if it names a supported dissimilarity, else a ValueError naming the argument."""
    if not isinstance(metric, str) or metric not in METRICS:
        raise ValueError(f"metric: must be one of {METRICS}, got {metric!r}")
    return metric


def check_float32_range(A: np.ndarray, name: str) -> None:
    """ValueError naming ``name`` when features are so large that float32 dissimilarities would overflow.

    The tiles compute squared norms in float32 (largest 3.4e38): |x| sqrt(p) below 1e18 keeps every
    sum of squares below 1e36.
    """
    largest = float(np.max(np.abs(A), initial=0.0)) * math.sqrt(A.shape[1])
    if largest >= _FLOAT32_SAFE:
        raise ValueError(
            f"{name}: values as large as {largest / math.sqrt(A.shape[1]):.3g} overflow the float32 dissimilarities "
            f"(max |x| * sqrt(n_features) must stay below {_FLOAT32_SAFE:.0e}); rescale the features"
        )


def cover_memory_bytes(n_points: int, n_candidates: int, *, symmetric: bool, method: str = "greedy") -> int:
    """Peak bytes of the boolean cover matrix and its copies: the n x m matrix, then for greedy its padded
    copy on the host and on the device (and their transposes unless ``symmetric``), for lp the class rows
    and candidate columns the per-class LP extracts."""
    cells = n_points * n_candidates
    if method == "lp":
        return 3 * cells
    return cells + (2 if symmetric else 4) * _bucket(n_points) * _bucket(n_candidates)


# ---------------------------------------------------------------------------------------------
# float64 dissimilarities (exact reference; predictions, quantiles, settling ambiguous pairs)
# ---------------------------------------------------------------------------------------------


def paired_dissimilarity(A: np.ndarray, B: np.ndarray, metric: str) -> np.ndarray:
    """d(A[k], B[k]) for each row k, in float64, from the coordinate differences (no cancellation)."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if metric == "l2":
        return np.sqrt(np.sum((A - B) ** 2, axis=1))
    if metric == "l1":
        return np.sum(np.abs(A - B), axis=1)
    cosine = np.sum(A * B, axis=1) / (np.linalg.norm(A, axis=1) * np.linalg.norm(B, axis=1))
    return np.clip(1.0 - cosine, 0.0, 2.0)


def pairwise_dissimilarity(A: np.ndarray, B: np.ndarray, metric: str = "l2") -> np.ndarray:
    """The (len(A), len(B)) float64 matrix of l1, l2 or cosine dissimilarities, computed in row blocks."""
    check_metric(metric)
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    out = np.empty((len(A), len(B)))
    if metric == "l2":
        b_sq = np.einsum("ij,ij->i", B, B)
        rows = max(1, _BLOCK_BYTES // (8 * max(len(B), 1)))
        for start in range(0, len(A), rows):
            a = A[start : start + rows]
            sq = np.einsum("ij,ij->i", a, a)[:, None] + b_sq[None, :] - 2.0 * (a @ B.T)
            out[start : start + rows] = np.sqrt(np.maximum(sq, 0.0))
    elif metric == "cosine":
        cosine = (A / np.linalg.norm(A, axis=1, keepdims=True)) @ (B / np.linalg.norm(B, axis=1)[:, None]).T
        out[:] = np.clip(1.0 - cosine, 0.0, 2.0)
    else:
        rows = max(1, _BLOCK_BYTES // (8 * max(len(B) * A.shape[1], 1)))
        for start in range(0, len(A), rows):
            out[start : start + rows] = np.abs(A[start : start + rows, None, :] - B[None, :, :]).sum(axis=2)
    return out


def r_type7_quantile(sorted_pair: tuple[float, float], index: float) -> float:
    """R's default (type 7) quantile from the order statistics at floor(index) and ceil(index), 1-based."""
    low, high = sorted_pair
    h = index - math.floor(index)
    if h == 0 or high == low:
        return float(low)
    return float((1 - h) * low + h * high)


# ---------------------------------------------------------------------------------------------
# float32 dissimilarities in blocks, with a rounding bound; exact float64 for the undecided pairs
# ---------------------------------------------------------------------------------------------


def _comparison_value(value, metric: str):
    """The monotone transform of a dissimilarity that the float32 blocks compare: d^2 for l2, d otherwise."""
    return value * value if metric == "l2" else value


@partial(jax.jit, static_argnames=("metric",))
def _block_values(x_block, Z, metric: str):
    """float32 comparison values (d^2 for l2, d for l1 and cosine) of a row block against Z, and their error bounds.

    The bound is 4 (p + 8) u times the magnitude of the terms summed (u = 2^-24): it covers the
    rounding of the inputs to float32, dot products in any summation order and the final sums.
    """
    p = x_block.shape[1]
    bound = 4.0 * (p + 8) * _UNIT_ROUNDOFF32
    highest = jax.lax.Precision.HIGHEST
    if metric == "l2":
        x_sq = jnp.sum(x_block * x_block, axis=1)[:, None]
        z_sq = jnp.sum(Z * Z, axis=1)[None, :]
        value = x_sq + z_sq - 2.0 * jnp.dot(x_block, Z.T, precision=highest)
        return value, bound * (x_sq + z_sq + jnp.abs(value))
    if metric == "l1":
        value = jnp.sum(jnp.abs(x_block[:, None, :] - Z[None, :, :]), axis=2)
        scale = jnp.sum(jnp.abs(x_block), axis=1)[:, None] + jnp.sum(jnp.abs(Z), axis=1)[None, :]
        return value, bound * (scale + value)
    x_unit = x_block / jnp.linalg.norm(x_block, axis=1, keepdims=True)
    z_unit = Z / jnp.linalg.norm(Z, axis=1, keepdims=True)
    value = 1.0 - jnp.dot(x_unit, z_unit.T, precision=highest)
    return value, 4.0 * bound * (1.0 + jnp.abs(value))


@partial(jax.jit, static_argnames=("metric",))
def _classify(x_block, Z, threshold, metric: str):
    """Per pair: 1 surely inside the ball, 0 surely outside, 2 within the float32 bound of its radius."""
    value, tolerance = _block_values(x_block, Z, metric)
    tolerance = tolerance + 4.0 * x_block.shape[1] * _UNIT_ROUNDOFF32 * jnp.abs(threshold)
    state = jnp.where(value < threshold, _COVERED, 0)
    return jnp.where(jnp.abs(value - threshold) <= tolerance, _AMBIGUOUS, state).astype(jnp.int8)


def _tile_size(n_points: int, n_features: int, metric: str) -> int:
    """Side of the square tiles: at most 2048 (fewer for l1, whose tiles work through n_features values
    per pair), and no more than the bucketed number of points, so small problems stay small."""
    largest = (
        2048 if metric != "l1" else int(np.clip(math.isqrt(_BLOCK_BYTES // (4 * n_features)) // 64 * 64, 64, 2048))
    )
    return min(largest, _bucket(n_points))


def _tiles(X64: np.ndarray, Z64: np.ndarray, metric: str, symmetric: bool):
    """Yield (row start, column start, rows, columns, float32 row tile, float32 column tile) covering X x Z.

    Tiles are padded to one fixed shape so each metric compiles once. With ``symmetric`` (Z is X)
    only the tiles on and above the diagonal are produced.
    """
    size = _tile_size(max(len(X64), len(Z64)), X64.shape[1], metric)

    def padded(A):
        out = np.ones((-(-len(A) // size) * size, A.shape[1]), dtype=np.float32)  # ones: no zero norms
        out[: len(A)] = A
        return jnp.asarray(out)

    X32 = padded(X64)
    Z32 = X32 if symmetric else padded(Z64)
    for r in range(0, len(X64), size):
        for c in range(r if symmetric else 0, len(Z64), size):
            yield r, c, min(size, len(X64) - r), min(size, len(Z64) - c), X32[r : r + size], Z32[c : c + size]


def cover_matrix(X: np.ndarray, Z: np.ndarray, eps: float, metric: str = "l2") -> np.ndarray:
    """``cover[i, j] = d(x_i, z_j) < eps`` (n x m boolean) for the l1, l2 or cosine dissimilarity.

    Tiles of float32 dissimilarities are computed on the accelerator (only half of them when Z is
    X, the cover then being symmetric); pairs whose float32 value lies within its rounding bound of
    eps are recomputed in float64 from the coordinate differences, so the result is that of float64
    dissimilarities computed pair by pair.
    """
    check_metric(metric)
    X64 = np.asarray(X, dtype=np.float64)
    Z64 = np.asarray(Z, dtype=np.float64)
    check_float32_range(X64, "X")
    check_float32_range(Z64, "Z")
    symmetric = X64.shape == Z64.shape and np.array_equal(X64, Z64)
    threshold = jnp.float32(_comparison_value(eps, metric))
    cover = np.empty((len(X64), len(Z64)), dtype=bool)
    for r, c, n_rows, n_cols, x_tile, z_tile in _tiles(X64, Z64, metric, symmetric):
        state = _classify(x_tile, z_tile, threshold, metric)
        host_state = np.asarray(state)[:n_rows, :n_cols]
        tile = cover[r : r + n_rows, c : c + n_cols]
        tile[:] = host_state == _COVERED
        i, j = np.divmod(np.flatnonzero(host_state == _AMBIGUOUS), n_cols)
        inside = paired_dissimilarity(X64[r + i], Z64[c + j], metric) < eps
        tile[i, j] = inside
        if symmetric and c != r:  # the mirrored tile, transposed on the device (a host transpose is slow)
            mirror = cover[c : c + n_cols, r : r + n_rows]
            mirror[:] = np.asarray(_transpose(state))[:n_cols, :n_rows] == _COVERED
            mirror[j, i] = inside
    return cover


_transpose = jax.jit(jnp.transpose)


_HISTOGRAM_SHIFT = 12  # float32 bit patterns >> 12: 2^11 bins per binade, each 0.05 % of its values wide
_PAIR_CHUNK_BYTES = 1 << 25  # bytes of gathered coordinates per chunk of pairs recomputed in float64


def dissimilarity_quantile(X: np.ndarray, q: float, metric: str = "l2") -> float:
    """The q-quantile of the n(n-1)/2 dissimilarities d(x_i, x_j), i < j: R's ``quantile(dist(X), q)``
    (see :func:`dissimilarity_quantiles`)."""
    if isinstance(q, (bool, np.bool_)) or not isinstance(q, numbers.Real) or not 0.0 <= q <= 1.0:
        raise ValueError(f"q: a quantile level must be a number in [0, 1], got {q!r}")
    return float(dissimilarity_quantiles(X, [q], metric)[0])


def dissimilarity_quantiles(X: np.ndarray, levels, metric: str = "l2") -> np.ndarray:
    """The quantiles at ``levels`` of the n(n-1)/2 dissimilarities d(x_i, x_j), i < j: R's
    ``quantile(dist(X), levels)``.

    R's default (type 7): with N pairs, h = 1 + (N - 1) q and the value (1 - frac(h)) d_(floor h) +
    frac(h) d_(ceil h) of the sorted dissimilarities. The result is that of float64 dissimilarities
    computed pair by pair (ties included), but neither the pairs nor their values are ever held: two
    passes over float32 tiles (:func:`cover_matrix`'s) first count the values in a histogram keyed by
    their float32 bit patterns (monotone in the value), which locates the bin of each order statistic,
    then keep only the pairs within the float32 rounding bound of those bins, recomputed exactly in
    float64 and stored as distinct values with counts. Memory is the histogram, one tile and those
    pairs, instead of 4 to 20 bytes per pair.
    """
    check_metric(metric)
    levels = np.asarray(levels)
    if levels.ndim != 1 or levels.dtype.kind not in "iuf" or not np.all((levels >= 0.0) & (levels <= 1.0)):
        raise ValueError(f"levels: must be a 1-D sequence of numbers in [0, 1], got {levels.tolist()!r}")
    levels = levels.astype(np.float64)
    X64 = np.asarray(X, dtype=np.float64)
    n = len(X64)
    if n < 2:
        raise ValueError(f"X: needs at least 2 rows to have pairwise dissimilarities, got {n}")
    check_float32_range(X64, "X")
    if levels.size == 0:
        return np.empty(0)
    n_pairs = n * (n - 1) // 2
    index = 1.0 + (n_pairs - 1) * levels
    ranks = np.unique(np.concatenate([np.floor(index), np.ceil(index)]).astype(np.int64) - 1)  # 0-based

    # pass 1: histogram of the float32 comparison values, and their largest rounding bound
    counts = np.zeros(_histogram_bins(np.float32(np.inf)) + 1, dtype=np.int64)
    bound = 0.0
    for values, tolerance, _ in _upper_pair_values(X64, metric):
        counts += np.bincount(_histogram_bins(values), minlength=len(counts))
        bound = max(bound, float(tolerance.max(initial=0.0)))
    bins = np.searchsorted(np.cumsum(counts), ranks, side="right")
    edges = (np.stack([bins, bins + 1]) << _HISTOGRAM_SHIFT).astype(np.int32).view(np.float32).astype(np.float64)
    margin = 2.0 * bound + 1e-30  # |float32 - exact| <= bound, so an order statistic moves by at most that
    low = np.where(bins == 0, -np.inf, edges[0] - margin)  # ranks ascend, so low and high do too
    high = edges[1] + margin

    # pass 2: per order statistic, the number of pairs below its band [low, high]; for the pairs inside
    # some band, their float32 and exact values, kept as distinct (float32, exact) combinations with counts
    below = np.zeros(len(ranks), dtype=np.int64)
    near = []  # per tile: (float32 values, exact values, counts)
    for values, _, pairs in _upper_pair_values(X64, metric):
        lows_passed = np.searchsorted(low, values, side="right")  # value v is below low[t] for t >= this
        below += np.cumsum(np.bincount(lows_passed, minlength=len(ranks) + 1))[:-1]
        inside = np.flatnonzero(lows_passed > np.searchsorted(high, values, side="left"))  # inside some band
        if inside.size:
            exact = _exact_pairs(X64, *pairs(inside), metric)
            near.append(_distinct_pairs(values[inside], exact, np.ones(inside.size, np.int64)))
    near_float32, near_exact, near_counts = _distinct_pairs(*(np.concatenate(part) for part in zip(*near)))
    order_statistics = {}
    for t, rank in enumerate(ranks.tolist()):
        inside = (near_float32 >= low[t]) & (near_float32 <= high[t])
        distinct, multiplicity = near_exact[inside], near_counts[inside]
        order = np.argsort(distinct, kind="stable")
        position = np.searchsorted(np.cumsum(multiplicity[order]), rank - below[t], side="right")
        order_statistics[rank] = float(distinct[order][position])
    return np.array(
        [
            r_type7_quantile((order_statistics[math.floor(h) - 1], order_statistics[math.ceil(h) - 1]), h)
            for h in index.tolist()
        ]
    )


def _histogram_bins(values):
    """Histogram bin of each float32 value: the top bits of its bit pattern (negative rounding errors go to 0)."""
    return np.maximum(values, np.float32(0.0)).view(np.int32) >> _HISTOGRAM_SHIFT


def _distinct_pairs(float32_values, exact, counts):
    """The distinct (float32 value, exact value) combinations and their total counts."""
    order = np.lexsort((exact, float32_values))
    float32_values, exact, counts = float32_values[order], exact[order], counts[order]
    starts = np.flatnonzero(np.r_[True, (np.diff(float32_values) != 0) | (np.diff(exact) != 0)])
    return float32_values[starts], exact[starts], np.add.reduceat(counts, starts)


def _upper_pair_values(X64: np.ndarray, metric: str):
    """Yield, tile by tile, the float32 comparison values of the pairs i < j, their rounding bounds, and a
    function from positions in those arrays to the pairs' (i, j)."""
    for r, c, n_rows, n_cols, x_tile, z_tile in _tiles(X64, X64, metric, symmetric=True):
        value, tolerance = (np.asarray(a)[:n_rows, :n_cols] for a in _block_values(x_tile, z_tile, metric))
        if r == c:  # a tile on the diagonal: its pairs above the diagonal
            upper = np.triu(np.ones((n_rows, n_cols), dtype=bool), k=1)
            yield value[upper], tolerance[upper], partial(_pair_indices, r, c, n_cols, upper)
        else:
            yield value.ravel(), tolerance.ravel(), partial(_pair_indices, r, c, n_cols, None)


def _pair_indices(row_start: int, column_start: int, n_cols: int, mask, positions) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) of the pairs at ``positions`` among a row-major tile's entries (those in ``mask`` when given)."""
    flat = positions if mask is None else np.flatnonzero(mask)[positions]
    rows, columns = np.divmod(flat, n_cols)
    return row_start + rows, column_start + columns


def _exact_pairs(X64: np.ndarray, rows: np.ndarray, columns: np.ndarray, metric: str) -> np.ndarray:
    """float64 dissimilarities of the pairs (rows[k], columns[k]), gathered in chunks of bounded size."""
    chunk = max(1, _PAIR_CHUNK_BYTES // (16 * max(X64.shape[1], 1)))
    return np.concatenate(
        [
            paired_dissimilarity(X64[rows[s : s + chunk]], X64[columns[s : s + chunk]], metric)
            for s in range(0, len(rows), chunk)
        ]
    )


# ---------------------------------------------------------------------------------------------
# greedy (sec. 3.2, the authors' semantics)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GreedyPath:
    """The greedy choices in order: candidate index, class code, own-class points newly covered, other-class points covered."""

    candidates: np.ndarray
    classes: np.ndarray
    new_correct: np.ndarray
    wrong: np.ndarray


_SLAB_ROWS = 8  # points per slab of the cover matrix that the gain updates visit


@jax.jit
def _greedy_kernel(cover, balls, y, counts, min_gain):
    """Greedy prize-collecting set cover as one while loop; returns the path padded to n steps and its length.

    ``cover`` is n x m (rows: the candidates covering each point), ``balls`` its transpose (rows: the
    points in each candidate's ball). Gains ``gain[l, j]`` = (uncovered class-l points in B(z_j)) -
    (other-class points in B(z_j)); the best (class, candidate) pair, ties to the lowest class code and
    then the lowest candidate index, is added while its gain is at least ``min_gain`` (the smallest
    integer above lam, so the integer comparison is exact). Only the newly covered
    class-l points leave the gains of class l; wrong covers keep counting; a candidate may serve any
    class. Each class's best candidate is kept, so a step rescans one row of gains, and the gains
    lose the rows of ``cover`` of the newly covered points, visited slab by slab.
    """
    n, m = cover.shape
    gains = ps_model.greedy_gains(counts).T  # (K, m)
    candidate_index = jnp.arange(m, dtype=jnp.int32)

    def row_best(row):
        top = jnp.max(row)
        return top, jnp.min(jnp.where(row == top, candidate_index, m))

    def choice(tops, args):
        label = jnp.argmax(tops).astype(jnp.int32)
        return label, args[label], tops[label]

    def cond(carry):
        step, _, _, _, _, (_, _, gain), _ = carry
        return (step < n) & (gain >= min_gain)

    def body(carry):
        step, gains, tops, args, covered, (label, candidate, _), path = carry
        ball = balls[candidate]
        own = y == label
        newly = ball & own & ~covered
        n_new = jnp.sum(newly, dtype=jnp.int32)
        n_wrong = jnp.sum(ball & ~own, dtype=jnp.int32)

        def remove_slab(slab_carry):
            pending, removed = slab_carry
            slab = jnp.argmax(pending).astype(jnp.int32)
            rows = jax.lax.dynamic_slice(cover, (slab * _SLAB_ROWS, 0), (_SLAB_ROWS, m))
            points = jax.lax.dynamic_slice(newly, (slab * _SLAB_ROWS,), (_SLAB_ROWS,))
            removed = removed + jnp.sum(rows & points[:, None], axis=0, dtype=jnp.int32)
            return pending.at[slab].set(False), removed

        pending = newly.reshape(n // _SLAB_ROWS, _SLAB_ROWS).any(axis=1)
        _, removed = jax.lax.while_loop(lambda c: jnp.any(c[0]), remove_slab, (pending, jnp.zeros(m, jnp.int32)))
        row = gains[label] - removed
        top, arg = row_best(row)
        gains, tops, args = gains.at[label].set(row), tops.at[label].set(top), args.at[label].set(arg)
        record = (candidate, label, n_new, n_wrong)
        path = tuple(column.at[step].set(value) for column, value in zip(path, record))
        return step + 1, gains, tops, args, covered | newly, choice(tops, args), path

    tops, args = jax.vmap(row_best)(gains)
    path = tuple(jnp.zeros(n, jnp.int32) for _ in range(4))
    init = (jnp.int32(0), gains, tops, args, jnp.zeros(n, bool), choice(tops, args), path)
    steps, *_, path = jax.lax.while_loop(cond, body, init)
    return steps, path


def _bucket(size: int) -> int:
    """Round a dimension up to one of 8 sizes per doubling (at most 12.5 % more), so greedy compiles once per bucket."""
    if size <= 64:
        return 64
    step = 1 << (size.bit_length() - 4)
    return -(-size // step) * step


def greedy(cover: np.ndarray, y: np.ndarray, n_classes: int, lam: float, *, symmetric: bool = False) -> GreedyPath:
    """The greedy algorithm of sec. 3.2 on a cover matrix (n x m boolean) and class codes y in 0..K-1.

    Returns the chosen (candidate, class) pairs in order with the number of own-class points each
    newly covered and the other-class points in its ball (the annotations of the paper's fig. 6).
    ``symmetric`` declares cover == cover.T (candidates = training points, symmetric dissimilarity),
    which saves its transpose. The problem is padded with empty balls and points in no ball up to
    bucketed sizes; those never change a gain and an empty ball never has a positive one.
    """
    if lam < 0:
        raise ValueError(f"lam: the prototype cost must be non-negative, got {lam}")
    cover = np.asarray(cover, dtype=bool)
    y = np.asarray(y)
    counts = ps_model.class_cover_counts(cover, y, n_classes)
    (n, m), n_padded, m_padded = cover.shape, _bucket(cover.shape[0]), _bucket(cover.shape[1])
    padded = np.zeros((n_padded, m_padded), dtype=bool)
    padded[:n, :m] = cover
    cover = jnp.asarray(padded)
    balls = cover if symmetric else jnp.asarray(np.ascontiguousarray(padded.T))
    y = np.concatenate([y, np.zeros(n_padded - n, dtype=y.dtype)])
    counts = np.concatenate([counts, np.zeros((m_padded - m, counts.shape[1]), dtype=counts.dtype)])
    min_gain = jnp.int32(min(ps_model.gain_threshold(lam), n + 1))
    steps, path = _greedy_kernel(cover, balls, jnp.asarray(y, dtype=jnp.int32), jnp.asarray(counts), min_gain)
    steps = int(steps)
    candidates, classes, new_correct, wrong = (np.asarray(column)[:steps].astype(np.int64) for column in path)
    return GreedyPath(candidates, classes, new_correct, wrong)


# ---------------------------------------------------------------------------------------------
# LP relaxation and randomized rounding (sec. 3.1)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassLP:
    """The LP relaxation of class ``label``'s problem (eq. 4): its optimum and optimal alpha (m,) and xi (n_l,)."""

    label: int
    value: float
    alpha: np.ndarray
    xi: np.ndarray
    costs: np.ndarray
    own_cover: scipy.sparse.csr_matrix


def solve_class_lp(cover: np.ndarray, y: np.ndarray, label: int, lam: float) -> ClassLP:
    """Solve the LP relaxation of eq. 4 for one class with scipy's HiGHS.

    Variables alpha_j in [0, 1] for the candidates whose ball holds a point of the class (the others
    are 0 at every optimum) and xi_i in [0, 1] for the class's points; constraints
    xi_i + sum_{j: x_i in B(z_j)} alpha_j >= 1; costs lam + C_l(j) and 1.
    """
    cover = np.asarray(cover, dtype=bool)
    y = np.asarray(y)
    n_classes = int(y.max()) + 1
    own = cover[y == label]
    costs = ps_model.set_costs(cover, y, n_classes, lam)[:, label]
    useful = np.flatnonzero(own.any(axis=0))
    own_cover = scipy.sparse.csr_matrix(own[:, useful], dtype=np.float64)
    n_own = own.shape[0]
    constraints = scipy.sparse.hstack([-own_cover, -scipy.sparse.identity(n_own)], format="csr")
    result = scipy.optimize.linprog(
        c=np.concatenate([costs[useful], np.ones(n_own)]),
        A_ub=constraints,
        b_ub=-np.ones(n_own),
        bounds=(0.0, 1.0),
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"the LP of class {label} was not solved: {result.message}")
    alpha = np.zeros(cover.shape[1])
    alpha[useful] = np.clip(result.x[: len(useful)], 0.0, 1.0)
    xi = np.clip(result.x[len(useful) :], 0.0, 1.0)
    return ClassLP(label, float(result.fun), alpha, xi, costs, scipy.sparse.csr_matrix(own, dtype=np.float64))


def rounding_factor(n_own: int) -> float:
    """The 2 log|X_l| of sec. 3.1 (natural log), floored at 2 so that classes of one or two points keep a round."""
    return 2.0 * max(math.log(n_own), 1.0)


def round_class_lp(lp: ClassLP, rng: np.random.Generator, max_attempts: int = 1000) -> np.ndarray:
    """Randomized rounding of sec. 3.1 for one class: a 0/1 alpha (m,).

    An attempt draws, for up to ceil(2 log|X_l|) rounds, alpha_j ~ Bernoulli(alpha*_j) and
    xi_i ~ Bernoulli(xi*_i) independently, keeping the union, and stops at the first round whose
    union is feasible (every point covered or slacked). It is accepted when feasible with objective
    (eq. 4, slacks at their smallest) at most 2 log|X_l| times the LP optimum; otherwise it is repeated.
    """
    n_own = lp.own_cover.shape[0]
    factor = rounding_factor(n_own)
    rounds = math.ceil(factor)
    for _ in range(max_attempts):
        chosen = np.zeros(len(lp.alpha), dtype=bool)
        slack = np.zeros(n_own, dtype=bool)
        for _ in range(rounds):
            chosen |= rng.random(len(lp.alpha)) < lp.alpha
            slack |= rng.random(n_own) < lp.xi
            if np.all(slack | (lp.own_cover @ chosen.astype(np.float64) > 0)):
                break
        else:
            continue
        value = ps_model.class_objective_given_costs(lp.own_cover, lp.costs, chosen)
        if value <= factor * lp.value * (1 + 1e-9) + 1e-9:
            return chosen
    raise RuntimeError(
        f"randomized rounding of class {lp.label} found no solution within {factor:.2f} x the LP optimum "
        f"in {max_attempts} attempts"
    )


# ---------------------------------------------------------------------------------------------
# candidates beyond the training points (sec. 4.2)
# ---------------------------------------------------------------------------------------------


def kmeans_candidates(X: np.ndarray, y: np.ndarray, n_clusters: int = 10, seed: int = 0) -> np.ndarray:
    """The candidate set Z of sec. 4.2: the training points followed by ``n_clusters`` k-means centroids per class."""
    from sklearn.cluster import KMeans

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    centroids = []
    for label in np.unique(y):
        members = X[y == label]
        if len(members) < n_clusters:
            raise ValueError(f"n_clusters: class {label!r} has {len(members)} points, fewer than {n_clusters} clusters")
        centroids.append(KMeans(n_clusters, n_init=10, random_state=seed).fit(members).cluster_centers_)
    return np.concatenate([X, *centroids])
