"""Prototype selection as a prize-collecting set cover (Bien & Tibshirani 2011, sec. 2.3).

This method is an optimisation problem, not a Bayesian model, so the file holds the integer program
instead of a NumPyro program. Notation of the paper: training points x_1..x_n with classes y_i,
candidate prototypes z_1..z_m (the training points themselves unless other candidates are given),
the ball B(z_j) = {x_i : d(x_i, z_j) < eps} (strict inequality), and alpha[j, l] = 1 when z_j is
chosen as a prototype of class l. Integer program (3a-3b)::

    minimise   sum_i xi_i + sum_i eta_i + lam * sum_{j,l} alpha[j, l]
    s.t.       sum_{j: x_i in B(z_j)} alpha[j, y_i] >= 1 - xi_i                (3a)
               sum_{j: x_i in B(z_j)} sum_{l != y_i} alpha[j, l] <= 0 + eta_i  (3b)
               alpha[j, l] in {0, 1},  xi_i, eta_i >= 0.

At the optimum xi_i = 1[x_i is not covered by a prototype of its own class] and eta_i counts the
prototypes of other classes covering x_i (:func:`slacks`). The program separates by class (eq. 4), each
class a prize-collecting set cover (:func:`class_objective`).

The functions below score any candidate prototype set; both solvers (greedy and LP rounding in
``interpretable_zoo.inference.set_cover``) and the tests use them. They take the cover matrix
``cover[i, j] = d(x_i, z_j) < eps`` (n x m, boolean, dense or scipy sparse with one stored entry per
point in a ball) and class codes ``y`` in 0..K-1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np
import scipy.sparse


@dataclass(frozen=True)
class Params:
    """Parameters of the integer program (3a-3b).

    Attributes:
        eps: radius of the covering balls B(z_j) = {x : d(x, z_j) < eps}; the method's one tuning parameter.
        lam: cost of adding a prototype (the lambda of eq. 3 and 4); None means 1/n, the paper's default
            (sec. 2.3), which makes sparsity a tie-breaker between solutions equal on properties (a) and (b).
    """

    eps: float
    lam: float | None = None

    def __post_init__(self) -> None:
        check_radius(self.eps)
        check_cost(self.lam)

    def prototype_cost(self, n_points: int) -> float:
        """lambda of eq. 3 and 4: ``lam``, or 1/n when it is None."""
        return 1.0 / n_points if self.lam is None else float(self.lam)


def _is_real(value) -> bool:
    """A real number (Python or NumPy), not a bool, a string or None."""
    return isinstance(value, Real) and not isinstance(value, (bool, np.bool_))


def check_radius(eps) -> float:
    """``eps`` as a float; ValueError naming it unless it is a positive finite number."""
    if not _is_real(eps) or not np.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps: the ball radius must be a positive finite number, got {eps!r}")
    return float(eps)


def check_cost(lam) -> float | None:
    """``lam`` as a float (or None); ValueError naming it unless it is None or a non-negative finite number."""
    if lam is not None and (not _is_real(lam) or not np.isfinite(lam) or lam < 0):
        raise ValueError(f"lam: the prototype cost must be None or a non-negative finite number, got {lam!r}")
    return None if lam is None else float(lam)


def class_cover_counts(cover: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """(m, K) int32 matrix: the number of class-l training points in the ball of candidate z_j."""
    y = np.asarray(y)
    if scipy.sparse.issparse(cover):
        cover = scipy.sparse.csr_matrix(cover)
        columns = [np.bincount(cover[y == label].indices, minlength=cover.shape[1]) for label in range(n_classes)]
        return np.stack(columns, axis=1).astype(np.int32)
    cover = np.asarray(cover, dtype=bool)
    columns = [np.add.reduce(cover[y == label].view(np.uint8), axis=0, dtype=np.int32) for label in range(n_classes)]
    return np.stack(columns, axis=1)


def wrong_cover_costs(cover: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """C_l(j) of eq. 4 as an (m, K) integer matrix: points of classes other than l in the ball of z_j."""
    return wrong_costs_from_counts(class_cover_counts(cover, y, n_classes))


def wrong_costs_from_counts(counts: np.ndarray) -> np.ndarray:
    """:func:`wrong_cover_costs` from the (m, K) :func:`class_cover_counts`: the ball's points less its class-l points."""
    counts = np.asarray(counts)
    return counts.sum(axis=1, keepdims=True) - counts


def set_costs(cover: np.ndarray, y: np.ndarray, n_classes: int, lam: float) -> np.ndarray:
    """lam + C_l(j) of eq. 4 as an (m, K) float64 matrix: the cost of making z_j a prototype of class l."""
    return costs_from_counts(class_cover_counts(cover, y, n_classes), lam)


def costs_from_counts(counts: np.ndarray, lam: float) -> np.ndarray:
    """:func:`set_costs` from the (m, K) :func:`class_cover_counts`."""
    return lam + wrong_costs_from_counts(counts).astype(np.float64)


def greedy_gains(counts):
    """(m, K) decrease of the objective (3a-3b), before the cost lam, when z_j becomes a prototype of class l:
    the class-l points it newly covers minus C_l(j), from ``counts`` (m, K), the not yet covered class-l
    points in each ball (:func:`class_cover_counts` at the start; NumPy or JAX arrays)."""
    return 2 * counts - counts.sum(axis=1, keepdims=True)


def gain_threshold(lam: float) -> int:
    """The smallest integer gain that lowers the objective, gain - lam > 0: floor(lam) + 1."""
    return math.floor(lam) + 1


def coverage_counts(cover: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """(n, K) integer matrix: how many prototypes of each class cover each training point."""
    alpha = np.asarray(alpha, dtype=np.float64)
    chosen = np.flatnonzero(alpha.any(axis=1))
    columns = cover[:, chosen] if scipy.sparse.issparse(cover) else np.asarray(cover)[:, chosen]
    counts = columns.astype(np.float64) @ alpha[chosen]
    return np.rint(np.asarray(counts)).astype(np.int64)


def slacks(cover: np.ndarray, y: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slacks of (3a-3b) at their optimum for prototype set ``alpha`` (m x K, 0/1), as (xi, eta).

    xi_i = 1 where x_i has no prototype of its own class within eps; eta_i = the number of
    prototypes of other classes whose balls hold x_i.
    """
    counts = coverage_counts(cover, alpha)
    own = counts[np.arange(len(y)), np.asarray(y)]
    return (own == 0).astype(np.int64), counts.sum(axis=1) - own


def objective(cover: np.ndarray, y: np.ndarray, alpha: np.ndarray, lam: float) -> float:
    """Objective of the integer program (3a-3b) at prototype set ``alpha`` (m x K, 0/1), slacks at their optimum."""
    xi, eta = slacks(cover, y, alpha)
    return float(xi.sum() + eta.sum() + lam * np.asarray(alpha).sum())


def class_objective(cover: np.ndarray, y: np.ndarray, alpha_l: np.ndarray, label: int, lam: float) -> float:
    """Objective of class ``label``'s prize-collecting set cover (eq. 4) at prototypes ``alpha_l`` (m, 0/1).

    The integer program (3a-3b) separates by class (eq. 4): for class l::

        minimise   sum_{i: y_i = l} xi_i + sum_j alpha[j, l] * (lam + C_l(j))
        s.t.       sum_{j: x_i in B(z_j)} alpha[j, l] >= 1 - xi_i  for every i with y_i = l,

    with C_l(j) = ``|B(z_j) minus class l|`` the number of points of other classes in z_j's ball
    (:func:`wrong_cover_costs`): a prize-collecting set cover with set costs lam + C_l(j) (:func:`set_costs`)
    and a unit penalty per uncovered point.

    ``alpha_l`` may be fractional (an LP point); the uncovered penalty is then max(0, 1 - coverage),
    the smallest slack xi_i the constraint allows.
    """
    cover = np.asarray(cover, dtype=bool)
    y = np.asarray(y)
    n_classes = max(int(y.max()) + 1, label + 1)
    costs = set_costs(cover, y, n_classes, lam)[:, label]
    return class_objective_given_costs(cover[y == label].astype(np.float64), costs, alpha_l)


def class_objective_given_costs(own_cover, costs: np.ndarray, alpha_l) -> float:
    """Eq. 4's objective from the class's rows of the cover matrix ``own_cover`` (n_l x m, dense or sparse),
    the set costs ``costs`` (m,) of :func:`set_costs` and prototypes ``alpha_l`` (m,), slacks at their smallest."""
    alpha_l = np.asarray(alpha_l, dtype=np.float64)
    slack = np.maximum(0.0, 1.0 - own_cover @ alpha_l)
    return float(slack.sum() + costs @ alpha_l)
