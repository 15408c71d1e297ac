"""The datasets subpackage: data-folder resolution, bundled and file-based loaders, preprocessing helpers."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse

from interpretable_zoo import datasets as ds

# --- where the data lives -------------------------------------------------------------------------------


def test_data_home_argument_beats_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("INTERPRETABLE_ZOO_DATA", "/somewhere/else")
    assert ds.resolve_data_home(tmp_path) == tmp_path
    assert ds.resolve_data_home() == Path("/somewhere/else")


def test_data_home_unset_names_argument_and_variable(monkeypatch):
    monkeypatch.delenv("INTERPRETABLE_ZOO_DATA", raising=False)
    with pytest.raises(ds.DataHomeMissing, match="data_home") as error:  # a ValueError
        ds.resolve_data_home()
    assert isinstance(error.value, ValueError)
    assert "INTERPRETABLE_ZOO_DATA" in str(error.value)


def test_missing_file_names_file_and_data_home(tmp_path):
    with pytest.raises(FileNotFoundError, match="recipes/ingredlist") as error:
        ds.load_recipes(data_home=tmp_path)
    assert str(tmp_path) in str(error.value)


@pytest.mark.parametrize("loader", [ds.load_usps, ds.load_titanic])
def test_unknown_split_is_rejected_before_reading(loader, tmp_path):
    with pytest.raises(ValueError, match="split"):
        loader(split="validation", data_home=tmp_path)


def test_dataset_checks_lengths():
    with pytest.raises(ValueError, match="feature_names"):
        ds.Dataset("bad", np.zeros((2, 3)), None, ("a", "b"), None, None)
    with pytest.raises(ValueError, match="y has 3"):
        ds.Dataset("bad", np.zeros((2, 2)), np.zeros(3), ("a", "b"), None, None)
    with pytest.raises(ValueError, match="sample_names"):
        ds.Dataset("bad", np.zeros((2, 2)), None, ("a", "b"), None, ("r",))


# --- bundled --------------------------------------------------------------------------------------------


def test_titanic_table_counts():
    titanic = ds.load_titanic_table()
    assert titanic.X.shape == (2201, 3) and titanic.y.shape == (2201,)
    assert titanic.y.sum() == 711
    survivors = titanic.X[titanic.y == 1].value_counts()
    assert survivors[("crew", "adult", "female")] == 20
    assert survivors[("1st", "child", "male")] == 5
    assert (titanic.X["class"] == "crew").sum() == 885
    assert (titanic.X["age"] == "child").sum() == 109


@pytest.mark.parametrize(
    ("loader", "shape", "n_classes"),
    [(ds.load_digits, (1797, 64), 10), (ds.load_wine, (178, 13), 3), (ds.load_breast_cancer, (569, 30), 2)],
)
def test_sklearn_bundles(loader, shape, n_classes):
    data = loader()
    assert data.X.shape == shape
    assert len(data.feature_names) == shape[1]
    assert len(data.target_names) == n_classes
    assert set(np.unique(data.y)) == set(range(n_classes))


# --- files in the data folder ---------------------------------------------------------------------------


def test_usps(data_home):
    train = ds.load_usps("train", data_home)
    test = ds.load_usps("test", data_home)
    assert train.X.shape == (7291, 256) and train.X.dtype == np.float32
    assert test.X.shape == (2007, 256) and test.y.shape == (2007,)
    assert np.bincount(train.y).tolist() == [1194, 1005, 731, 658, 652, 556, 664, 645, 542, 644]
    assert 0.0 <= train.X.min() and train.X.max() <= 1.0
    binned = ds.bin_levels(train.X, 7)
    assert binned.min() == 0 and binned.max() == 6


def test_recipes(data_home):
    recipes = ds.load_recipes(data_home)
    assert recipes.X.shape == (56, 147)
    assert set(np.unique(recipes.X)) == {0, 1}
    assert len(recipes.feature_names) == 147 and recipes.feature_names[0] == "zest"
    assert np.bincount(recipes.y).tolist() == [24, 22, 5, 5]
    for name, code in zip(recipes.sample_names, recipes.y):
        category = recipes.target_names[code]
        assert category.removesuffix("s") in name.lower(), (name, category)


def test_zoo(data_home):
    zoo = ds.load_zoo(data_home)
    counts = ds.load_zoo(data_home, binary=False)
    assert zoo.X.shape == (101, 16) and set(np.unique(zoo.X)) == {0, 1}
    assert isinstance(counts.X, pd.DataFrame) and counts.X["legs"].max() == 8
    legs = zoo.feature_names.index("legs")
    np.testing.assert_array_equal(zoo.X[:, legs], counts.X["legs"] > 0)
    assert np.bincount(zoo.y).tolist() == [41, 20, 5, 13, 4, 8, 10]
    assert zoo.target_names[zoo.y[zoo.sample_names.index("aardvark")]] == "mammal"
    assert zoo.target_names[zoo.y[zoo.sample_names.index("bass")]] == "fish"


def test_animals50(data_home):
    animals = ds.load_animals50(data_home)
    assert animals.X.shape == (50, 85) and set(np.unique(animals.X)) == {0, 1}
    assert animals.y is None
    assert animals.sample_names[:2] == ("antelope", "grizzly+bear")
    assert animals.feature_names[:2] == ("black", "white") and len(animals.feature_names) == 85


def test_titanic_split_partitions_the_table(data_home):
    train = ds.load_titanic("train", data_home)
    test = ds.load_titanic("test", data_home)
    assert train.X.shape == (1761, 3) and test.X.shape == (440, 3)
    assert train.y.sum() == 582
    assert ds.one_hot(train.X)[1] == ds.one_hot(test.X)[1]
    combined = pd.concat([train.X, test.X]).assign(survived=np.concatenate([train.y, test.y]))
    table = ds.load_titanic_table()
    pd.testing.assert_series_equal(
        combined.value_counts().sort_index(),
        table.X.assign(survived=table.y).value_counts().sort_index(),
    )


def test_tictactoe(data_home):
    games = ds.load_tictactoe(data_home)
    assert games.X.shape == (958, 9) and games.feature_names[0] == "c1"
    assert set(games.X["c5"].cat.categories) == {"x", "o", "b"}
    assert games.y.sum() == 626


def test_mushroom(data_home):
    mushrooms = ds.load_mushroom(data_home)
    assert mushrooms.X.shape == (8124, 22) and "edibility" not in mushrooms.X
    assert mushrooms.y.sum() == 3916 and mushrooms.target_names == ("edible", "poisonous")


def test_adult(data_home):
    # The shared file is the copy with missing-value rows removed (30162 of the 32561 UCI training rows).
    adult = ds.load_adult(data_home)
    assert adult.X.shape == (30162, 14) and "income" not in adult.X
    assert adult.y.sum() == 7508
    assert adult.X["age"].dtype == np.int64
    assert set(adult.X["sex"].cat.categories) == {"Female", "Male"}


def test_movielens(data_home):
    movies = ds.load_movielens(data_home)
    assert isinstance(movies.X, scipy.sparse.csr_matrix) and movies.X.shape == (1682, 943)
    assert movies.X.nnz == 55375 and set(movies.X.data) == {1.0}
    assert movies.y.shape == (1682, 19) and movies.y.sum(axis=0)[movies.target_names.index("Drama")] == 725
    assert movies.sample_names[0] == "Toy Story (1995)"
    toy_story = {name for name, flag in zip(movies.target_names, movies.y[0]) if flag}
    assert toy_story == {"Animation", "Children's", "Comedy"}
    assert movies.sample_names[542] == "Misérables, Les (1995)"


def test_nell_merges_duplicated_phrases(data_home):
    nell = ds.load_nell(data_home)
    lines = ds.load_nell(data_home, merge_duplicates=False)
    assert isinstance(lines.X, scipy.sparse.csr_matrix) and lines.X.shape == (229897, 5548)
    assert lines.X.nnz == 557495 and set(lines.X.data) == {1.0}
    assert len(lines.sample_names) == 229897 and len(set(lines.sample_names)) == 228161
    # merged: one item per phrase, in first-occurrence order, with the union of its lines' contexts
    assert isinstance(nell.X, scipy.sparse.csr_matrix) and nell.X.shape == (228161, 5548)
    assert len(set(nell.sample_names)) == len(nell.sample_names) == 228161 and set(nell.X.data) == {1.0}
    item_of_line = nell.extras["item_of_line"]
    assert [nell.sample_names[item] for item in item_of_line] == list(lines.sample_names)
    union = (scipy.sparse.csr_matrix((np.ones(229897), (item_of_line, np.arange(229897)))) @ lines.X) > 0
    assert (union != (nell.X > 0)).nnz == 0
    assert (lines.X != nell.X[item_of_line]).nnz == 0  # the shared file's repeated lines have identical contexts
    for data in (nell, lines):
        seeds = data.extras["seed_sets"]
        assert sorted(seeds) == ["class_seed_set_01", "class_seed_set_02", "class_seed_set_03"]
        countries = seeds["class_seed_set_01"]
        assert countries.phrases[:2] == ("india", "china") and countries.missing == ()
        for seed in seeds.values():
            assert [data.sample_names[index] for index in seed.indices] == list(seed.phrases)
        assert seeds["class_seed_set_03"].missing == ("intertia",)  # a misspelling in the seed file
    with pytest.raises(ValueError, match="merge_duplicates"):
        ds.load_nell(data_home, merge_duplicates="yes")


# --- preprocessing --------------------------------------------------------------------------------------


def test_bin_levels_hand_worked():
    X = np.array([[0.0, 0.1, 0.5], [0.99, 1.0, 0.34]])
    np.testing.assert_array_equal(ds.bin_levels(X, 3), [[0, 0, 1], [2, 2, 1]])
    shifted = np.array([[-1.0, -0.5, 0.0, 0.49, 1.0]])
    np.testing.assert_array_equal(ds.bin_levels(shifted, 4, low=-1.0, high=1.0), [[0, 1, 2, 2, 3]])


@pytest.mark.parametrize(
    ("X", "kwargs", "named"),
    [
        ([[0.5]], {"n_bins": 1}, "n_bins"),
        ([[0.5]], {"n_bins": 2.5}, "n_bins"),
        ([[0.5]], {"n_bins": 3, "low": 1.0, "high": 0.0}, "low"),
        ([[0.5]], {"n_bins": 3, "high": np.nan}, "high"),
        ([[np.nan]], {"n_bins": 3}, "X contains NaN"),
        ([0.5, 0.2], {"n_bins": 3}, "X must be 2-D"),
        ([[1.5]], {"n_bins": 3}, "X has values outside"),
        ([["a"]], {"n_bins": 3}, "X must be numeric"),
    ],
)
def test_bin_levels_rejects_bad_input(X, kwargs, named):
    with pytest.raises(ValueError, match=named):
        ds.bin_levels(X, **kwargs)


def test_binarize_is_strict():
    binary = ds.binarize(np.array([[0.5, 0.51], [0.0, 1.0]]), 0.5)
    assert binary.dtype == np.uint8
    np.testing.assert_array_equal(binary, [[0, 1], [0, 1]])


def test_binarize_rejects_bad_input():
    with pytest.raises(ValueError, match="threshold"):
        ds.binarize([[0.5]], np.nan)
    with pytest.raises(ValueError, match="X must be 2-D"):
        ds.binarize(np.zeros((2, 2, 2)), 0.5)


def test_one_hot_frame_keeps_category_order_and_unused_levels():
    frame = pd.DataFrame(
        {"sex": ["male", "female", "male"], "age": pd.Categorical(["adult"] * 3, categories=["adult", "child"])}
    )
    items, names = ds.one_hot(frame)
    assert names == ("sex=female", "sex=male", "age=adult", "age=child")
    assert items.dtype == np.uint8
    np.testing.assert_array_equal(items, [[0, 1, 1, 0], [1, 0, 1, 0], [0, 1, 1, 0]])


def test_one_hot_negations_and_array_columns():
    frame = pd.DataFrame({"sex": ["male", "female", "male"], "other": [1, 2, 3]})
    items, names = ds.one_hot(frame, frame.columns[:1], negations=True)
    assert names == ("sex=female", "sex=male", "sex!=female", "sex!=male")
    np.testing.assert_array_equal(items, [[0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0]])
    items, names = ds.one_hot(np.array([["x", "o"], ["b", "x"]]), [1])
    assert names == ("x1=o", "x1=x")
    np.testing.assert_array_equal(items, [[1, 0], [0, 1]])


@pytest.mark.parametrize(
    ("data", "columns", "named"),
    [
        (pd.DataFrame({"sex": ["male"]}), ["age"], "columns"),
        (pd.DataFrame({"sex": ["male"]}), "sex", "columns"),
        (pd.DataFrame({"sex": ["male"]}), [], "columns is empty"),
        (pd.DataFrame({"sex": ["male"]}), ["sex", "sex"], "columns repeats"),
        (pd.DataFrame({"sex": ["male", None]}), None, "frame_or_array has missing values"),
        (np.array(["a", "b"]), None, "frame_or_array must be"),
    ],
)
def test_one_hot_rejects_bad_input(data, columns, named):
    with pytest.raises(ValueError, match=named):
        ds.one_hot(data, columns)
