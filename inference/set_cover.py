"""Solvers for the prize-collecting set cover of prototype selection (Bien & Tibshirani 2011, sec. 3).

- :func:`ball_cover` builds the cover ``d(x_i, z_j) < eps`` as a sparse :class:`BallCover` (for each
  point the balls holding it, for each ball the points inside), computing l1, l2 or cosine
  dissimilarities in tiles on the accelerator in float32 and settling the few pairs whose float32
  value is too close to eps to decide by recomputing them exactly in float64, so the cover is the one
  float64 dissimilarities give; neither the n x m dissimilarities nor an n x m matrix are ever held.
  :func:`estimate_cover` predicts its size from one tile of sampled pairs, before it is built.
- :func:`greedy` is the greedy algorithm of sec. 3.2 with the semantics of the authors' R package
  (protoclass), updating the gains from the lists of the newly covered points only.
- :func:`solve_class_lp` and :func:`round_class_lp` are the per-class LP relaxation of eq. 4 (scipy's
  HiGHS, sparse constraints) and the randomized rounding of sec. 3.1.
- :func:`pairwise_dissimilarity` gives the float64 dissimilarities of predictions;
  :func:`dissimilarity_quantiles` the exact quantiles of all pair dissimilarities (for choosing eps),
  streamed over the float32 tiles without holding the pairs; :func:`kmeans_candidates` the candidate
  set of sec. 4.2 augmented with per-class k-means centroids.

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

from interpretable_zoo.inference import memory
from interpretable_zoo.inference.shapes import size_bucket
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

    The tiles compute squared norms in float32 (largest 3.4e38): ``|x|`` sqrt(p) below 1e18 keeps every
    sum of squares below 1e36.
    """
    largest = float(np.max(np.abs(A), initial=0.0)) * math.sqrt(A.shape[1])
    if largest >= _FLOAT32_SAFE:
        raise ValueError(
            f"{name}: values as large as {largest / math.sqrt(A.shape[1]):.3g} overflow the float32 dissimilarities "
            f"(max |x| * sqrt(n_features) must stay below {_FLOAT32_SAFE:.0e}); rescale the features"
        )


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


@jax.jit
def _gram(A, B):
    """A B^T in float32 and the rows' squared norms, as a program of their own: with the elementwise work that
    follows in the same program, XLA's CPU backend runs a 2048 x 2048 x 256 tile about twice as slowly."""
    highest = jax.lax.Precision.HIGHEST
    return jnp.dot(A, B.T, precision=highest), jnp.sum(A * A, axis=1), jnp.sum(B * B, axis=1)


@jax.jit
def _unit_rows(A):
    return A / jnp.linalg.norm(A, axis=1, keepdims=True)


@jax.jit
def _l1_terms(x_block, Z):
    """The l1 values and the magnitudes of their terms."""
    value = jnp.sum(jnp.abs(x_block[:, None, :] - Z[None, :, :]), axis=2)
    return value, jnp.sum(jnp.abs(x_block), axis=1)[:, None] + jnp.sum(jnp.abs(Z), axis=1)[None, :] + value


def _products(x_block, Z, metric: str):
    """What ``_values`` needs: (gram, x_sq, z_sq) for l2 and cosine (of the unit rows), (value, magnitude) for l1."""
    if metric == "l2":
        return _gram(x_block, Z)
    if metric == "cosine":
        return _gram(_unit_rows(x_block), _unit_rows(Z))
    return _l1_terms(x_block, Z)


def _values(products, n_features: int, metric: str, unit_roundoff: float = _UNIT_ROUNDOFF32, xp=jnp):
    """Comparison values (d^2 for l2, d for l1 and cosine) and their error bounds: 4 (p + 8) u times the
    magnitude of the terms summed (u = 2^-24 for float32), which covers the rounding of the inputs to the
    precision, dot products in any summation order and the final sums. ``xp``: jax.numpy (traced, float32)
    or numpy (float64 products, ``unit_roundoff`` 2^-53)."""
    bound = 4.0 * (n_features + 8) * unit_roundoff
    if metric == "l1":
        value, magnitude = products
        return value, bound * magnitude
    gram, x_sq, z_sq = products
    if metric == "cosine":
        value = 1.0 - gram
        return value, 4.0 * bound * (1.0 + xp.abs(value))
    norms = x_sq[:, None] + z_sq[None, :]
    value = norms - 2.0 * gram
    return value, bound * (norms + xp.abs(value))


@partial(jax.jit, static_argnames=("n_features", "metric"))
def _values_of_products(products, n_features: int, metric: str):
    return _values(products, n_features, metric)


def _block_values(x_block, Z, metric: str):
    """float32 comparison values of a row block against Z and their error bounds (``_values``)."""
    return _values_of_products(_products(x_block, Z, metric), x_block.shape[1], metric)


def _classify(x_block, Z, threshold, metric: str):
    """Per pair: 1 surely inside the ball, 0 surely outside, 2 within the float32 bound of its radius."""
    return _states(_products(x_block, Z, metric), threshold, x_block.shape[1], metric)


@partial(jax.jit, static_argnames=("n_features", "metric"))
def _states(products, threshold, n_features: int, metric: str):
    value, tolerance = _values(products, n_features, metric)
    tolerance = tolerance + 4.0 * n_features * _UNIT_ROUNDOFF32 * jnp.abs(threshold)
    state = jnp.where(value < threshold, _COVERED, 0)
    return jnp.where(jnp.abs(value - threshold) <= tolerance, _AMBIGUOUS, state).astype(jnp.int8)


def _tile_size(n_points: int, n_features: int, metric: str) -> int:
    """Side of the square tiles: at most 2048 (fewer for l1, whose tiles work through n_features values
    per pair), and no more than the bucketed number of points, so small problems stay small."""
    largest = (
        2048 if metric != "l1" else int(np.clip(math.isqrt(_BLOCK_BYTES // (4 * n_features)) // 64 * 64, 64, 2048))
    )
    return min(largest, _bucket(n_points))


def _bucket(size: int) -> int:
    """Round a dimension up to one of 8 sizes per doubling (at most 12.5 % more), so the tiles compile once per bucket."""
    return max(64, size_bucket(size, 8))


def _tiles(X64: np.ndarray, Z64: np.ndarray, metric: str, symmetric: bool):
    """Yield (row start, column start, rows, columns, float32 row tile, float32 column tile) covering X x Z.

    Tiles are padded to one fixed shape so each metric compiles once. With ``symmetric`` (Z is X)
    only the tiles on and above the diagonal are produced, row by row.
    """
    size = _tile_size(max(len(X64), len(Z64)), X64.shape[1], metric)
    X32 = _padded(X64, size)
    Z32 = X32 if symmetric else _padded(Z64, size)
    for r in range(0, len(X64), size):
        for c in range(r if symmetric else 0, len(Z64), size):
            yield r, c, min(size, len(X64) - r), min(size, len(Z64) - c), X32[r : r + size], Z32[c : c + size]


# ---------------------------------------------------------------------------------------------
# the cover kept sparse: for each point the balls holding it, for each ball the points inside
# ---------------------------------------------------------------------------------------------

_CHUNK_ENTRIES = 1 << 22  # (point, ball) pairs handled at once when the structure is assembled or read


def _block_rows(n_candidates: int) -> int:
    """Rows of a cover read at once: about _CHUNK_ENTRIES entries, at least one row."""
    return max(1, _CHUNK_ENTRIES // max(n_candidates, 1))


@dataclass(frozen=True, eq=False)
class BallCover:
    """The cover ``cover[i, j] = d(x_i, z_j) < eps`` of n training points by m candidate balls, kept sparse.

    ``point_candidates[point_offsets[i]:point_offsets[i + 1]]`` are the candidates whose balls hold point i
    and ``ball_points[ball_offsets[j]:ball_offsets[j + 1]]`` the points in candidate j's ball, both ascending.
    Indices are int32 and offsets int64: 4 bytes per (point, ball) pair when the cover is symmetric
    (candidates = training points; both lists are then the same arrays), 8 otherwise.
    """

    n_points: int
    n_candidates: int
    point_offsets: np.ndarray
    point_candidates: np.ndarray
    ball_offsets: np.ndarray
    ball_points: np.ndarray

    @classmethod
    def from_dense(cls, cover, *, share_symmetric: bool = True) -> BallCover:
        """From an n x m boolean matrix; a symmetric one shares its two lists unless ``share_symmetric`` is False."""
        cover = np.asarray(cover, dtype=bool)
        if cover.ndim != 2:
            raise ValueError(f"cover: expected a 2-D boolean matrix, got shape {cover.shape}")
        return cls.from_row_blocks(lambda start, stop: cover[start:stop], *cover.shape, share_symmetric=share_symmetric)

    @classmethod
    def from_row_blocks(cls, rows, n_points: int, n_candidates: int, *, share_symmetric: bool = True) -> BallCover:
        """From ``rows(start, stop)``, the boolean rows start..stop-1 of the cover, read in blocks of bounded size."""
        block = _block_rows(n_candidates)
        offsets, candidates = _compress(rows(start, min(start + block, n_points)) for start in range(0, n_points, block))
        if share_symmetric and n_points == n_candidates:
            ball_offsets, balls = _transpose_lists(offsets, candidates, n_candidates)
            if np.array_equal(ball_offsets, offsets) and np.array_equal(balls, candidates):
                return cls(n_points, n_candidates, offsets, candidates, offsets, candidates)
            return cls(n_points, n_candidates, offsets, candidates, ball_offsets, balls)
        return cls(n_points, n_candidates, offsets, candidates, *_transpose_lists(offsets, candidates, n_candidates))

    @property
    def symmetric(self) -> bool:
        return self.ball_points is self.point_candidates

    @property
    def n_pairs(self) -> int:
        """The number of (point, ball) pairs, the stored entries of each list."""
        return len(self.point_candidates)

    @property
    def nbytes(self) -> int:
        arrays = (self.point_offsets, self.point_candidates) + (() if self.symmetric else (self.ball_offsets, self.ball_points))
        return sum(a.nbytes for a in arrays)

    def ball(self, candidate: int) -> np.ndarray:
        return self.ball_points[self.ball_offsets[candidate] : self.ball_offsets[candidate + 1]]

    def ball_sizes(self) -> np.ndarray:
        return np.diff(self.ball_offsets)

    def candidates_of(self, points: np.ndarray) -> np.ndarray:
        """The candidates whose balls hold each of ``points``, concatenated (a candidate once per point it holds)."""
        return _gather(self.point_offsets, self.point_candidates, points)

    def balls_holding(self, points: np.ndarray) -> np.ndarray:
        """(m,) for each candidate the number of ``points`` in its ball, counted over chunks of their lists."""
        counts = np.zeros(self.n_candidates, dtype=np.int64)
        ends = np.cumsum(np.diff(self.point_offsets)[points])
        start = 0
        while start < len(points):
            stop = max(int(np.searchsorted(ends, (ends[start - 1] if start else 0) + _CHUNK_ENTRIES, side="right")), start + 1)
            counts += np.bincount(self.candidates_of(points[start:stop]), minlength=self.n_candidates)
            start = stop
        return counts

    def rows(self, points: np.ndarray) -> scipy.sparse.csr_matrix:
        """The cover's rows of ``points`` as a float64 CSR matrix (len(points) x m)."""
        lengths = np.diff(self.point_offsets)[points]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        data = np.ones(int(offsets[-1]))
        return scipy.sparse.csr_matrix((data, self.candidates_of(points), offsets), shape=(len(points), self.n_candidates))

    def columns(self, candidates: np.ndarray) -> scipy.sparse.csc_matrix:
        """The cover's columns of ``candidates`` as a boolean CSC matrix (n x len(candidates))."""
        lengths = np.diff(self.ball_offsets)[candidates]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        points = _gather(self.ball_offsets, self.ball_points, candidates)
        data = np.ones(len(points), dtype=bool)
        return scipy.sparse.csc_matrix((data, points, offsets), shape=(self.n_points, len(candidates)))

    def class_counts(self, y: np.ndarray, n_classes: int) -> np.ndarray:
        """``models.prototype_selection.class_cover_counts`` of this cover, summed over blocks of rows."""
        counts = np.zeros((self.n_candidates, n_classes), dtype=np.int64)
        for start, stop in _row_chunks(self.point_offsets):
            a, b = self.point_offsets[start], self.point_offsets[stop]
            block = scipy.sparse.csr_matrix(
                (np.ones(b - a, dtype=bool), self.point_candidates[a:b], (self.point_offsets[start : stop + 1] - a).astype(np.int32)),
                shape=(stop - start, self.n_candidates),
            )
            counts += ps_model.class_cover_counts(block, y[start:stop], n_classes)
        return counts

    def to_dense(self) -> np.ndarray:
        """The n x m boolean matrix (for small covers: tests and inspection)."""
        cover = np.zeros((self.n_points, self.n_candidates), dtype=bool)
        cover[np.repeat(np.arange(self.n_points), np.diff(self.point_offsets)), self.point_candidates] = True
        return cover


def _gather(offsets: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The compressed rows ``rows`` of (offsets, indices), concatenated in the order given."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return indices[:0]
    ends = np.cumsum(lengths)
    return indices[np.repeat(starts - ends + lengths, lengths) + np.arange(total)]


def _row_chunks(offsets: np.ndarray):
    """Consecutive row ranges (start, stop) of compressed rows holding about _CHUNK_ENTRIES entries each."""
    n_rows, start = len(offsets) - 1, 0
    while start < n_rows:
        stop = int(np.searchsorted(offsets, offsets[start] + _CHUNK_ENTRIES, side="right")) - 1
        stop = min(max(stop, start + 1), n_rows)
        yield start, stop
        start = stop


def _compress(blocks) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64, column indices int32) of a boolean matrix given as consecutive row blocks."""
    counts, parts = [np.zeros(1, dtype=np.int64)], []
    for block in blocks:
        rows, columns = np.nonzero(block)
        counts.append(np.bincount(rows, minlength=len(block)))
        parts.append(columns.astype(np.int32))
    return np.cumsum(np.concatenate(counts)), np.concatenate(parts) if parts else np.zeros(0, np.int32)


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """np.argsort(keys, kind="stable") for non-negative int32 keys, by radix sorts of 16-bit halves (NumPy's
    stable sort of 16-bit integers is a radix sort, several times faster than its sort of 32-bit ones)."""
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if len(keys) == 0 or keys.max() <= 0xFFFF:
        return low
    return low[np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")]


def _place_by_key(keys: np.ndarray, values: np.ndarray, cursor: np.ndarray, out: np.ndarray) -> None:
    """Counting-sort placement: ``values`` written to ``out`` at ``cursor[key]`` onwards, in their order within
    equal keys; ``cursor`` advances past them."""
    counts = np.bincount(keys, minlength=len(cursor))
    order = _stable_order(keys)
    shift = cursor - (np.cumsum(counts) - counts)  # cursor[k] less the first sorted position of key k
    out[shift[keys[order]] + np.arange(len(keys))] = values[order]
    cursor += counts


def _transpose_lists(offsets: np.ndarray, indices: np.ndarray, n_columns: int) -> tuple[np.ndarray, np.ndarray]:
    """The compressed rows of the transpose (for each column the rows holding it, ascending), built by a
    counting sort over chunks of rows, so the only large allocation is the result."""
    out_offsets = np.concatenate([[0], np.cumsum(np.bincount(indices, minlength=n_columns))]).astype(np.int64)
    out = np.empty(len(indices), dtype=np.int32)
    cursor = out_offsets[:-1].copy()
    for start, stop in _row_chunks(offsets):
        rows = np.repeat(np.arange(start, stop, dtype=np.int32), np.diff(offsets[start : stop + 1]))
        _place_by_key(indices[offsets[start] : offsets[stop]], rows, cursor, out)
    return out_offsets, out


def _mirror_upper(n: int, chunks: list) -> tuple[np.ndarray, np.ndarray]:
    """The full symmetric compressed rows from the upper triangle (diagonal included), given as chunks
    (first row, per-row counts, column indices >= their row, ascending per row) in row order.

    Row i lists first the j < i whose upper rows hold i (ascending, as the chunks come in row order),
    then its own upper row. Each chunk is released once placed.
    """
    upper_counts = np.concatenate([counts for _, counts, _ in chunks]) if chunks else np.zeros(0, np.int64)
    lower_counts = np.zeros(n, dtype=np.int64)
    for start, counts, columns in chunks:
        rows = np.repeat(np.arange(start, start + len(counts), dtype=np.int32), counts)
        lower_counts += np.bincount(columns[columns > rows], minlength=n)
    offsets = np.concatenate([[0], np.cumsum(lower_counts + upper_counts)]).astype(np.int64)
    indices = np.empty(int(offsets[-1]), dtype=np.int32)
    lower_cursor = offsets[:-1].copy()
    upper_start = offsets[:-1] + lower_counts
    while chunks:
        start, counts, columns = chunks.pop(0)
        local = np.concatenate([[0], np.cumsum(counts)])
        for a, b in _row_chunks(local):
            rows = np.repeat(np.arange(start + a, start + b, dtype=np.int32), counts[a:b])
            part = columns[local[a] : local[b]]
            within = np.arange(local[a], local[b]) - np.repeat(local[a:b], counts[a:b])
            indices[upper_start[rows] + within] = part
            strict = part > rows
            _place_by_key(part[strict], rows[strict], lower_cursor, indices)
    return offsets, indices


@dataclass(frozen=True)
class CoverEstimate:
    """The size of a cover estimated before it is built, from randomly sampled pairs (one tile of points and
    candidates, or rows of a given dissimilarity matrix).

    fraction: share of the sampled (point, candidate) pairs within eps; upper: that share plus three
    standard errors (the sampled points as units), capped at 1; exact when every pair was sampled.
    """

    n_points: int
    n_candidates: int
    symmetric: bool
    fraction: float
    upper: float
    tile: int

    def pairs(self) -> float:
        return self.upper * self.n_points * self.n_candidates

    def bytes(self, method: str = "greedy") -> float:
        """Peak bytes of building and using the cover: 6 per pair when symmetric (the upper triangle kept while
        the full lists are filled), else 8 (the two lists), the offsets, the tiles and one tile row's pairs;
        for lp, the largest class's constraint matrix and HiGHS's copies, about 48 bytes per pair of its rows."""
        pairs = self.pairs()
        per_pair = 6 if self.symmetric else 8
        tile_row_pairs = self.upper * self.tile * self.n_candidates
        total = per_pair * pairs + 16 * (self.n_points + self.n_candidates) + 24 * self.tile**2 + 24 * tile_row_pairs
        if method == "lp":
            total += 48 * pairs
        return total


def estimate_cover(X: np.ndarray, Z: np.ndarray | None, eps: float, metric: str = "l2", seed: int = 0) -> CoverEstimate:
    """:class:`CoverEstimate` of the cover of X by the eps-balls of Z (Z None: of X itself), from one tile of
    randomly sampled points and candidates classified as :func:`ball_cover` does (undecided pairs counted in)."""
    X64 = np.asarray(X, dtype=np.float64)
    symmetric = Z is None
    Z64 = X64 if symmetric else np.asarray(Z, dtype=np.float64)
    n, m = len(X64), len(Z64)
    size = _tile_size(max(n, m), X64.shape[1], metric)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, min(n, size), replace=False))
    columns = np.sort(rng.choice(m, min(m, size), replace=False))
    state = np.asarray(
        _classify(_padded(X64[rows], size), _padded(Z64[columns], size), _threshold(eps, metric), metric)
    )[: len(rows), : len(columns)]
    return _estimate_from_rows(np.mean(state != 0, axis=1), n, m, len(columns), symmetric, size)


def estimate_from_sampled_rows(rows, n_points: int, n_candidates: int, n_sampled: int, tile: int) -> CoverEstimate:
    """:class:`CoverEstimate` of the cover whose boolean rows ``rows(indices)`` returns, from up to ``n_sampled``
    rows drawn at random (every row of a smaller cover), read in blocks of bounded size as
    :meth:`BallCover.from_row_blocks` reads the cover: a cover too large to build is refused without reading
    all of its rows."""
    sample = np.arange(n_points) if n_points <= n_sampled else np.sort(
        np.random.default_rng(0).choice(n_points, n_sampled, replace=False))
    block = _block_rows(n_candidates)
    per_row = np.concatenate([np.mean(rows(sample[start : start + block]), axis=1) for start in range(0, len(sample), block)])
    return _estimate_from_rows(per_row, n_points, n_candidates, n_candidates, False, tile)


def _estimate_from_rows(per_row: np.ndarray, n_points: int, n_candidates: int, n_columns: int, symmetric: bool,
                        tile: int) -> CoverEstimate:
    """:class:`CoverEstimate` from ``per_row``, the share of sampled candidates (``n_columns`` of them) within eps
    of each sampled point (rows sampled without replacement)."""
    rows = len(per_row)
    fraction = float(per_row.mean())
    spread = float(per_row.std(ddof=1)) if rows > 1 else 1.0
    error = 0.0 if (rows == n_points and n_columns == n_candidates) else (
        3 * spread * math.sqrt(max(1 - rows / n_points, 0) / rows))
    if n_columns < n_candidates:
        error += 3 * math.sqrt(fraction * (1 - fraction) / (rows * n_columns))
    return CoverEstimate(n_points, n_candidates, symmetric, fraction, min(1.0, fraction + error), tile)


def _threshold(eps: float, metric: str):
    return jax.device_put(np.float32(_comparison_value(eps, metric)))


def _padded(A: np.ndarray, size: int):
    """A as float32 rows padded with ones (no zero norms) to a multiple of ``size``, on the accelerator."""
    out = np.ones((-(-len(A) // size) * size, A.shape[1]), dtype=np.float32)
    out[: len(A)] = A
    return jnp.asarray(out)


def ball_cover(X: np.ndarray, Z: np.ndarray | None, eps: float, metric: str = "l2") -> BallCover:
    """The cover of the rows of X by the eps-balls (d < eps) of the rows of Z (Z None: of X, the training
    points as candidates), for the l1, l2 or cosine dissimilarity, as a :class:`BallCover`.

    Tiles of float32 dissimilarities (at most 2048 x 2048, a few tens of MiB) are computed on the
    accelerator, only those on and above the diagonal when Z is None (the cover then being symmetric);
    pairs whose float32 value lies within its rounding bound of eps are recomputed in float64 from the
    coordinate differences, so the cover is that of float64 dissimilarities computed pair by pair. Only
    the pairs inside the balls are kept, tile row by tile row: memory is the structure (6 bytes per pair
    while a symmetric one is assembled, then 4; 8 otherwise) plus one tile row's pairs. After each tile row
    the memory still needed to assemble the pairs found so far (a lower bound of what the rest needs) is
    checked against the memory available: InsufficientMemoryError when a cover outgrows its estimate or
    memory is taken meanwhile.
    """
    check_metric(metric)
    X64 = np.asarray(X, dtype=np.float64)
    symmetric = Z is None
    Z64 = X64 if symmetric else np.asarray(Z, dtype=np.float64)
    check_float32_range(X64, "X")
    check_float32_range(Z64, "Z")
    n, m = len(X64), len(Z64)
    threshold = _threshold(eps, metric)
    chunks, tile_row, n_pairs = [], None, 0
    for r, c, n_rows, n_cols, x_tile, z_tile in _tiles(X64, Z64, metric, symmetric):
        if tile_row is None or tile_row[0] != r:
            if tile_row is not None:
                chunks.append(_tile_row_lists(*tile_row))
                n_pairs += len(chunks[-1][2])
                _check_assembly_memory(n_pairs, r, n, eps)
            tile_row = (r, n_rows, [], [])
        host_state = np.asarray(_classify(x_tile, z_tile, threshold, metric))[:n_rows, :n_cols]
        inside = host_state == _COVERED
        i, j = np.divmod(np.flatnonzero(host_state == _AMBIGUOUS), n_cols)
        inside[i, j] = paired_dissimilarity(X64[r + i], Z64[c + j], metric) < eps
        if symmetric and r == c:
            inside = np.triu(inside)
        rows, columns = np.nonzero(inside)
        tile_row[2].append(rows.astype(np.int16))
        tile_row[3].append((columns + c).astype(np.int32))
    if tile_row is not None:
        chunks.append(_tile_row_lists(*tile_row))
        _check_assembly_memory(n_pairs + len(chunks[-1][2]), n, n, eps)
    if symmetric:
        offsets, indices = _mirror_upper(n, chunks)
        return BallCover(n, m, offsets, indices, offsets, indices)
    counts = [np.zeros(1, np.int64)] + [row_counts for _, row_counts, _ in chunks]
    offsets = np.cumsum(np.concatenate(counts))
    candidates = np.concatenate([columns for _, _, columns in chunks]) if chunks else np.zeros(0, np.int32)
    chunks.clear()
    return BallCover(n, m, offsets, candidates, *_transpose_lists(offsets, candidates, m))


@dataclass(frozen=True, eq=False)
class NestedCovers:
    """The covers of n points by their own eps-balls at every radius of an ascending ``grid``, for the cost
    of one pass over the pairs: for each pair inside the largest ball, its rank, the number of radii eps
    with eps <= d (it lies inside the balls of the radii from that index on). The cover at ``grid[k]`` is
    then a filter of the lists, exactly :func:`ball_cover` at that radius.

    The pass computes float64 comparison values (d^2 for l2) of row blocks against all points with the
    error bound of ``_values`` at float64's unit roundoff; a pair whose bound reaches a radius is decided by
    its float64 dissimilarity computed pair by pair, as :func:`ball_cover` decides its undecided pairs.
    Memory: the lists (int32 candidates and an int16 rank per pair, int32 past 32,767 radii) and one
    block of values; :data:`NESTED_BYTES_PER_PAIR` per pair while they are assembled.
    """

    grid: np.ndarray
    point_offsets: np.ndarray
    point_candidates: np.ndarray
    ranks: np.ndarray

    @classmethod
    def build(cls, X: np.ndarray, grid, metric: str = "l2") -> NestedCovers:
        check_metric(metric)
        X64 = np.asarray(X, dtype=np.float64)
        grid = np.asarray(grid, dtype=np.float64)
        if grid.ndim != 1 or len(grid) == 0 or np.any(np.diff(grid) <= 0):
            raise ValueError(f"grid: expected ascending radii, got {grid!r}")
        check_float32_range(X64, "X")  # as ball_cover, so that both refuse the same data
        n, n_features = X64.shape
        thresholds = _comparison_value(grid, metric)
        unit_roundoff = 2.0**-53
        slack = 4.0 * n_features * unit_roundoff * np.abs(thresholds).max()  # the thresholds' part, as in _states
        unit = X64 / np.linalg.norm(X64, axis=1, keepdims=True) if metric == "cosine" else X64
        squares = np.einsum("ij,ij->i", X64, X64)
        rank_type = np.int16 if len(grid) < 2**15 else np.int32
        rows_per_block = max(1, _BLOCK_BYTES // (8 * max(n, 1) * (n_features if metric == "l1" else 3)))
        counts, candidates, ranks = [np.zeros(1, np.int64)], [], []
        for start in range(0, n, rows_per_block):
            block = slice(start, min(start + rows_per_block, n))
            if metric == "l1":
                value = np.abs(X64[block, None, :] - X64[None, :, :]).sum(-1)
                products = (value, np.abs(X64[block]).sum(1)[:, None] + np.abs(X64).sum(1)[None, :] + value)
            else:
                products = (unit[block] @ unit.T, squares[block], squares)
            value, tolerance = _values(products, n_features, metric, unit_roundoff, np)
            tolerance += slack
            rank = np.searchsorted(thresholds, value, side="right")
            undecided = np.searchsorted(thresholds, value - tolerance) != np.searchsorted(thresholds, value + tolerance, side="right")
            i, j = np.nonzero(undecided)
            rank[i, j] = np.searchsorted(grid, _exact_pairs(X64, i + block.start, j, metric), side="right")
            rows, columns = np.nonzero(rank < len(grid))
            counts.append(np.bincount(rows, minlength=block.stop - block.start))
            candidates.append(columns.astype(np.int32))
            ranks.append(rank[rows, columns].astype(rank_type))
        return cls(grid, np.cumsum(np.concatenate(counts)), np.concatenate(candidates), np.concatenate(ranks))

    def at(self, index: int) -> BallCover:
        """The cover at ``grid[index]``."""
        inside = self.ranks <= index
        offsets = np.concatenate([[0], np.cumsum(inside)])[self.point_offsets]
        indices = self.point_candidates[inside]
        n = len(self.point_offsets) - 1
        return BallCover(n, n, offsets, indices, offsets, indices)


NESTED_BYTES_PER_PAIR = 12
"""Bytes per pair that :class:`NestedCovers` holds while assembled: each block's candidates and ranks, and
their concatenation."""

COVER_MEMORY_REMEDY = ("use a smaller eps (fewer pairs within it), fewer candidates (candidates=) or a subsample "
                       "of the training points")
"""What to change when an eps-ball cover would not fit in memory."""

_ASSEMBLY_BYTES_PER_PAIR = 8
"""Bytes per pair found that assembling the cover still allocates: a symmetric cover's mirrored half (4 bytes
per pair, twice), or the candidate-major copy of a rectangular one (int32 indices and their sort order)."""


def _check_assembly_memory(n_pairs: int, rows_done: int, n_rows: int, eps: float) -> None:
    memory.check_memory(
        _ASSEMBLY_BYTES_PER_PAIR * n_pairs,
        f"eps: the eps-ball cover (eps = {eps:.6g}) stopped fitting while being built (larger than estimated, or "
        f"memory taken meanwhile): assembling the {n_pairs} pairs found in the first {rows_done} of {n_rows} rows",
        COVER_MEMORY_REMEDY,
    )


def _tile_row_lists(start: int, n_rows: int, rows: list, columns: list) -> tuple[int, np.ndarray, np.ndarray]:
    """One tile row's pairs as (first row, per-row counts, columns ascending within each row)."""
    rows, columns = np.concatenate(rows), np.concatenate(columns)
    order = np.argsort(rows, kind="stable")  # tiles came left to right, each row-major
    return start, np.bincount(rows, minlength=n_rows), columns[order]


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
    passes over float32 tiles (those of ``cover_matrix``) first count the values in a histogram keyed by
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
        [np.zeros(0)] + [
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


def greedy(cover, y: np.ndarray, n_classes: int, lam: float) -> GreedyPath:
    """The greedy algorithm of sec. 3.2, with the semantics of the authors' R package (protoclass), on a
    :class:`BallCover` (or an n x m boolean matrix) and class codes y in 0..K-1.

    Gains ``gain[l, j]`` = (uncovered class-l points in B(z_j)) - (other-class points in B(z_j))
    (``models.prototype_selection.greedy_gains``); the best (class, candidate) pair, ties to the lowest
    class code and then the lowest candidate index, is added while its gain is at least
    ``gain_threshold(lam)``. Only the newly covered class-l points leave the gains of class l (each
    takes one from every candidate whose ball holds it: the update reads their lists only); wrong
    covers keep counting; a candidate may serve any class. Returns the choices in order with the
    number of own-class points each newly covered and the other-class points in its ball (the
    annotations of the paper's fig. 6).
    """
    if lam < 0:
        raise ValueError(f"lam: the prototype cost must be non-negative, got {lam}")
    if not isinstance(cover, BallCover):
        cover = BallCover.from_dense(cover)
    y = np.asarray(y)
    gains = np.ascontiguousarray(ps_model.greedy_gains(cover.class_counts(y, n_classes)).T)  # (K, m)
    args = np.argmax(gains, axis=1) if cover.n_candidates else np.zeros(n_classes, np.int64)
    tops = gains[np.arange(n_classes), args] if cover.n_candidates else np.zeros(n_classes, np.int64)
    min_gain = ps_model.gain_threshold(lam)
    covered = np.zeros(cover.n_points, dtype=bool)
    path = []
    while len(path) < cover.n_points:
        label = int(np.argmax(tops))
        if tops[label] < min_gain:
            break
        candidate = int(args[label])
        ball = cover.ball(candidate)
        own = y[ball] == label
        newly = ball[own & ~covered[ball]]
        covered[newly] = True
        row = gains[label]
        row -= cover.balls_holding(newly)
        args[label] = np.argmax(row)
        tops[label] = row[args[label]]
        path.append((candidate, label, len(newly), len(ball) - int(np.count_nonzero(own))))
    columns = np.array(path, dtype=np.int64).reshape(-1, 4).T
    return GreedyPath(*columns)


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


def solve_class_lp(cover, y: np.ndarray, label: int, lam: float, counts: np.ndarray | None = None) -> ClassLP:
    """Solve the LP relaxation of eq. 4 for one class with scipy's HiGHS, on a :class:`BallCover` (or a
    boolean matrix); ``counts``: its ``class_counts`` when already at hand.

    Variables alpha_j in [0, 1] for the candidates whose ball holds a point of the class (the others
    are 0 at every optimum) and xi_i in [0, 1] for the class's points; constraints
    xi_i + sum_{j: x_i in B(z_j)} alpha_j >= 1 (a sparse matrix: one entry per point in a ball); costs
    lam + C_l(j) and 1.
    """
    if not isinstance(cover, BallCover):
        cover = BallCover.from_dense(cover)
    y = np.asarray(y)
    if counts is None:
        counts = cover.class_counts(y, int(y.max()) + 1)
    own = cover.rows(np.flatnonzero(y == label))
    costs = ps_model.costs_from_counts(counts, lam)[:, label]
    useful = np.unique(own.indices)
    own_cover = own[:, useful]
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
    alpha = np.zeros(cover.n_candidates)
    alpha[useful] = np.clip(result.x[: len(useful)], 0.0, 1.0)
    xi = np.clip(result.x[len(useful) :], 0.0, 1.0)
    return ClassLP(label, float(result.fun), alpha, xi, costs, own)


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
