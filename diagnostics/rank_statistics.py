"""Rank-normalised split R-hat and bulk effective sample size (Vehtari, Gelman, Simpson, Carpenter and
Buerkner 2021, "Rank-normalization, folding, and localization"), in NumPy.

The tempering engine checks its chains after every round with these two numbers. They are the same
statistics as ``arviz.rhat(method="rank")`` and ``arviz.ess(method="bulk")`` (a test compares them), computed
without importing ArviZ, whose import (with matplotlib) would otherwise be most of a fit's start-up.

Definitions, for draws x of shape (chains M, draws N):
- split: each chain's first and last floor(N / 2) draws become two chains;
- normal scores: z = Phi^-1((r - 3/8) / (S + 1/4)), r the average rank of a draw among all S draws (Blom);
- R-hat of z: sqrt(((N - 1) W + B) / (N W)) with W the mean within-chain variance and B / N the variance
  of the chain means; the rank R-hat is the larger of those of the split z and of the split folded draws
  |x - median(x)| (eqs. 1-4 of the paper with its sec. 4 normalisation);
- bulk ESS: M N / tau of the split z, tau = -1 + 2 sum_t rho_t with the autocorrelations rho_t combined
  over chains (eq. 10) and truncated by Geyer's initial positive and monotone sequences, tau at least
  1 / log10(M N) (as in Stan and ArviZ).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtri

MIN_DRAWS = 4
"""Fewer draws per chain give NaN (and fewer than 2 chains a NaN R-hat), as in ArviZ."""


def _split(draws: np.ndarray) -> np.ndarray:
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half :]], axis=0)


def _blom_scores(counts: np.ndarray, size: int) -> np.ndarray:
    """Blom's normal score of each group of tied draws, ``counts`` the draws of each group in ascending order of
    their value among ``size`` draws: the groups' average ranks, Phi^-1 computed once per group."""
    ends = np.cumsum(counts)
    average_ranks = (ends - counts + 1 + ends) / 2  # ranks ends - counts + 1 .. ends, 1-based
    return ndtri((average_ranks - 3 / 8) / (size + 1 / 4))


def _distinct_values(ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the first index of each run of equal values in sorted ``ordered``, the runs' lengths)."""
    starts_group = np.empty(ordered.size, dtype=bool)
    starts_group[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts_group[1:])
    starts = np.flatnonzero(starts_group)
    return starts, np.diff(np.append(starts, ordered.size))


def _normal_scores(draws: np.ndarray) -> np.ndarray:
    """Blom's normal scores of the draws' average ranks among all draws. A summary with few distinct values (a
    list's length) looks each draw's value up among them, which costs a sort and a binary search instead of an
    indirect sort."""
    ordered = np.sort(draws.ravel())
    return _normal_scores_of_groups(draws, ordered, *_distinct_values(ordered))


def _normal_scores_of_groups(draws: np.ndarray, ordered: np.ndarray, starts: np.ndarray, counts: np.ndarray):
    """:func:`_normal_scores` of ``draws`` whose values sorted are ``ordered``, with runs of equal values that
    start at ``starts`` and have ``counts`` draws (:func:`_distinct_values`)."""
    flat = draws.ravel()
    group_scores = _blom_scores(counts, flat.size)
    if starts.size * FEW_DISTINCT_VALUES <= flat.size:
        return group_scores[np.searchsorted(ordered[starts], flat)].reshape(draws.shape)
    scores = np.empty(flat.size)
    scores[np.argsort(flat)] = np.repeat(group_scores, counts)  # any order of ties: one score each
    return scores.reshape(draws.shape)


def _scores_and_folded_scores(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The normal scores of the draws and of the folded draws |x - median(x)|. With few distinct values the
    folded draws' distinct values are those of the draws folded, so their ranks follow from the draws' groups
    without a second sort."""
    flat = draws.ravel()
    ordered = np.sort(flat)
    starts, counts = _distinct_values(ordered)
    median = (ordered[(flat.size - 1) // 2] + ordered[flat.size // 2]) / 2  # as np.median
    if starts.size * FEW_DISTINCT_VALUES > flat.size:
        return _normal_scores_of_groups(draws, ordered, starts, counts), _normal_scores(np.abs(draws - median))
    group = np.searchsorted(ordered[starts], flat)
    folded_values, folded_group = np.unique(np.abs(ordered[starts] - median), return_inverse=True)
    folded_counts = np.bincount(folded_group, weights=counts, minlength=folded_values.size)
    scores = _blom_scores(counts, flat.size)[group]
    folded_scores = _blom_scores(folded_counts, flat.size)[folded_group[group]]
    return scores.reshape(draws.shape), folded_scores.reshape(draws.shape)


FEW_DISTINCT_VALUES = 16
""":func:`_normal_scores` looks the draws up among their distinct values when there are at most one per
this many draws (a binary search then costs less than an indirect sort)."""


def _potential_scale_reduction(draws: np.ndarray) -> float:
    n = draws.shape[1]
    within = draws.var(axis=1, ddof=1).mean()
    between_over_n = draws.mean(axis=1).var(ddof=1)
    return math.sqrt((within * (n - 1) / n + between_over_n) / within)


def _usable(draws, min_chains: int) -> np.ndarray | None:
    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim != 2:
        raise ValueError(f"draws: expected a (chain, draw) array, got shape {draws.shape}")
    if draws.shape[0] < min_chains or draws.shape[1] < MIN_DRAWS or not np.isfinite(draws).all():
        return None
    return draws


def rank_rhat(draws) -> float:
    """Rank-normalised split R-hat of (chain, draw) draws: the larger of the bulk and the folded (tail)
    R-hat; NaN for fewer than 2 chains or 4 draws, or non-finite draws."""
    draws = _usable(draws, min_chains=2)
    if draws is None:
        return math.nan
    return _rank_rhat_of_scores(*_scores_and_folded_scores(_split(draws)))


def _rank_rhat_of_scores(scores: np.ndarray, folded_scores: np.ndarray) -> float:
    """The rank R-hat of split chains whose normal scores are ``scores``, and those of the folded draws
    ``folded_scores``."""
    return max(_potential_scale_reduction(scores), _potential_scale_reduction(folded_scores))


def _mean_autocovariance(draws: np.ndarray) -> np.ndarray:
    """(N,) autocovariance at lags 0..N-1 (divisor N) averaged over the chains, by FFT: the chains' power
    spectra are averaged before the one inverse transform (the transform is linear)."""
    n = draws.shape[1]
    centred = draws - draws.mean(axis=1, keepdims=True)
    spectrum = np.fft.rfft(centred, n=2 * n, axis=1)
    return np.fft.irfft((spectrum.real**2 + spectrum.imag**2).mean(axis=0), n=2 * n)[:n] / n


def _autocorrelation_time(draws: np.ndarray) -> float:
    """tau of eq. (10) with Geyer's truncation. The pair sums S_p = rho_2p + rho_2p+1 are taken in turn
    while the last one taken is positive (and lag 2p + 1 < N - 1); those before the last one taken count in
    full, made non-increasing (initial monotone sequence), and the last one taken adds its even term once
    (when S_p >= 0 or rho_2p > 0)."""
    n_chains, n = draws.shape
    autocovariance = _mean_autocovariance(draws)
    within = autocovariance[0] * n / (n - 1)  # mean within-chain variance (ddof = 1)
    pooled = within * (n - 1) / n + (draws.mean(axis=1).var(ddof=1) if n_chains > 1 else 0.0)
    rho = 1.0 - (within - autocovariance) / pooled
    rho[0] = 1.0
    pairs = n // 2
    sums = rho[0 : 2 * pairs : 2] + rho[1 : 2 * pairs : 2]
    taken = 0  # pairs taken after the first
    while 2 * taken + 1 < n - 3 and sums[taken] > 0:
        taken += 1
    if taken == 0:
        return 0.0  # -1 + rho_0
    even = rho[2 * taken]
    tail = even if sums[taken] >= 0 or even > 0 else 0.0
    return -1.0 + 2.0 * np.minimum.accumulate(sums[:taken]).sum() + tail


def bulk_ess(draws) -> float:
    """Bulk effective sample size of (chain, draw) draws (normal scores of the split chains); the number
    of draws when they are all equal; NaN for fewer than 4 draws or non-finite draws."""
    draws = _usable(draws, min_chains=1)
    if draws is None:
        return math.nan
    if np.ptp(draws) < np.finfo(np.float64).resolution:
        return float(draws.size)
    return _bulk_ess_of_scores(_normal_scores(_split(draws)))


def _bulk_ess_of_scores(scores: np.ndarray) -> float:
    """Bulk ESS of split chains whose normal scores are ``scores``."""
    return scores.size / max(_autocorrelation_time(scores), 1.0 / math.log10(scores.size))


def rank_rhat_and_bulk_ess(draws) -> tuple[float, float]:
    """(:func:`rank_rhat`, :func:`bulk_ess`) of (chain, draw) draws, ranking the split chains once for both
    (the engine's convergence test asks for both after its chunks)."""
    usable = _usable(draws, min_chains=1)
    if usable is None or usable.shape[0] < 2:
        return rank_rhat(draws), bulk_ess(draws)
    if np.ptp(usable) < np.finfo(np.float64).resolution:
        return rank_rhat(usable), float(usable.size)
    scores, folded_scores = _scores_and_folded_scores(_split(usable))
    return _rank_rhat_of_scores(scores, folded_scores), _bulk_ess_of_scores(scores)
