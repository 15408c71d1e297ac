"""Prototype selection (Bien & Tibshirani 2011): integer program, greedy semantics, LP rounding, API, inputs."""

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist, pdist
from sklearn.base import clone

from interpretable_zoo.datasets.gaussian_mixture import make_gaussian_mixture
from interpretable_zoo.inference import set_cover
from interpretable_zoo.demos.prototype_selection import cli_demo
from interpretable_zoo.inference.prototype_selection import PrototypeClassifier, select_prototypes
from interpretable_zoo.models import prototype_selection as ps_model


def ball_dissimilarity(balls: dict[int, set[int]], n: int) -> np.ndarray:
    """A dissimilarity whose eps = 1 balls are the given sets: 0 inside the ball of column j, 2 outside."""
    D = np.full((n, n), 2.0)
    for j, members in balls.items():
        D[sorted(members), j] = 0.0
    return D


def reference_greedy(cover, codes, n_classes, lam):
    """The greedy of sec. 3.2 written from its definition: every gain recomputed from scratch at each step."""
    n, m = cover.shape
    covered = np.zeros(n, dtype=bool)
    path = []
    while True:
        best = None
        for label in range(n_classes):
            for j in range(m):
                own = cover[:, j] & (codes == label)
                gain = np.sum(own & ~covered) - np.sum(cover[:, j] & (codes != label))
                if best is None or gain > best[0]:
                    best = (gain, label, j)
        gain, label, j = best
        if gain <= lam:
            return path
        newly = cover[:, j] & (codes == label) & ~covered
        path.append((j, label, int(newly.sum()), int(np.sum(cover[:, j] & (codes != label)))))
        covered |= newly


def random_instance(rng, n, n_classes):
    """Points on a small integer grid (many tied distances) and eps equal to one of the distances."""
    X = rng.integers(0, 4, size=(n, 2)).astype(float)
    codes = np.concatenate([np.arange(n_classes), rng.integers(0, n_classes, n - n_classes)])
    D = cdist(X, X)
    eps = float(rng.choice(np.unique(D)[1:]))
    return D, codes, eps


def brute_force_class_optimum(cover, codes, label, lam):
    """Exact optimum of eq. 4 for one class over all 2^m prototype sets."""
    m = cover.shape[1]
    subsets = (np.arange(2**m)[:, None] >> np.arange(m)) & 1
    own = cover[codes == label].astype(np.int64)
    costs = lam + ps_model.wrong_cover_costs(cover, codes, codes.max() + 1)[:, label]
    values = np.sum(subsets @ own.T == 0, axis=1) + subsets @ costs
    best = int(np.argmin(values))
    assert ps_model.class_objective(cover, codes, subsets[best], label, lam) == pytest.approx(values[best])
    return float(values[best])


# ----------------------------------------------------------------------------- the integer program


def test_objective_equals_sum_of_per_class_objectives():
    rng = np.random.default_rng(0)
    for _ in range(20):
        D, codes, eps = random_instance(rng, 9, 3)
        cover = D < eps
        alpha = rng.integers(0, 2, size=(9, 3))
        total = ps_model.objective(cover, codes, alpha, 0.25)
        per_class = sum(ps_model.class_objective(cover, codes, alpha[:, label], label, 0.25) for label in range(3))
        assert total == pytest.approx(per_class)


def test_integer_program_optimum_decomposes_by_class():
    """Appendix: the optimum of (3a-3b) over all alpha equals the sum of the per-class optima of eq. 4."""
    rng = np.random.default_rng(1)
    for _ in range(3):
        D, codes, eps = random_instance(rng, 6, 2)
        cover = D < eps
        lam = 1 / 6
        joint = min(
            ps_model.objective(cover, codes, np.array(bits).reshape(6, 2), lam)
            for bits in itertools.product((0, 1), repeat=12)
        )
        separate = sum(brute_force_class_optimum(cover, codes, label, lam) for label in range(2))
        assert joint == pytest.approx(separate)


def test_params_validation_and_default_cost():
    assert ps_model.Params(eps=1.0).prototype_cost(8) == pytest.approx(1 / 8)
    assert ps_model.Params(eps=1.0, lam=0.5).prototype_cost(8) == 0.5
    for eps in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="eps"):
            ps_model.Params(eps=eps)
    with pytest.raises(ValueError, match="lam"):
        ps_model.Params(eps=1.0, lam=-0.1)


# ----------------------------------------------------------------------------- greedy semantics


def test_greedy_hand_worked_case():
    """Ties, wrong covers that keep counting, only newly covered points leaving gains, a class-0 point serving class 1.

    Balls (eps = 1, candidates = points), y = 0 0 0 0 1 1 0 0 1 1, lam = 0.1. Step 1: class 0 via
    candidate 1 (gain 4 - 1 = 3), newly covering 0-3 and wrongly covering point 4. Step 2: class 1 via
    candidate 4 (gain 2). Step 3: candidates 7, 8, 9 tie at gain 1 for class 1: the lowest index, 7
    (a class-0 point), covering 8, 9 and wrongly 7. Candidate 6 keeps gain 1 - 1 = 0 because point 4
    still counts against it (a rule that stops charging wrong covers already made would pick it).
    """
    balls = {0: {0, 1, 4}, 1: {0, 1, 2, 3, 4}, 2: {2, 3, 4}, 3: {3}, 4: {4, 5}, 5: {5}, 6: {4, 6}, 7: {7, 8, 9}, 8: {8}, 9: {9}}
    y = np.array([0, 0, 0, 0, 1, 1, 0, 0, 1, 1])
    result = select_prototypes(y=y, dissimilarity=ball_dissimilarity(balls, 10), eps=1.0, lam=0.1)
    assert result.prototypes.tolist() == [1, 4, 7]
    assert result.prototype_classes.tolist() == [0, 1, 1]
    assert result.correct_covers.tolist() == [4, 2, 2]
    assert result.wrong_covers.tolist() == [1, 0, 1]
    # uncovered: points 6 and 7; wrong covers: point 4 (by 1) and point 7 (by 7); three prototypes
    xi, eta = ps_model.slacks(ball_dissimilarity(balls, 10) < 1.0, y, result.alpha)
    assert np.flatnonzero(xi).tolist() == [6, 7] and eta.tolist() == [0, 0, 0, 0, 1, 0, 0, 1, 0, 0]
    assert result.objective == pytest.approx(2 + 2 + 3 * 0.1)
    # a gain equal to lam is not enough: with lam = 1 the three tied gains of 1 are refused
    assert select_prototypes(y=y, dissimilarity=ball_dissimilarity(balls, 10), eps=1.0, lam=1.0).prototypes.tolist() == [1, 4]


def test_greedy_strict_balls_and_class_ties():
    """Balls are strict (d < eps); equal gains go to the lowest class code, then the lowest candidate index."""
    X = np.array([[0.0], [1.0], [2.0], [10.0]])
    y = np.array(["a", "a", "a", "b"])
    wide = select_prototypes(X, y, eps=1.5)
    assert wide.prototypes.tolist() == [1, 3]
    assert wide.correct_covers.tolist() == [3, 1]
    strict = select_prototypes(X, y, eps=1.0)  # d = 1 is not inside: every ball holds its centre only
    assert strict.prototypes.tolist() == [0, 1, 2, 3]
    assert strict.prototype_classes.tolist() == ["a", "a", "a", "b"]
    tie = select_prototypes(np.array([[0.0], [5.0]]), np.array([1, 0]), eps=1.0)
    assert tie.prototypes.tolist() == [1, 0] and tie.prototype_classes.tolist() == [0, 1]


def test_greedy_matches_reference_on_random_tied_instances():
    rng = np.random.default_rng(2)
    for trial in range(40):
        n_classes = 2 + trial % 3
        D, codes, eps = random_instance(rng, int(rng.integers(n_classes + 2, 16)), n_classes)
        lam = float(rng.choice([0.0, 1 / len(codes), 1.0]))
        expected = reference_greedy(D < eps, codes, n_classes, lam)
        for shared in (False, True):  # D is symmetric: the cover sharing its two lists must agree
            path = set_cover.greedy(set_cover.BallCover.from_dense(D < eps, share_symmetric=shared), codes, n_classes, lam)
            got = list(zip(path.candidates.tolist(), path.classes.tolist(), path.new_correct.tolist(), path.wrong.tolist()))
            assert got == expected


# ----------------------------------------------------------------------------- exact optimum on tiny problems


def test_greedy_and_lp_rounding_against_brute_force():
    """n <= 10: LP bound <= integer optimum <= greedy and rounded objectives; rounding within 2 log|X_l| per class."""
    rng = np.random.default_rng(3)
    for trial in range(25):
        n_classes = 2 + trial % 2
        n = int(rng.integers(6, 11))
        D, codes, eps = random_instance(rng, n, n_classes)
        cover = D < eps
        lam = 1 / n
        optima = [brute_force_class_optimum(cover, codes, label, lam) for label in range(n_classes)]
        greedy = select_prototypes(y=codes, dissimilarity=D, eps=eps)
        lp = select_prototypes(y=codes, dissimilarity=D, eps=eps, method="lp", seed=trial)
        assert greedy.objective >= sum(optima) - 1e-9
        assert lp.objective >= sum(optima) - 1e-9
        assert lp.lp_bound <= sum(optima) + 1e-7
        assert greedy.objective >= lp.lp_bound - 1e-7
        for label in range(n_classes):
            relaxation = set_cover.solve_class_lp(cover, codes, label, lam)
            assert relaxation.value <= optima[label] + 1e-7
            chosen = set_cover.round_class_lp(relaxation, np.random.default_rng(trial))
            value = ps_model.class_objective(cover, codes, chosen, label, lam)
            assert optima[label] - 1e-9 <= value <= set_cover.rounding_factor(np.sum(codes == label)) * relaxation.value + 1e-7
        assert lp.objective <= 2 * max(math.log(n), 1.0) * lp.lp_bound + 1e-7
        alpha = lp.alpha
        assert set(np.unique(alpha)) <= {0, 1}
        assert lp.objective == pytest.approx(ps_model.objective(cover, codes, alpha, lam))


def test_lp_rounding_same_seed_same_result():
    data = make_gaussian_mixture(20, seed=4)
    first = select_prototypes(data.X, data.y, eps=0.8, method="lp", seed=7)
    again = select_prototypes(data.X, data.y, eps=0.8, method="lp", seed=7)
    assert first.prototypes.tolist() == again.prototypes.tolist()
    assert first.objective == again.objective
    assert first.lp_bound <= first.objective


# ----------------------------------------------------------------------------- dissimilarities


def exact_dissimilarities(X, Z, metric):
    rows, columns = np.meshgrid(np.arange(len(X)), np.arange(len(Z)), indexing="ij")
    return set_cover.paired_dissimilarity(X[rows.ravel()], Z[columns.ravel()], metric).reshape(len(X), len(Z))


def assert_lists_match(cover, dense):
    """Both lists of a BallCover hold exactly the pairs of ``dense``, ascending, as int32 with int64 offsets."""
    assert np.array_equal(cover.to_dense(), dense)
    expected = set_cover.BallCover.from_dense(dense, share_symmetric=False)
    for name in ("point_offsets", "point_candidates", "ball_offsets", "ball_points"):
        assert np.array_equal(getattr(cover, name), getattr(expected, name)), name
    assert cover.point_candidates.dtype == np.int32 and cover.point_offsets.dtype == np.int64


@pytest.mark.parametrize("metric", ["l1", "l2", "cosine"])
def test_ball_cover_is_exact_at_tied_radius(metric, monkeypatch):
    """The blocked float32 cover, with undecided pairs settled in float64, equals float64 pair-by-pair
    dissimilarities < eps: against other candidates and against the points themselves (upper tiles
    mirrored), in one tile and in tiles of 64 points."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 7))
    Z = np.concatenate([X[:50], rng.normal(size=(40, 7))])
    reference = exact_dissimilarities(X, Z, metric)
    self_reference = exact_dissimilarities(X, X, metric)
    for tiles in ("one", "many"):
        if tiles == "many":
            monkeypatch.setattr(set_cover, "_tile_size", lambda *args: 64)
        for eps in (reference[3, 70], reference[10, 2], np.quantile(reference, 0.1)):
            cover = set_cover.ball_cover(X, Z, eps, metric)
            assert not cover.symmetric
            assert_lists_match(cover, reference < eps)
            own = set_cover.ball_cover(X, None, eps, metric)
            assert own.symmetric
            assert_lists_match(own, self_reference < eps)
    assert not set_cover.ball_cover(X, Z, reference[3, 70], metric).to_dense()[3, 70]


@pytest.mark.parametrize("metric", ["l1", "l2", "cosine"])
def test_nested_covers_equal_the_cover_at_each_radius(metric, monkeypatch):
    """The covers filtered from one pass over the pairs equal ball_cover at every radius of the grid, on
    integer points whose dissimilarities tie with the radii (the quantiles of those same values), in blocks
    of a few rows. The pairs at a radius are decided in float64 pair by pair: the control perturbs those
    values by -1e-9 (ties at the radius then fall inside) and must break the equality."""
    X = np.random.default_rng(2).integers(1, 5, (150, 3)).astype(float)  # no zero row (cosine)
    grid = np.unique(set_cover.dissimilarity_quantiles(X, np.linspace(0.0, 0.5, 11), metric))
    grid = grid[grid > 0]
    expected = [exact_dissimilarities(X, X, metric) < eps for eps in grid]
    monkeypatch.setattr(set_cover, "_BLOCK_BYTES", 8 * 150 * 3 * 7)  # blocks of 7 rows
    decided = []
    exact_pairs = set_cover._exact_pairs
    monkeypatch.setattr(set_cover, "_exact_pairs", lambda *args: decided.append(len(args[1])) or exact_pairs(*args))
    nested = set_cover.NestedCovers.build(X, grid, metric)
    for index, dense in enumerate(expected):
        assert_lists_match(nested.at(index), dense)
    assert sum(decided) > 0
    monkeypatch.setattr(set_cover, "_exact_pairs", lambda *args: exact_pairs(*args) - 1e-9)
    perturbed = set_cover.NestedCovers.build(X, grid, metric)
    assert any(not np.array_equal(perturbed.at(index).to_dense(), dense) for index, dense in enumerate(expected))


def test_cross_validation_selects_as_select_prototypes_does_at_each_radius():
    """The classifier's fold errors and sizes, from one cover per fold, equal those of select_prototypes run
    at each radius of the grid on each fold."""
    from sklearn.model_selection import StratifiedKFold

    data = make_gaussian_mixture(30, seed=4)
    levels = np.linspace(0.0, 0.5, 9)
    classifier = PrototypeClassifier(cv=3, eps_quantiles=levels, progress_bar=False).fit(data.X, data.y)
    codes = np.unique(data.y, return_inverse=True)[1]
    grid = classifier.cv_results_["eps"]
    errors, sizes = np.zeros((3, len(grid))), np.zeros((3, len(grid)))
    for fold, (train, test) in enumerate(StratifiedKFold(3, shuffle=True, random_state=0).split(data.X, codes)):
        for k, eps in enumerate(grid):
            selection = select_prototypes(data.X[train], codes[train], eps=eps)
            sizes[fold, k] = len(selection.prototypes)
            errors[fold, k] = np.mean(selection.predict(data.X[test]) != codes[test]) if sizes[fold, k] else 1.0
    np.testing.assert_array_equal(classifier.cv_results_["mean_error"], errors.mean(0))
    np.testing.assert_array_equal(classifier.cv_results_["mean_prototypes"], sizes.mean(0))
    assert len(set(sizes.mean(0))) > 3  # the radii select different numbers of prototypes


@pytest.mark.parametrize("metric,scipy_name", [("l1", "cityblock"), ("l2", "euclidean"), ("cosine", "cosine")])
def test_features_path_equals_dissimilarity_path(metric, scipy_name):
    data = make_gaussian_mixture(60, seed=6)
    X = data.X + 3.0  # away from the origin, so cosine is meaningful
    D = cdist(X, X, scipy_name)
    eps = float(np.quantile(pdist(X, scipy_name), 0.07))
    assert set_cover.dissimilarity_quantile(X, 0.07, metric) == pytest.approx(eps, rel=1e-12)
    from_features = select_prototypes(X, data.y, eps=eps, metric=metric)
    from_matrix = select_prototypes(y=data.y, dissimilarity=D, eps=eps)
    assert from_features.prototypes.tolist() == from_matrix.prototypes.tolist()
    assert from_features.objective == pytest.approx(from_matrix.objective)
    assert np.array_equal(from_features.predict(X[:50]), from_matrix.predict(dissimilarity=D[:50]))


def test_quantile_matches_r_type7_with_ties():
    X = np.random.default_rng(7).integers(0, 3, size=(40, 3)).astype(float)
    for q in (0.0, 0.05, 0.37, 0.5, 1.0):
        assert set_cover.dissimilarity_quantile(X, q, "l2") == pytest.approx(np.quantile(pdist(X), q), abs=1e-12)
        assert set_cover.dissimilarity_quantile(X, q, "l1") == pytest.approx(np.quantile(pdist(X, "cityblock"), q), abs=1e-12)


@pytest.mark.parametrize("metric,scipy_name", [("l1", "cityblock"), ("l2", "euclidean"), ("cosine", "cosine")])
def test_streamed_quantiles_equal_numpy_on_all_pairs(metric, scipy_name, monkeypatch):
    """Many levels at once, on tie-heavy grid points and on continuous points, in one float32 tile and in
    tiles of 64 points: the two-pass histogram gives exactly the type-7 quantiles of the float64 pair
    dissimilarities."""
    rng = np.random.default_rng(15)
    levels = np.concatenate([np.linspace(0.0, 0.5, 26), [0.9, 1.0]])
    cases = [rng.integers(1, 4, size=(200, 3)).astype(float), rng.normal(size=(300, 4)) + 2.0]
    expected = [np.quantile(pdist(X, scipy_name), levels) for X in cases]
    for tiles in ("one", "many"):
        if tiles == "many":
            monkeypatch.setattr(set_cover, "_tile_size", lambda *args: 64)
        for X, quantiles in zip(cases, expected):
            got = set_cover.dissimilarity_quantiles(X, levels, metric)
            np.testing.assert_allclose(got, quantiles, rtol=1e-13, atol=1e-15)
    assert set_cover.dissimilarity_quantiles(X, [], metric).shape == (0,)


@pytest.mark.parametrize("with_candidates", [False, True])
def test_sparse_greedy_equals_dense_reference_over_many_tiles(with_candidates, monkeypatch):
    """The greedy on the sparse cover built in tiles of 64 points (mirrored when the candidates are the
    points) makes the picks, in order, with the cover counts and objective, of the greedy of sec. 3.2
    written from its definition on the dense float64 cover."""
    monkeypatch.setattr(set_cover, "_tile_size", lambda *args: 64)
    data = make_gaussian_mixture(70, seed=9)
    Z = set_cover.kmeans_candidates(data.X, data.y, n_clusters=4, seed=0) if with_candidates else None
    dense = exact_dissimilarities(data.X, data.X if Z is None else Z, "l2") < 0.6
    lam = 1 / len(data.y)
    result = select_prototypes(data.X, data.y, eps=0.6, candidates=Z)
    expected = reference_greedy(dense, data.y, 3, lam)
    got = list(zip(result.prototypes.tolist(), result.prototype_codes.tolist(), result.correct_covers.tolist(), result.wrong_covers.tolist()))
    assert got == expected and len(expected) > 10
    assert result.objective == pytest.approx(ps_model.objective(dense, data.y, result.alpha, lam))


def test_cover_size_estimate_bounds_the_built_cover(monkeypatch):
    """Small problems are sampled whole (exact share of pairs); larger ones from one tile, with an upper
    bound above the share of the cover then built; the LP needs more than greedy."""
    data = make_gaussian_mixture(70, seed=9)
    small = set_cover.estimate_cover(data.X, None, 0.6)
    built = set_cover.ball_cover(data.X, None, 0.6)
    assert small.fraction == small.upper == built.n_pairs / len(data.X) ** 2
    monkeypatch.setattr(set_cover, "_tile_size", lambda *args: 64)
    for eps in (0.3, 0.6, 1.5):
        sampled = set_cover.estimate_cover(data.X, None, eps)
        actual = set_cover.ball_cover(data.X, None, eps).n_pairs
        assert sampled.fraction < 1 and sampled.pairs() >= actual
        assert sampled.bytes("lp") > sampled.bytes("greedy") >= 6 * actual


def test_eps_covering_everything_warns_with_the_estimate(monkeypatch):
    from interpretable_zoo.inference import prototype_selection

    data = make_gaussian_mixture(20, seed=9)
    monkeypatch.setattr(prototype_selection, "_LARGE_COVER_BYTES", 0)
    with pytest.warns(UserWarning, match=r"^eps: every sampled ball holds every sampled point .* takes about [0-9.]+ KiB"):
        result = select_prototypes(data.X, data.y, eps=100.0)
    assert len(result.prototypes) == 0  # every ball holds 20 points of a class and 40 of the others: no gain
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        select_prototypes(data.X, data.y, eps=0.6)


# ----------------------------------------------------------------------------- predictions and candidates


def test_predict_nearest_prototype_and_ties():
    X = np.array([[0.0], [1.0], [4.0], [5.0]])
    y = np.array([0, 0, 1, 1])
    result = select_prototypes(X, y, eps=1.5)
    assert result.prototypes.tolist() == [0, 2]
    assert result.predict(np.array([[0.4], [2.0], [4.6], [9.0]])).tolist() == [0, 0, 1, 1]  # 2.0: equidistant, lowest index
    D_test = np.abs(np.array([[0.4], [2.0]]) - X.T)
    assert result.predict(dissimilarity=D_test).tolist() == [0, 0]


def test_predict_proba_weighs_each_class_by_its_nearest_prototype():
    """Hand-worked: prototypes 0 (class 0) and 4 (class 1) at eps = 1.5; class 2 selects none."""
    X = np.array([[0.0], [1.0], [4.0], [5.0], [20.0]])
    y = np.array([0, 0, 1, 1, 2])
    result = select_prototypes(X, y, eps=1.5, lam=1.5)  # a lone point covers too little to pay a prototype
    assert result.prototype_classes.tolist() == [0, 1]
    points = np.array([[0.4], [2.0], [4.6], [20.0]])
    d0, d1 = np.abs(points - 0.0).ravel(), np.abs(points - 4.0).ravel()
    expected = np.exp(-(np.stack([d0, d1], 1) - np.minimum(d0, d1)[:, None]) / 1.5)
    expected = np.column_stack([expected / expected.sum(1, keepdims=True), np.zeros(4)])
    np.testing.assert_allclose(result.predict_proba(points), expected)
    np.testing.assert_allclose(result.predict_proba(dissimilarity=np.abs(points - X.T)), expected)
    assert result.predict_proba(points).argmax(1).tolist() == result.predict(points).tolist()


def test_kmeans_candidates_and_rectangular_dissimilarity():
    data = make_gaussian_mixture(40, seed=8)
    Z = set_cover.kmeans_candidates(data.X, data.y, n_clusters=3, seed=0)
    assert Z.shape == (120 + 9, 2)
    from_features = select_prototypes(data.X, data.y, eps=0.7, candidates=Z)
    from_matrix = select_prototypes(y=data.y, dissimilarity=cdist(data.X, Z), eps=0.7, candidates=Z)
    assert from_features.prototypes.tolist() == from_matrix.prototypes.tolist()
    assert from_features.n_candidates == 129
    test = make_gaussian_mixture(30, seed=9, component_means=data.extras["component_means"])
    assert np.array_equal(from_features.predict(test.X), from_matrix.predict(dissimilarity=cdist(test.X, Z)))
    rounded = select_prototypes(data.X, data.y, eps=0.7, candidates=Z, method="lp")
    assert rounded.lp_bound <= rounded.objective <= from_features.objective + len(data.y)
    assert rounded.prototypes.max() < 129


def test_a_given_dissimilarity_too_large_for_its_cover_is_refused_from_a_sample_of_its_rows(monkeypatch):
    """The cover's size is estimated from sampled rows, so a matrix too large for its cover is refused without
    reading all of it; one that fits is then checked whole (a NaN or negative value anywhere is refused)."""
    from interpretable_zoo.inference import memory
    from interpretable_zoo.inference import prototype_selection as selection

    checked = []

    def recorded(value, name, **options):
        checked.append(np.shape(value))
        return check(value, name, **options)

    check = selection.check_real_matrix
    monkeypatch.setattr(selection, "check_real_matrix", recorded)
    n = 20_000
    everything_within_eps = np.broadcast_to(np.float64(0.5), (n, n))  # 4e8 pairs in the cover: about 3 GB
    with pytest.raises(memory.InsufficientMemoryError, match=r"^dissimilarity: the eps-ball cover .* about 100\.0% of"):
        select_prototypes(y=np.arange(n) % 2, dissimilarity=everything_within_eps, eps=1.0, memory_limit=10**9)
    assert sum(rows * columns for rows, columns in checked) == selection.ESTIMATE_ROWS * n
    checked.clear()
    data = make_gaussian_mixture(40, seed=8)
    D = cdist(data.X, data.X)
    monkeypatch.setattr(selection, "ESTIMATE_ROWS", 16)
    result = select_prototypes(y=data.y, dissimilarity=D, eps=0.7)
    assert checked[-1] == D.shape and sum(rows for rows, _ in checked[:-1]) == 16
    assert result.prototypes.tolist() == select_prototypes(data.X, data.y, eps=0.7).prototypes.tolist()
    D[-1, 0] = np.nan
    with pytest.raises(ValueError, match="^dissimilarity: contains NaN"):
        select_prototypes(y=data.y, dissimilarity=D, eps=0.7)


def test_explain_lists_classes_and_cover_counts():
    data = make_gaussian_mixture(30, seed=10)
    result = select_prototypes(data.X, data.y, eps=0.9)
    text = result.explain(max_prototypes=3)
    assert f"{len(result.prototypes)} prototypes" in text
    assert f"{result.correct_covers[0]} ({result.wrong_covers[0]})" in text
    assert sum(result.class_counts().values()) == len(result.prototypes)


@pytest.mark.parametrize("method", ["greedy", "lp"])
def test_explain_frame_and_dict_count_each_ball(method, tmp_path):
    """One row per prototype in selection order; ball sizes recounted here from the distances (strict
    balls); the covered and wrong counts are the text's; a JSON round trip of to_dict."""
    import json

    data = make_gaussian_mixture(30, seed=10)
    result = select_prototypes(data.X, data.y, eps=0.9, method=method)
    names = [f"point {i}" for i in range(len(data.y))]
    frame = result.explain_frame(sample_names=names)
    np.testing.assert_array_equal(frame["candidate"], result.prototypes)
    inside = cdist(data.X, data.X[result.prototypes]) < 0.9
    np.testing.assert_array_equal(frame["ball_size"], inside.sum(0))
    own = data.y[:, None] == result.prototype_classes[None, :]  # a prototype may serve a class not its own
    np.testing.assert_array_equal(frame["wrong"], (inside & ~own).sum(0))
    assert (frame["covered"] <= (inside & own).sum(0)).all()
    assert frame["name"].iloc[0] == f"point {result.prototypes[0]}"
    text = result.explain(max_prototypes=3, sample_names=names)
    assert f"point {result.prototypes[0]} as class {frame['class'].iloc[0]}: {frame['covered'].iloc[0]} " in text
    as_dict = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert [row["prototypes"] for row in as_dict["classes"]] == list(result.class_counts().values())
    assert [row["ball_size"] for row in as_dict["prototypes"]] == inside.sum(0).tolist()
    assert "<table" in result._repr_html_()
    assert str(result).endswith(result.explain()) and repr(result).startswith("<Prototype selection: method: ")
    from interpretable_zoo import load_result, save_result

    save_result(result, tmp_path / "selection.pkl")
    loaded = load_result(tmp_path / "selection.pkl")
    np.testing.assert_array_equal(loaded.predict(data.X), result.predict(data.X))
    assert loaded.explain() == result.explain()


def test_prototype_images_in_selection_order_and_by_class():
    import matplotlib

    matplotlib.use("Agg")
    from interpretable_zoo.diagnostics import plot_prototype_images

    data = make_gaussian_mixture(30, seed=10)
    result = select_prototypes(data.X, data.y, eps=0.9)
    axes = plot_prototype_images(result, (1, 2), columns=5)
    shown = [ax for ax in axes.ravel() if ax.images]
    assert len(shown) == len(result.prototypes)
    assert [ax.get_title() for ax in shown] == [f"{c} ({w})" for c, w in zip(result.correct_covers, result.wrong_covers)]
    by_class = plot_prototype_images(result, (1, 2), by_class=True, columns=8)
    assert by_class.shape == (3, 8)
    for label, row in zip(result.classes, by_class):
        assert sum(bool(ax.images) for ax in row) == min(8, result.class_counts()[label])


# ----------------------------------------------------------------------------- scikit-learn classifier


def test_classifier_one_standard_error_rule_and_sklearn_api():
    data = make_gaussian_mixture(50, seed=11)
    frame = pd.DataFrame(data.X, columns=["u", "v"])
    classifier = PrototypeClassifier(cv=5, eps_quantiles=np.linspace(0.01, 0.4, 12)).fit(frame, data.y)
    assert clone(classifier).get_params()["cv"] == 5
    assert list(classifier.feature_names_in_) == ["u", "v"]
    results = classifier.cv_results_
    grid = np.unique(set_cover.dissimilarity_quantiles(data.X, np.linspace(0.01, 0.4, 12), "l2"))
    np.testing.assert_array_equal(results["eps"], grid)  # the exact quantiles of the training pairs
    best = np.argmin(results["mean_error"])
    chosen = int(np.flatnonzero(results["eps"] == classifier.eps_)[0])
    eligible = results["mean_error"] <= results["mean_error"][best] + results["se_error"][best]
    assert eligible[chosen]
    assert results["mean_prototypes"][chosen] == results["mean_prototypes"][eligible].min()
    assert classifier.predict(frame).shape == (150,)
    probabilities = classifier.predict_proba(frame)
    assert probabilities.shape == (150, 3) and np.allclose(probabilities.sum(1), 1.0)
    np.testing.assert_array_equal(classifier.classes_[probabilities.argmax(1)], classifier.predict(frame))
    refit = PrototypeClassifier(cv=5, eps_quantiles=np.linspace(0.01, 0.4, 12)).fit(frame, data.y)
    assert refit.eps_ == classifier.eps_
    assert refit.selection_.prototypes.tolist() == classifier.selection_.prototypes.tolist()


def test_a_class_smaller_than_cv_lowers_the_folds_with_a_warning():
    """cv = 10 with a class of 4 points: eps is cross-validated over 4 folds, with a warning naming cv; the
    fit is that of cv = 4 (the same folds, eps and prototypes), and a class of 1 point gives 2 folds."""
    data = make_gaussian_mixture(12, seed=5)
    keep = np.flatnonzero(data.y != 2)[:24].tolist() + np.flatnonzero(data.y == 2)[:4].tolist()
    X, y = data.X[keep], data.y[keep]
    with pytest.warns(UserWarning, match=r"^cv: the smallest class has 4 training points, fewer than the 10 .* over 4 folds"):
        lowered = PrototypeClassifier(progress_bar=False).fit(X, y)
    asked = PrototypeClassifier(cv=4, progress_bar=False).fit(X, y)
    assert lowered.eps_ == asked.eps_
    for name in ("mean_error", "se_error", "mean_prototypes"):
        np.testing.assert_array_equal(lowered.cv_results_[name], asked.cv_results_[name])
    assert lowered.selection_.prototypes.tolist() == asked.selection_.prototypes.tolist()
    with pytest.warns(UserWarning, match=r"has 1 training point, .* over 2 folds"):
        PrototypeClassifier(progress_bar=False).fit(X[:25], y[:25])


def test_gaussian_mixture_reproduction():
    """Sec. 6.1: on the three-class mixture, a few prototypes classify nearly as well as 1-NN on all points."""
    train = make_gaussian_mixture(100, seed=12)
    test = make_gaussian_mixture(300, seed=13, component_means=train.extras["component_means"])
    classifier = PrototypeClassifier(cv=5).fit(train.X, train.y)
    error = np.mean(classifier.predict(test.X) != test.y)
    D = cdist(test.X, train.X)
    nn_error = np.mean(train.y[np.argmin(D, axis=1)] != test.y)
    assert len(classifier.selection_.prototypes) <= 0.25 * len(train.y)
    assert error <= nn_error + 0.03


def test_gaussian_mixture_generator():
    data = make_gaussian_mixture(25, seed=3)
    assert data.X.shape == (75, 2) and np.bincount(data.y).tolist() == [25, 25, 25]
    assert data.extras["component_means"].shape == (3, 10, 2)
    assert np.array_equal(make_gaussian_mixture(25, seed=3).X, data.X)
    with pytest.raises(ValueError, match="n_per_class"):
        make_gaussian_mixture(0)


def test_cli_demo_runs_on_wine():
    text = cli_demo()
    assert "Wine" in text and "prototypes" in text


# ----------------------------------------------------------------------------- bad input


def test_bad_input_raises_value_errors_naming_the_argument():
    X = np.random.default_rng(14).normal(size=(6, 2))
    y = np.array([0, 0, 0, 1, 1, 1])
    D = cdist(X, X)
    cases = [
        (dict(X=X, y=y, eps=0.0), "eps"),
        (dict(X=X, y=y, eps=-1.0), "eps"),
        (dict(X=X, y=y, eps=1.0, lam=-1.0), "lam"),
        (dict(y=y, dissimilarity=D[:, :5], eps=1.0), "dissimilarity"),
        (dict(y=y, dissimilarity=np.where(np.eye(6) > 0, np.nan, D), eps=1.0), "dissimilarity"),
        (dict(y=y, dissimilarity=D[0], eps=1.0), "dissimilarity"),
        (dict(X=X, y=y[:5], eps=1.0), "y"),
        (dict(y=y[:5], dissimilarity=D, eps=1.0), "y"),
        (dict(X=X, y=np.zeros(6), eps=1.0), "y"),
        (dict(X=X, y=np.array([0.0, 1, np.nan, 0, 1, 0]), eps=1.0), "y"),
        (dict(X=X, y=None, eps=1.0), "y"),
        (dict(X=np.where(np.eye(6, 2) > 0, np.nan, X), y=y, eps=1.0), "X"),
        (dict(X=X, y=y, eps=1.0, metric="l3"), "metric"),
        (dict(X=X, y=y, eps=1.0, method="anneal"), "method"),
        (dict(X=X, y=y, eps=1.0, candidates=np.zeros((4, 3))), "candidates"),
        (dict(y=y, dissimilarity=D, eps=1.0, candidates=np.zeros((4, 2))), "candidates"),
        (dict(X=np.zeros((6, 2)), y=y, eps=0.5, metric="cosine"), "X"),
        (dict(X=X, y=y, dissimilarity=D, eps=1.0), "exactly one"),
    ]
    for kwargs, name in cases:
        with pytest.raises(ValueError, match=name):
            select_prototypes(**kwargs)
    result = select_prototypes(X, y, eps=1.0)
    with pytest.raises(ValueError, match="dissimilarity"):
        result.predict(dissimilarity=D[:, :3])
    with pytest.raises(ValueError, match="X"):
        result.predict(X[:, :1])
    with pytest.raises(ValueError, match="metric"):
        PrototypeClassifier(metric="chebyshev").fit(X, y)
    with pytest.raises(ValueError, match="q"):
        set_cover.dissimilarity_quantile(X, 1.5)


@pytest.mark.parametrize("metric", ["l1", "l2"])
def test_wine_table2_analogue(metric):
    """Table 2 (wine): PS with cross-validated eps keeps a handful of prototypes (paper: 4 with l2 at 11.9 %
    test error, 3 with l1 at 6.8 %; 1-NN 3.4 %). Standardised features, a stratified 2/3 training split."""
    from sklearn.model_selection import train_test_split
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.preprocessing import StandardScaler

    from interpretable_zoo.datasets import load_wine

    wine = load_wine()
    X_train, X_test, y_train, y_test = train_test_split(wine.X, wine.y, train_size=2 / 3, stratify=wine.y, random_state=0)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    classifier = PrototypeClassifier(metric=metric).fit(X_train, y_train)
    error = np.mean(classifier.predict(X_test) != y_test)
    p = 1 if metric == "l1" else 2
    nn_error = np.mean(KNeighborsClassifier(1, p=p).fit(X_train, y_train).predict(X_test) != y_test)
    assert len(classifier.selection_.prototypes) <= 10
    assert error <= nn_error + 0.10
