"""Prototype selection for interpretable classification (Bien & Tibshirani 2011): the public layer.

``select_prototypes`` solves the integer program of ``interpretable_zoo.models.prototype_selection``
by the greedy algorithm (sec. 3.2) or the LP relaxation with randomized rounding (sec. 3.1) and
returns a :class:`PrototypeSelection` that predicts by the nearest prototype (eq. 1) and explains
itself; :class:`PrototypeClassifier` is the scikit-learn estimator, choosing eps by cross-validation
with the one-standard-error rule (sec. 6.4).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.validation import check_is_fitted

from interpretable_zoo.inference import memory, progress, set_cover
from interpretable_zoo.inference.estimators import ExplainedEstimatorMixin, atomic_fit
from interpretable_zoo.inference.explanation import ExplainedResultMixin, records
from interpretable_zoo.inference.validation import (
    check_estimator_input,
    check_flag,
    check_positive_int,
    check_real_matrix,
    encode_labels,
    numeric_matrix,
)
from interpretable_zoo.models import prototype_selection as ps_model

METHODS = ("greedy", "lp")


@dataclass(frozen=True, eq=False, repr=False)
class PrototypeSelection(ExplainedResultMixin):
    """A selected prototype set.

    ``prototypes`` are candidate indices (rows of X, or of ``candidates`` when given; columns of the
    dissimilarity matrix), in the order greedy chose them (for ``lp``: by class, then index), with
    ``prototype_classes`` their class labels. ``correct_covers[k]`` counts the points of prototype k's
    class that it newly covered when chosen (greedy; the annotations of the paper's fig. 6) or that
    lie in its ball (lp); ``wrong_covers[k]`` counts the points of other classes in its ball.
    ``ball_sizes[k]`` counts the training points in prototype k's ball (every class).
    ``objective`` is the value of the integer program (3a-3b); ``lp_bound`` the LP relaxation's optimum (lp only).

    Example:
        >>> data = iz.datasets.make_gaussian_mixture(20, seed=0)  # 60 points of three classes in the plane
        >>> selection = iz.select_prototypes(data.X, data.y, eps=1.0)
        >>> selection.prototypes[:3], selection.prototype_classes[:3]  # the first prototypes chosen: rows of X
        (array([21,  3, 40]), array([1, 0, 2]))
        >>> selection.class_counts()
        {0: 3, 1: 3, 2: 5}
        >>> selection.predict(data.X[:3])  # the class of the nearest prototype
        array([0, 0, 0])
    """

    params: ps_model.Params
    lam: float
    method: str
    metric: str | None
    classes: np.ndarray
    prototypes: np.ndarray
    prototype_codes: np.ndarray
    correct_covers: np.ndarray
    wrong_covers: np.ndarray
    ball_sizes: np.ndarray
    objective: float
    lp_bound: float | None
    n_candidates: int
    train_class_counts: np.ndarray
    candidate_points: np.ndarray | None

    @property
    def eps(self) -> float:
        return self.params.eps

    @property
    def prototype_classes(self) -> np.ndarray:
        return self.classes[self.prototype_codes]

    @property
    def alpha(self) -> np.ndarray:
        """The 0/1 matrix alpha[j, l] of the integer program, 1 where candidate j is a prototype of class l."""
        alpha = np.zeros((self.n_candidates, len(self.classes)), dtype=np.int64)
        alpha[self.prototypes, self.prototype_codes] = 1
        return alpha

    def class_counts(self) -> dict:
        """Number of prototypes of each class (the paper's table 1)."""
        counts = np.bincount(self.prototype_codes, minlength=len(self.classes))
        return {label: int(count) for label, count in zip(self.classes.tolist(), counts)}

    def _prototype_distances(self, X, dissimilarity) -> tuple[np.ndarray, np.ndarray]:
        """(distances (n, k) of each point to every prototype, the prototypes' class codes (k,)), the
        prototypes ordered by candidate index and, for a candidate chosen for several classes, by the
        order it was chosen in: the order in which predict breaks ties."""
        if len(self.prototypes) == 0:
            raise ValueError(
                "no prototypes were selected (eps too large for these classes); predict needs at least one"
            )
        order = np.lexsort((np.arange(len(self.prototypes)), self.prototypes))
        columns = self.prototypes[order]
        if (X is None) == (dissimilarity is None):
            raise ValueError("predict needs exactly one of X (features) or dissimilarity (test x candidate matrix)")
        if dissimilarity is not None:
            dissimilarity = check_real_matrix(dissimilarity, "dissimilarity", nonnegative=True)
            if dissimilarity.shape[1] != self.n_candidates:
                raise ValueError(
                    f"dissimilarity: needs one column per candidate ({self.n_candidates}), got {dissimilarity.shape[1]}"
                )
            return dissimilarity[:, columns], self.prototype_codes[order]
        if self.candidate_points is None:
            raise ValueError("X: this selection was fitted from a dissimilarity matrix; predict from dissimilarity=")
        X = check_real_matrix(X, "X")
        if X.shape[1] != self.candidate_points.shape[1]:
            raise ValueError(f"X: needs {self.candidate_points.shape[1]} columns, got {X.shape[1]}")
        return set_cover.pairwise_dissimilarity(X, self.candidate_points[columns], self.metric), self.prototype_codes[order]

    def predict(self, X=None, *, dissimilarity=None) -> np.ndarray:
        """Class of the nearest prototype (eq. 1), from features X or a test-by-candidate dissimilarity matrix.

        Ties between equally near prototypes go to the lowest candidate index, and a candidate chosen
        for several classes predicts the class it was chosen for first.
        """
        distances, codes = self._prototype_distances(X, dissimilarity)
        return self.classes[codes[np.argmin(distances, axis=1)]]

    def predict_proba(self, X=None, *, dissimilarity=None) -> np.ndarray:
        """(n, classes) probabilities from each class's nearest prototype, a convention of ours (the paper
        classifies only): p_c(x) proportional to exp(-(d_c(x) - d_min(x)) / eps), d_c the distance to the
        nearest prototype of class c, so a class whose nearest prototype lies one ball radius farther than
        the nearest of all weighs e^-1 as much; 0 for a class without prototypes. The most probable class is
        the prediction, up to ties. Arguments as :meth:`predict`.
        """
        distances, codes = self._prototype_distances(X, dissimilarity)
        nearest = np.full((len(distances), len(self.classes)), np.inf)
        for code in np.unique(codes):
            nearest[:, code] = distances[:, codes == code].min(axis=1)
        gap = nearest - nearest.min(axis=1, keepdims=True)
        weights = np.exp(-gap / self.eps)
        return weights / weights.sum(axis=1, keepdims=True)

    def class_frame(self) -> pd.DataFrame:
        """Per class: its training points and its prototypes (the paper's table 1)."""
        return pd.DataFrame(
            {"training_points": self.train_class_counts, "prototypes": list(self.class_counts().values())},
            index=pd.Index(self.classes, name="class"),
        )

    def explain_frame(self, sample_names=None) -> pd.DataFrame:
        """The prototypes in selection order (index ``rank`` from 1; ``lp``: by class): ``candidate`` (its
        index), ``name`` (from ``sample_names``, indexed by candidate, else ``candidate <index>``),
        ``class``, ``ball_size`` (training points within eps), ``covered`` (points of its class it newly
        covered when chosen, greedy; in its ball, lp) and ``wrong`` (points of other classes in its ball)."""
        names = [f"candidate {i}" if sample_names is None else str(sample_names[i]) for i in self.prototypes]
        return pd.DataFrame(
            {
                "candidate": self.prototypes,
                "name": names,
                "class": self.prototype_classes,
                "ball_size": self.ball_sizes,
                "covered": self.correct_covers,
                "wrong": self.wrong_covers,
            },
            index=pd.RangeIndex(1, len(self.prototypes) + 1, name="rank"),
        )

    def explain(self, max_prototypes: int = 15, sample_names=None) -> str:
        """Prototypes per class, and the first prototypes in selection order with their cover counts (the
        rows of :meth:`class_frame` and :meth:`explain_frame`)."""
        lines = [
            f"Prototype selection (Bien & Tibshirani 2011), {self.method}: {len(self.prototypes)} prototypes "
            f"at eps = {self.eps:.6g}, lambda = {self.lam:.4g}; objective {self.objective:.4f}"
            + ("" if self.lp_bound is None else f" (LP bound {self.lp_bound:.4f})"),
            f"{'class':>12} {'training points':>16} {'prototypes':>11}",
        ]
        for label, row in self.class_frame().iterrows():
            lines.append(f"{str(label):>12} {row['training_points']:>16} {row['prototypes']:>11}")
        frame = self.explain_frame(sample_names).head(max_prototypes)
        heading = "in greedy order" if self.method == "greedy" else "by class"
        lines.append(f"First {len(frame)} prototypes {heading} (points of its class covered, other classes covered):")
        for rank, row in frame.iterrows():
            lines.append(f"  {rank:>3}. {row['name']} as class {row['class']!s}: {row['covered']} ({row['wrong']})")
        return "\n".join(lines)

    def to_dict(self, sample_names=None) -> dict:
        """The prototypes (``prototypes``, :meth:`explain_frame`) and classes (``classes``) with the
        selection's facts, JSON-ready."""
        return {
            "model": "prototype selection",
            "method": self.method,
            "eps": self.eps,
            "lambda": self.lam,
            "objective": self.objective,
            "lp_bound": self.lp_bound,
            "classes": records(self.class_frame()),
            "prototypes": records(self.explain_frame(sample_names)),
        }

    def _card(self):
        facts = {"method": self.method, "eps": self.eps, "prototypes": f"{len(self.prototypes)} of {self.n_candidates} candidates",
                 "objective": self.objective, **{f"class {k}": v for k, v in self.class_counts().items()}}
        return "Prototype selection", facts, self.explain_frame(), None


def _check_features(array, name: str, metric: str) -> np.ndarray:
    """Features ``array`` checked as a matrix whose float32 dissimilarities ``metric`` are defined."""
    array = check_real_matrix(array, name)
    set_cover.check_float32_range(array, name)
    if metric == "cosine" and np.any(np.linalg.norm(array, axis=1) == 0):
        raise ValueError(f"{name}: the cosine dissimilarity needs rows that are not all zero")
    return array


def _length(value, name: str) -> int:
    try:
        return len(value)
    except TypeError:
        raise ValueError(f"{name}: expected a sequence, got {type(value).__name__}") from None


def _check_choice(value, name: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}: must be one of {choices}, got {value!r}")
    return value


_LARGE_COVER_BYTES = 1 << 30  # a cover this large whose sampled balls hold every point gets a warning


def _check_cover_memory(estimate: set_cover.CoverEstimate, eps: float, method: str, argument: str,
                        bytes_per_pair: float = 0.0) -> None:
    """InsufficientMemoryError (with the estimate and what to change) when the cover of ``estimate``, with
    ``bytes_per_pair`` more for each of its pairs, would not fit; a warning when every sampled ball held
    every sampled point of a large cover (eps far too large)."""
    needed = estimate.bytes(method) + bytes_per_pair * estimate.pairs()
    what = (
        f"{argument}: the eps-ball cover of prototype selection ({method}; {estimate.n_points} points x "
        f"{estimate.n_candidates} candidates, about {estimate.fraction:.1%} of the pairs within eps = {eps:.6g})"
    )
    memory.check_memory(
        needed,
        what,
        set_cover.COVER_MEMORY_REMEDY,
    )
    if estimate.fraction >= 1.0 and needed >= _LARGE_COVER_BYTES:
        warnings.warn(
            f"eps: every sampled ball holds every sampled point ({what} takes about {memory.format_bytes(needed)}); "
            "such an eps makes every candidate cover (almost) everything; choose a smaller eps, e.g. a low quantile "
            "of set_cover.dissimilarity_quantiles",
            stacklevel=3,
        )


ESTIMATE_ROWS = 4096
"""Rows of a given dissimilarity matrix read to estimate its cover (all of them in a smaller matrix)."""


@memory.honours_limit
def select_prototypes(
    X=None,
    y=None,
    *,
    dissimilarity=None,
    eps: float,
    lam: float | None = None,
    method: str = "greedy",
    candidates=None,
    metric: str = "l2",
    seed: int = 0,
    memory_limit: int | None = None,
) -> PrototypeSelection:
    """Select prototypes for each class (Bien & Tibshirani 2011, integer program 3a-3b).

    Give either features ``X`` (n x p; dissimilarities ``metric`` = "l1", "l2" or "cosine" are computed
    in blocks) or ``dissimilarity`` (n x m, training points by candidates). Candidates are the training
    points, or the rows of ``candidates`` (m x p, with X; any set of m with a dissimilarity). ``eps`` is
    the ball radius (balls are strict: d < eps), ``lam`` the cost per prototype (default 1/n).
    ``method`` is "greedy" (sec. 3.2, the authors' semantics) or "lp" (per-class LP relaxation solved by
    HiGHS, then randomized rounding of sec. 3.1 drawn from ``seed``).
    ``memory_limit``: the bytes the fit's memory estimate may reach (None: the memory available); settings
    whose estimate exceeds it are refused before any work, naming them.

    Example:
        >>> data = iz.datasets.make_gaussian_mixture(20, seed=0)  # 60 points of three classes in the plane
        >>> selection = iz.select_prototypes(data.X, data.y, eps=1.0)
        >>> selection
        <Prototype selection: method: greedy; eps: 1; prototypes: 11 of 60 candidates; objective: 12.18; class 0: 3; class 1: 3; class 2: 5>
        >>> selection.explain_frame().head(3)  # in greedy order; covered: points of its class it newly covered
              candidate          name  class  ball_size  covered  wrong
        rank
        1            21  candidate 21      1         10       10      0
        2             3   candidate 3      0          8        8      0
        3            40  candidate 40      2          7        7      0
    """
    params = ps_model.Params(eps=eps, lam=lam)
    _check_choice(method, "method", METHODS)
    check_positive_int(seed, "seed", minimum=0)
    if (X is None) == (dissimilarity is None):
        raise ValueError("give exactly one of X (features) or dissimilarity (training x candidate matrix)")
    if dissimilarity is not None:
        dissimilarity = numeric_matrix(dissimilarity, "dissimilarity")
        n, m = dissimilarity.shape
        if candidates is None and n != m:
            raise ValueError(
                f"dissimilarity: must be square when the candidates are the training points, got shape {(n, m)}; "
                "pass candidates= for a training x candidate matrix"
            )
        if candidates is not None and _length(candidates, "candidates") != m:
            raise ValueError(f"candidates: has {len(candidates)} entries for {m} dissimilarity columns")
        classes, codes = encode_labels(y, n, "prototype selection")
        estimate = set_cover.estimate_from_sampled_rows(  # the sampled rows checked as the whole matrix is below
            lambda rows: check_real_matrix(dissimilarity[rows], "dissimilarity", nonnegative=True) < params.eps,
            n, m, ESTIMATE_ROWS, tile=min(n, 4096),
        )
        _check_cover_memory(estimate, params.eps, method, "dissimilarity")
        dissimilarity = check_real_matrix(dissimilarity, "dissimilarity", nonnegative=True)
        cover = set_cover.BallCover.from_row_blocks(
            lambda start, stop: dissimilarity[start:stop] < params.eps, n, m, share_symmetric=candidates is None
        )
        metric, candidate_points = None, None
    else:
        set_cover.check_metric(metric)
        X = _check_features(X, "X", metric)
        classes, codes = encode_labels(y, len(X), "prototype selection")
        candidate_points = X if candidates is None else _check_features(candidates, "candidates", metric)
        if candidate_points.shape[1] != X.shape[1]:
            raise ValueError(f"candidates: needs {X.shape[1]} columns like X, got {candidate_points.shape[1]}")
        argument = "X" if candidates is None else "candidates"
        Z = None if candidates is None else candidate_points
        estimate = set_cover.estimate_cover(X, Z, params.eps, metric)
        _check_cover_memory(estimate, params.eps, method, argument)
        cover = set_cover.ball_cover(X, Z, params.eps, metric)
    return _selection_from_cover(cover, classes, codes, params, method, metric, seed, candidate_points)


def _selection_from_cover(cover, classes, codes, params: ps_model.Params, method: str, metric, seed: int,
                          candidate_points) -> PrototypeSelection:
    """The prototypes chosen on the eps-ball ``cover`` of the training points (class ``codes`` into
    ``classes``) by ``method``: the work of :func:`select_prototypes` once the cover is built."""
    n_classes = len(classes)
    cost = params.prototype_cost(len(codes))
    lp_bound = None
    if method == "greedy":
        path = set_cover.greedy(cover, codes, n_classes, cost)
        prototypes, prototype_codes = path.candidates, path.classes
        correct, wrong = path.new_correct, path.wrong
    else:
        rng = np.random.default_rng(seed)
        counts = cover.class_counts(codes, n_classes)
        chosen, lp_bound = [], 0.0
        for label in range(n_classes):
            lp = set_cover.solve_class_lp(cover, codes, label, cost, counts)
            lp_bound += lp.value
            chosen.append(np.flatnonzero(set_cover.round_class_lp(lp, rng)))
        prototypes = np.concatenate(chosen).astype(np.int64)
        prototype_codes = np.repeat(np.arange(n_classes), [len(c) for c in chosen])
        correct = counts[prototypes, prototype_codes].astype(np.int64)
        wrong = cover.ball_sizes()[prototypes] - correct
    used = np.unique(prototypes)  # the objective needs only the chosen candidates' columns
    alpha = np.zeros((len(used), n_classes), dtype=np.int64)
    alpha[np.searchsorted(used, prototypes), prototype_codes] = 1
    return PrototypeSelection(
        params=params,
        lam=cost,
        method=method,
        metric=metric,
        classes=classes,
        prototypes=prototypes,
        prototype_codes=prototype_codes,
        correct_covers=correct,
        wrong_covers=wrong,
        ball_sizes=cover.ball_sizes()[prototypes].astype(np.int64),
        objective=ps_model.objective(cover.columns(used), codes, alpha, cost),
        lp_bound=lp_bound,
        n_candidates=cover.n_candidates,
        train_class_counts=np.bincount(codes, minlength=n_classes),
        candidate_points=candidate_points,
    )


class PrototypeClassifier(ExplainedEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Nearest-prototype classifier of Bien & Tibshirani (2011) for scikit-learn.

    With ``eps=None`` the ball radius is chosen by ``cv``-fold stratified cross-validation (fewer folds,
    with a warning, when the smallest class has fewer than ``cv`` points) over the ``eps_quantiles``
    quantiles (levels in [0, 1]; default 0, 0.02, ..., 0.5) of the training dissimilarities (pairs
    i < j), with the one-standard-error rule (sec. 6.4): among the radii whose mean error is within one
    standard error of the smallest, the one giving the fewest prototypes (ties: the larger radius); radii
    at which some fold or the training set selects no prototype are no candidates. The quantiles are exact
    (those of float64 dissimilarities, R's type 7) and streamed (:func:`~interpretable_zoo.inference.set_cover.dissimilarity_quantiles`),
    and each fold selects its prototypes from its own features, so no n x n matrix of dissimilarities is
    ever held. One pass over a fold's pairs serves every radius of the grid
    (:class:`~interpretable_zoo.inference.set_cover.NestedCovers`).
    ``progress_bar`` counts the cross-validation's selections (None: a bar outside CI).
    After ``fit``: ``eps_``, ``selection_`` (a :class:`PrototypeSelection`), ``classes_``,
    ``cv_results_`` (eps, mean_error, se_error, mean_prototypes) when eps was cross-validated.

    Example:
        >>> data = iz.datasets.make_gaussian_mixture(20, seed=0)  # 60 points of three classes in the plane
        >>> clf = iz.PrototypeClassifier(cv=3, progress_bar=False).fit(data.X, data.y)  # eps by cross-validation
        >>> round(clf.eps_, 2), clf.selection_.class_counts()
        (1.98, {0: 1, 1: 1, 2: 3})
        >>> clf.selection_
        <Prototype selection: method: greedy; eps: 1.979; prototypes: 5 of 60 candidates; objective: 17.08; class 0: 1; class 1: 1; class 2: 3>
        >>> clf.score(data.X, data.y)
        0.85
    """

    def __init__(
        self,
        eps: float | None = None,
        lam: float | None = None,
        metric: str = "l2",
        method: str = "greedy",
        eps_quantiles=None,
        cv: int = 10,
        seed: int = 0,
        progress_bar: bool | None = None,
    ):
        self.eps = eps
        self.lam = lam
        self.metric = metric
        self.method = method
        self.eps_quantiles = eps_quantiles
        self.cv = cv
        self.seed = seed
        self.progress_bar = progress_bar

    @atomic_fit
    def fit(self, X, y):
        if self.eps is not None:
            ps_model.check_radius(self.eps)
        ps_model.check_cost(self.lam)
        set_cover.check_metric(self.metric)
        _check_choice(self.method, "method", METHODS)
        check_positive_int(self.seed, "seed", minimum=0)
        if self.progress_bar is not None:
            check_flag(self.progress_bar, "progress_bar")
        X = _check_features(check_estimator_input(self, X, reset=True), "X", self.metric)
        classes, codes = encode_labels(y, len(X), "prototype selection")
        if self.eps is None:
            self.eps_, self.cv_results_ = self._cross_validate(X, codes, self._quantile_levels(), self._folds(codes))
        else:
            self.eps_ = float(self.eps)
        self.selection_ = select_prototypes(
            X, classes[codes], eps=self.eps_, lam=self.lam, method=self.method, metric=self.metric, seed=self.seed
        )
        self.classes_ = classes
        return self

    def _quantile_levels(self) -> np.ndarray:
        if self.eps_quantiles is None:
            return np.linspace(0.0, 0.5, 26)
        levels = np.asarray(self.eps_quantiles)
        if levels.ndim != 1 or levels.size == 0 or levels.dtype.kind not in "iuf":
            raise ValueError(f"eps_quantiles: must be a non-empty 1-D sequence of numbers, got {self.eps_quantiles!r}")
        if not np.all((levels >= 0) & (levels <= 1)):
            raise ValueError(f"eps_quantiles: quantile levels must lie in [0, 1], got {levels.tolist()}")
        return levels.astype(np.float64)

    def _folds(self, codes: np.ndarray) -> int:
        """``cv`` checked (at least 2 folds), and lowered, with a warning, to the points of the smallest class
        (at least 2) when that class has fewer: every fold then holds out a point of it where it can, and
        scikit-learn's own cross-validated estimators also warn and go on rather than refuse."""
        folds = check_positive_int(self.cv, "cv", minimum=2)
        smallest = int(np.bincount(codes).min())
        if folds > smallest:
            used = max(smallest, 2)
            warnings.warn(
                f"cv: the smallest class has {smallest} training point{'s' if smallest > 1 else ''}, fewer than the "
                f"{folds} stratified folds asked for; eps is cross-validated over {used} folds instead (or give eps)",
                UserWarning,
                stacklevel=3,
            )
            return used
        return folds

    def _cross_validate(self, X: np.ndarray, codes: np.ndarray, levels: np.ndarray, n_folds: int) -> tuple[float, dict]:
        grid = np.unique(set_cover.dissimilarity_quantiles(X, levels, self.metric))
        grid = grid[grid > 0]
        if len(grid) == 0:
            if set_cover.dissimilarity_quantile(X, 1.0, self.metric) == 0:
                raise ValueError("X: every pair of training points is at dissimilarity 0; no eps to cross-validate")
            raise ValueError(
                f"eps_quantiles: the dissimilarity quantiles at levels {levels.tolist()} are all 0 (duplicate training "
                "points); choose larger levels"
            )
        folds = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=self.seed)
        errors = np.zeros((n_folds, len(grid)))
        sizes = np.zeros((n_folds, len(grid)))
        bar = progress.bar(self.progress_bar, "cross-validating eps", total=n_folds * len(grid), unit=" selections")
        try:
            for fold, (train, test) in enumerate(folds.split(X, codes)):
                for k, selection in enumerate(self._selections_over(X[train], codes[train], grid)):
                    sizes[fold, k] = len(selection.prototypes)
                    errors[fold, k] = np.mean(selection.predict(X[test]) != codes[test]) if sizes[fold, k] else 1.0
                    if bar is not None:
                        bar.update()
        finally:
            if bar is not None:
                bar.close()
        mean, se = errors.mean(axis=0), errors.std(axis=0, ddof=1) / np.sqrt(n_folds)
        # a radius at which some fold, or the whole training set, selects no prototype predicts nothing
        classifies = (sizes > 0).all(axis=0) & np.array([len(selection.prototypes) > 0
                                                          for selection in self._selections_over(X, codes, grid)])
        if not classifies.any():
            raise ValueError(
                f"eps_quantiles: at every radius tried some fold or the training set selects no prototype "
                f"(lam={self.lam}); choose smaller quantile levels or a smaller lam"
            )
        best = int(np.argmin(np.where(classifies, mean, np.inf)))
        eligible = np.flatnonzero(classifies & (mean <= mean[best] + se[best]))
        mean_sizes = sizes.mean(axis=0)
        chosen = eligible[np.lexsort((-grid[eligible], mean_sizes[eligible]))[0]]
        results = {"eps": grid, "mean_error": mean, "se_error": se, "mean_prototypes": mean_sizes}
        return float(grid[chosen]), results

    def _selections_over(self, X: np.ndarray, codes: np.ndarray, grid: np.ndarray):
        """``select_prototypes(X, codes, eps=eps, ...)`` for each eps of the ascending ``grid``, one after
        the other, from one pass over the pairs (:class:`~interpretable_zoo.inference.set_cover.NestedCovers`):
        the same selections for the cost of one cover instead of one per eps."""
        classes, train_codes = encode_labels(codes, len(X), "prototype selection")
        estimate = set_cover.estimate_cover(X, None, grid[-1], self.metric)
        _check_cover_memory(estimate, grid[-1], self.method, "X", set_cover.NESTED_BYTES_PER_PAIR)
        covers = set_cover.NestedCovers.build(X, grid, self.metric)
        for index, eps in enumerate(grid):
            yield _selection_from_cover(covers.at(index), classes, train_codes,
                                        ps_model.Params(eps=eps, lam=self.lam), self.method, self.metric, self.seed, X)

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self, "selection_")
        return self.selection_.predict(check_real_matrix(check_estimator_input(self, X, reset=False), "X"))

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities from the distances to each class's nearest prototype
        (:meth:`PrototypeSelection.predict_proba`), columns in the order of ``classes_``."""
        check_is_fitted(self, "selection_")
        return self.selection_.predict_proba(check_real_matrix(check_estimator_input(self, X, reset=False), "X"))

    def explain(self, max_prototypes: int = 15) -> str:
        check_is_fitted(self, "selection_")
        return self.selection_.explain(max_prototypes)
