"""Loaders for the real data files in the data folder (see `resolve_data_home`); nothing is downloaded."""

from __future__ import annotations

import csv
import os
from typing import NamedTuple

import h5py
import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse

from .base import DataFile, Dataset, data_file
from .bundled import TITANIC_LEVELS, TITANIC_SURVIVAL, titanic_frame

DataHome = str | os.PathLike | None

SPLITS = ("train", "test")

RECIPE_CATEGORIES = {"pasta": 24, "chili": 22, "brownies": 5, "punch": 5}
"""Recipe category -> number of consecutive rows in the recipes file, in file order."""

ZOO_ATTRIBUTES = (
    "hair", "feathers", "eggs", "milk", "airborne", "aquatic", "predator", "toothed",
    "backbone", "breathes", "venomous", "fins", "legs", "tail", "domestic", "catsize",
)  # fmt: skip
ZOO_TYPES = ("mammal", "bird", "reptile", "fish", "amphibian", "insect", "invertebrate")

MOVIELENS_GENRES = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary",
    "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi",
    "Thriller", "War", "Western",
)  # fmt: skip
MOVIELENS_LIKED_ABOVE = 3
"""A rating above this counts as liking the movie."""

NELL_SEED_SETS = ("class_seed_set_01", "class_seed_set_02", "class_seed_set_03")
NELL_SHAPE = (229897, 5548)
"""Lines of the phrase file (rows of the matrix, before duplicated phrases are merged) x contexts."""

USPS_SIZES = {"train": 7291, "test": 2007}
TITANIC_SIZES = {"train": 1761, "test": 440}
MOVIELENS_SIZES = (100000, 943, 1682)
"""Ratings, users and movies of MovieLens 100k."""

ADULT_COLUMNS = (
    "age", "type_employer", "fnlwgt", "education", "education_num", "marital", "occupation", "relationship",
    "race", "sex", "capital_gain", "capital_loss", "hr_per_week", "country", "income",
)  # fmt: skip
ADULT_INTEGER_COLUMNS = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hr_per_week")


class SeedSet(NamedTuple):
    """A NELL seed query: the phrases found among the items, their item indices, and the phrases that match no item.

    Example:
        ``load_nell`` gives one per seed file in ``extras["seed_sets"]``; a hand-made one, to show the fields:

        >>> import numpy as np
        >>> seeds = iz.datasets.SeedSet(("force", "mass"), np.array([3224, 4675]), missing=("intertia",))
        >>> seeds._fields
        ('phrases', 'indices', 'missing')
        >>> phrases, indices, missing = seeds  # a named tuple
        >>> indices.tolist(), missing
        ([3224, 4675], ('intertia',))
    """

    phrases: tuple[str, ...]
    indices: np.ndarray
    missing: tuple[str, ...]


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def _file(dataset: str, relative_path: str, data_home: DataHome) -> DataFile:
    return DataFile(dataset, data_file(relative_path, data_home))


def _read_lines(file: DataFile, encoding: str = "utf-8") -> tuple[str, ...]:
    with file.reading():
        return tuple(file.path.read_text(encoding=encoding).splitlines())


def _read_names(file: DataFile, count: int, *, numbered: bool = False) -> tuple[str, ...]:
    """``count`` non-empty names (stripped), one per line, or from lines ``<number><tab><name>`` when ``numbered``."""
    lines = _read_lines(file)
    file.require(len(lines) == count, f"has {len(lines)} lines, expected {count} names")
    if numbered:
        fields = [line.split("\t") for line in lines]
        file.require(all(len(f) == 2 for f in fields), "has lines that are not <number><tab><name>")
        lines = [f[1] for f in fields]
    names = tuple(line.strip() for line in lines)
    file.require(all(names), "has empty names")
    return names


def _binary_table(file: DataFile, shape: tuple[int, int], **loadtxt) -> np.ndarray:
    """A whitespace- or comma-separated 0/1 table of the given shape, as uint8."""
    with file.reading():
        values = np.loadtxt(file.path, dtype=np.float64, ndmin=2, **loadtxt)
    file.require(values.shape == shape, "holds a {} x {} table, expected {} x {}".format(*values.shape, *shape))
    file.require(np.isin(values, (0.0, 1.0)).all(), "has values other than 0 and 1")
    return values.astype(np.uint8)


def _read_csv(file: DataFile, **options) -> pd.DataFrame:
    with file.reading():
        return pd.read_csv(file.path, **options)


def _require_columns(file: DataFile, table: pd.DataFrame, columns) -> None:
    """``columns`` present and without missing values."""
    missing = [column for column in columns if column not in table.columns]
    file.require(not missing, f"lacks the columns {missing} (has {list(table.columns)[:25]})")
    file.require(not table[list(columns)].isna().any().any(), "has missing values (short or empty lines)")


def _require_integers(file: DataFile, table: pd.DataFrame, columns, low: int, high: int | None = None) -> None:
    """Every value of ``columns`` an integer in low..high (no upper limit when ``high`` is None)."""
    expected = f"integers >= {low}" if high is None else f"integers in {low}..{high}"
    for column in columns:
        values = table[column]
        valid = pd.api.types.is_integer_dtype(values) and (values >= low).all()
        file.require(
            valid and (high is None or (values <= high).all()), f"column {column!r} has values that are not {expected}"
        )


def _require_rows(file: DataFile, n_rows: int, expected: int, what: str) -> None:
    file.require(n_rows == expected, f"has {n_rows} {what}, expected {expected}")


def _label_codes(file: DataFile, labels: pd.Series, levels: tuple) -> np.ndarray:
    """The position of each label in ``levels``; DataFileError naming the file for a label outside them."""
    unknown = sorted(map(str, set(labels[~labels.isin(levels)])))
    file.require(not unknown, f"has labels {unknown[:10]} outside {levels}")
    return pd.Categorical(labels, categories=levels).codes.astype(np.int64)


def load_usps(split: str = "train", data_home: DataHome = None) -> Dataset:
    """USPS handwritten digits, standard split: X float32 (7291 or 2007, 256) grey levels in [0, 1], y digits 0-9.

    Example:
        >>> usps = iz.datasets.load_usps()
        >>> usps
        Dataset('usps_train', X ndarray (7291, 256), y (7291,))
        >>> usps.X.dtype, usps.feature_names[:2], iz.datasets.load_usps("test").X.shape
        (dtype('float32'), ('pixel_0_0', 'pixel_0_1'), (2007, 256))
    """
    _check_split(split)
    file = _file("usps", "usps/usps.h5", data_home)
    arrays = [f"{split}/data", f"{split}/target"]
    with file.reading(), h5py.File(file.path, "r") as h5:
        file.require(all(name in h5 for name in arrays), f"lacks the arrays {arrays}")
        X, y = (h5[name][:] for name in arrays)
    expected = USPS_SIZES[split]
    file.require(X.shape == (expected, 256), f"{split}/data has shape {X.shape}, expected ({expected}, 256)")
    file.require(X.dtype.kind == "f" and np.all((X >= 0) & (X <= 1)), f"{split}/data is not grey levels in [0, 1]")
    file.require(y.shape == (expected,), f"{split}/target has shape {y.shape}, expected ({expected},)")
    file.require(np.isin(y, np.arange(10)).all(), f"{split}/target has labels other than the digits 0-9")
    return Dataset(
        name=f"usps_{split}",
        X=X.astype(np.float32, copy=False),
        y=y.astype(np.int64),
        feature_names=tuple(f"pixel_{row}_{column}" for row in range(16) for column in range(16)),
        target_names=tuple(str(digit) for digit in range(10)),
        sample_names=None,
    )


def load_recipes(data_home: DataHome = None) -> Dataset:
    """56 contest recipes x 147 ingredients, X uint8 0/1; y the category (pasta, chili, brownies, punch).

    Example:
        >>> recipes = iz.datasets.load_recipes()
        >>> recipes.X.shape, recipes.target_names
        ((56, 147), ('pasta', 'chili', 'brownies', 'punch'))
        >>> recipes.sample_names[0], recipes.feature_names[:3]
        ('Avocado Sauce for Pasta', ('zest', 'vinegar', 'apple juice'))
    """
    n_recipes = sum(RECIPE_CATEGORIES.values())
    X = _binary_table(_file("recipes", "recipes/ingredlist", data_home), (n_recipes, 147), delimiter=",")
    return Dataset(
        name="recipes",
        X=X,
        y=np.repeat(np.arange(len(RECIPE_CATEGORIES)), list(RECIPE_CATEGORIES.values())),
        feature_names=_read_names(_file("recipes", "recipes/ingrednames", data_home), X.shape[1]),
        target_names=tuple(RECIPE_CATEGORIES),
        sample_names=_read_names(_file("recipes", "recipes/recipe_names", data_home), n_recipes),
    )


def load_zoo(data_home: DataHome = None, *, binary: bool = True) -> Dataset:
    """UCI Zoo, 101 animals x 16 attributes; y the type, 0 mammal ... 6 invertebrate.

    With ``binary=True`` X is a uint8 0/1 array in which ``legs`` means "has legs" (count > 0);
    with ``binary=False`` X is an integer DataFrame keeping the number of legs (0-8).

    Example:
        >>> zoo = iz.datasets.load_zoo()
        >>> zoo.X.shape, zoo.feature_names[:4], zoo.sample_names[:2]
        ((101, 16), ('hair', 'feathers', 'eggs', 'milk'), ('aardvark', 'antelope'))
        >>> zoo.target_names[:3], int(iz.datasets.load_zoo(binary=False).X["legs"].max())
        (('mammal', 'bird', 'reptile'), 8)
    """
    file = _file("zoo", "zoo/zoo.data", data_home)
    columns = ["name", *ZOO_ATTRIBUTES, "type"]
    table = _read_csv(file, header=None, dtype=str, keep_default_na=False)
    file.require(table.shape[1] == len(columns), f"has {table.shape[1]} columns, expected {len(columns)}")
    table.columns = columns
    _require_rows(file, len(table), 101, "animals")
    with file.reading():
        table = table.astype({column: np.int64 for column in columns[1:]})
    _require_integers(file, table, [a for a in ZOO_ATTRIBUTES if a != "legs"], 0, 1)
    _require_integers(file, table, ["legs"], 0, 8)
    _require_integers(file, table, ["type"], 1, len(ZOO_TYPES))
    attributes = table[list(ZOO_ATTRIBUTES)]
    X = (attributes > 0).to_numpy(dtype=np.uint8) if binary else attributes
    return Dataset(
        name="zoo",
        X=X,
        y=table["type"].to_numpy(dtype=np.int64) - 1,
        feature_names=ZOO_ATTRIBUTES,
        target_names=ZOO_TYPES,
        sample_names=tuple(table["name"]),
    )


def load_animals50(data_home: DataHome = None) -> Dataset:
    """Osherson / Kemp & Tenenbaum animals: X uint8 0/1 (50 animals, 85 properties), no labels.

    Example:
        >>> animals = iz.datasets.load_animals50()
        >>> animals.X.shape, animals.y, animals.sample_names[:3]
        ((50, 85), None, ('antelope', 'grizzly+bear', 'killer+whale'))
        >>> animals.feature_names[:4]
        ('black', 'white', 'blue', 'brown')
    """
    X = _binary_table(_file("animals50", "animals50/predicate-matrix-binary.txt", data_home), (50, 85))
    return Dataset(
        name="animals50",
        X=X,
        y=None,
        feature_names=_read_names(_file("animals50", "animals50/predicates.txt", data_home), 85, numbered=True),
        target_names=None,
        sample_names=_read_names(_file("animals50", "animals50/classes.txt", data_home), 50, numbered=True),
    )


def load_titanic(split: str = "train", data_home: DataHome = None) -> Dataset:
    """Letham et al.'s Titanic split (1761 train, 440 test): X columns class, age, sex; y survived 1, died 0.

    Example:
        >>> train, test = iz.datasets.load_titanic(), iz.datasets.load_titanic("test")
        >>> train.X.shape, test.X.shape, train.feature_names, train.target_names
        ((1761, 3), (440, 3), ('class', 'age', 'sex'), ('no', 'yes'))
        >>> train.X.iloc[0].tolist()
        ['3rd', 'adult', 'male']
    """
    _check_split(split)
    dataset = f"titanic_{split}"
    file = _file(dataset, f"titanic/titanic_{split}.tab", data_home)
    items = [line.split() for line in _read_lines(file)]
    _require_rows(file, len(items), TITANIC_SIZES[split], "passengers")
    file.require(all(len(item) == 3 for item in items), "has lines that are not 'class age sex'")
    rows = [(passenger_class.removesuffix("_class"), age, sex) for passenger_class, age, sex in items]
    known = all(value in levels for row in rows for value, levels in zip(row, TITANIC_LEVELS.values()))
    file.require(known, f"has values outside {TITANIC_LEVELS}")
    labels = _file(dataset, f"titanic/titanic_{split}.Y", data_home)
    died_survived = _binary_table(labels, (len(items), 2))
    labels.require((died_survived.sum(axis=1) == 1).all(), "has rows other than '1 0' (died) and '0 1' (survived)")
    return Dataset(
        name=dataset,
        X=titanic_frame(rows),
        y=died_survived[:, 1].astype(np.int64),
        feature_names=tuple(TITANIC_LEVELS),
        target_names=TITANIC_SURVIVAL,
        sample_names=None,
    )


def load_tictactoe(data_home: DataHome = None) -> Dataset:
    """UCI tic-tac-toe endgames: X categorical cells c1..c9 in x/o/b (958 boards); y 1 where x wins.

    Example:
        >>> boards = iz.datasets.load_tictactoe()
        >>> boards.X.shape, boards.feature_names[:3], boards.target_names
        ((958, 9), ('c1', 'c2', 'c3'), ('negative', 'positive'))
        >>> boards.X["c1"].cat.categories.tolist()
        ['x', 'o', 'b']
    """
    file = _file("tictactoe", "tictactoe/tictactoe.txt.gz", data_home)
    table = _read_csv(file)
    cells = [f"c{k}" for k in range(1, 10)]
    _require_columns(file, table, [*cells, "label"])
    _require_rows(file, len(table), 958, "boards")
    file.require(table[cells].isin(["x", "o", "b"]).all().all(), "has cells other than x, o and b")
    return Dataset(
        name="tictactoe",
        X=table[cells].astype(pd.CategoricalDtype(["x", "o", "b"])),
        y=_label_codes(file, table["label"], (0, 1)),
        feature_names=tuple(cells),
        target_names=("negative", "positive"),
        sample_names=None,
    )


def load_mushroom(data_home: DataHome = None) -> Dataset:
    """UCI mushroom: X 22 categorical attributes (8124 rows; '?' in stalk-root is kept as a value); y 1 poisonous.

    Example:
        >>> mushrooms = iz.datasets.load_mushroom()
        >>> mushrooms.X.shape, mushrooms.feature_names[:3], mushrooms.target_names
        ((8124, 22), ('cap-shape', 'cap-surface', 'cap-color'), ('edible', 'poisonous'))
        >>> int(mushrooms.y.sum())  # poisonous
        3916
    """
    file = _file("mushroom", "mushroom/agaricus-lepiota.data", data_home)
    table = _read_csv(file, dtype="category")
    file.require(table.shape[1] == 23, f"has {table.shape[1]} columns, expected edibility and 22 attributes")
    _require_columns(file, table, ["edibility"])
    _require_columns(file, table, list(table.columns))
    _require_rows(file, len(table), 8124, "mushrooms")
    attributes = table.drop(columns="edibility")
    return Dataset(
        name="mushroom",
        X=attributes,
        y=_label_codes(file, table["edibility"], ("e", "p")),
        feature_names=tuple(attributes.columns),
        target_names=("edible", "poisonous"),
        sample_names=None,
    )


def load_adult(data_home: DataHome = None) -> Dataset:
    """UCI adult census income: X a DataFrame of integer and categorical columns; y 1 for income >50K.

    The file has a header line naming ``ADULT_COLUMNS``, of which ``ADULT_INTEGER_COLUMNS`` hold
    integers, and any number of rows (the shared copy: the 30162 rows without missing values).

    Example:
        >>> adult = iz.datasets.load_adult()
        >>> adult.X.shape, adult.feature_names[:4], adult.target_names
        ((30162, 14), ('age', 'type_employer', 'fnlwgt', 'education'), ('<=50K', '>50K'))
        >>> str(adult.X["age"].dtype), str(adult.X["education"].dtype)
        ('int64', 'category')
    """
    file = _file("adult", "adult/adult.data", data_home)
    table = _read_csv(file, skipinitialspace=True)
    file.require(
        tuple(table.columns) == ADULT_COLUMNS, f"has columns {list(table.columns)[:20]}, expected {ADULT_COLUMNS}"
    )
    _require_columns(file, table, ADULT_COLUMNS)
    file.require(len(table) > 0, "has no rows")
    _require_integers(file, table, ADULT_INTEGER_COLUMNS, 0)
    attributes = table.drop(columns="income")
    text_columns = attributes.select_dtypes(exclude="number").columns
    attributes = attributes.astype({column: "category" for column in text_columns})
    return Dataset(
        name="adult",
        X=attributes,
        y=_label_codes(file, table["income"], ("<=50K", ">50K")),
        feature_names=tuple(attributes.columns),
        target_names=("<=50K", ">50K"),
        sample_names=None,
    )


def load_movielens(data_home: DataHome = None) -> Dataset:
    """MovieLens 100k as movies x users: X float64 CSR (1682, 943), 1 where the user rated the movie above 3.

    y is the (1682, 19) 0/1 genre matrix from u.item, one column per name in ``target_names``. The files
    must hold the whole data set: 100000 ratings by 943 users of 1682 movies.

    Example:
        >>> movies = iz.datasets.load_movielens()
        >>> movies.X.shape, movies.X.nnz, movies.y.shape  # nnz: ratings above 3
        ((1682, 943), 55375, (1682, 19))
        >>> movies.sample_names[0], movies.feature_names[0], movies.target_names[:3]
        ('Toy Story (1995)', 'user_1', ('unknown', 'Action', 'Adventure'))
    """
    n_ratings, n_users, n_movies = MOVIELENS_SIZES
    file = _file("movielens", "movielens-100k/u.data", data_home)
    ratings = _read_csv(file, sep="\t", header=None)
    file.require(ratings.shape[1] == 4, f"has {ratings.shape[1]} columns, expected user, movie, rating, timestamp")
    ratings.columns = ["user", "movie", "rating", "timestamp"]
    _require_rows(file, len(ratings), n_ratings, "ratings")
    _require_integers(file, ratings, ["user"], 1, n_users)
    _require_integers(file, ratings, ["movie"], 1, n_movies)
    _require_integers(file, ratings, ["rating"], 1, 5)
    _require_rows(file, ratings["user"].nunique(), n_users, "users with ratings")
    file = _file("movielens", "movielens-100k/u.item", data_home)
    movies = _read_csv(
        file, sep="|", header=None, encoding="latin-1", quoting=csv.QUOTE_NONE, keep_default_na=False,
    )  # fmt: skip
    file.require(movies.shape[1] == 5 + len(MOVIELENS_GENRES), f"has {movies.shape[1]} columns, expected 24")
    movies.columns = ["movie", "title", "release", "video_release", "url", *MOVIELENS_GENRES]
    _require_rows(file, len(movies), n_movies, "movies")
    file.require(np.array_equal(movies["movie"], np.arange(1, n_movies + 1)), f"does not list movies 1..{n_movies}")
    _require_integers(file, movies, MOVIELENS_GENRES, 0, 1)
    liked = ratings[ratings["rating"] > MOVIELENS_LIKED_ABOVE]
    X = scipy.sparse.csr_matrix(
        (np.ones(len(liked)), (liked["movie"].to_numpy() - 1, liked["user"].to_numpy() - 1)),
        shape=(n_movies, n_users),
    )
    return Dataset(
        name="movielens",
        X=X,
        y=movies[list(MOVIELENS_GENRES)].to_numpy(dtype=np.uint8),
        feature_names=tuple(f"user_{user}" for user in range(1, n_users + 1)),
        target_names=MOVIELENS_GENRES,
        sample_names=tuple(movies["title"]),
    )


def load_nell(data_home: DataHome = None, *, merge_duplicates: bool = True) -> Dataset:
    """NELL noun phrases x contexts: X float64 CSR, items as rows, from 229897 lines x 5548 contexts.

    The phrase file repeats 1650 phrases (1736 surplus lines). With ``merge_duplicates=True`` (the
    default) each phrase is one item, at its first line's place in the order, whose contexts are the
    union of its lines' contexts (in the shared file a repeated phrase's lines have identical contexts,
    so nothing changes but the repeats): X is (228161, 5548) and no answer can list a phrase twice.
    ``extras["item_of_line"]`` maps each line of the phrase file (row of the original matrix) to its
    item. With ``merge_duplicates=False`` X keeps the file's 229897 rows and some ``sample_names`` repeat.

    ``extras["seed_sets"]`` maps each seed file's name to a `SeedSet`; phrases that match no item are
    listed in its ``missing`` (class_seed_set_03 has the misspelling "intertia", for inertia).

    Example:
        >>> nell = iz.datasets.load_nell()
        >>> nell.X.shape, nell.sample_names[:2], sorted(nell.extras["seed_sets"])
        ((228161, 5548), ('fav', 'thinking'), ['class_seed_set_01', 'class_seed_set_02', 'class_seed_set_03'])
        >>> seeds = nell.extras["seed_sets"]["class_seed_set_03"]
        >>> seeds.phrases[:3], seeds.missing
        (('acceleration', 'direction', 'force'), ('intertia',))
    """
    if not isinstance(merge_duplicates, (bool, np.bool_)):
        raise ValueError(f"merge_duplicates: expected True or False, got {merge_duplicates!r}")
    file = _file("nell", "nell/nell_exp_X_transpose.mat", data_home)
    with file.reading():
        contexts_by_items = scipy.io.loadmat(file.path)["X"]
    file.require(scipy.sparse.issparse(contexts_by_items) and contexts_by_items.ndim == 2, "has no sparse matrix X")
    X = scipy.sparse.csr_matrix(contexts_by_items.T, dtype=np.float64)
    file.require(
        X.shape == NELL_SHAPE, f"holds X of shape {X.shape[::-1]}, expected {NELL_SHAPE[::-1]} (contexts x phrases)"
    )
    X.sum_duplicates()
    X.eliminate_zeros()
    file.require(np.all(X.data == 1.0), "has values other than 0 and 1")
    file = _file("nell", "nell/all_set_elements.csv", data_home)
    lines = _read_lines(file)
    _require_rows(file, len(lines), X.shape[0], "phrases")
    if merge_duplicates:
        item_of_line, phrases = pd.factorize(pd.Series(lines, dtype=object), sort=False)
        phrases = tuple(phrases)
        lines_to_items = scipy.sparse.csr_matrix(
            (np.ones(len(lines)), (item_of_line, np.arange(len(lines)))), shape=(len(phrases), len(lines))
        )
        X = lines_to_items @ X
        X.data[:] = 1.0  # the union of a phrase's lines
        extras = {"item_of_line": item_of_line.astype(np.int64)}
    else:
        phrases, extras = lines, {}
    index_of: dict[str, int] = {}
    for index, phrase in enumerate(phrases):
        index_of.setdefault(phrase, index)
    seed_sets = {}
    for seed_set in NELL_SEED_SETS:
        query = _read_lines(_file("nell", f"nell/{seed_set}.csv", data_home))
        found = tuple(phrase for phrase in query if phrase in index_of)
        seed_sets[seed_set] = SeedSet(
            phrases=found,
            indices=np.array([index_of[phrase] for phrase in found], dtype=np.int64),
            missing=tuple(phrase for phrase in query if phrase not in index_of),
        )
    return Dataset(
        name="nell",
        X=X,
        y=None,
        feature_names=tuple(f"context_{j}" for j in range(X.shape[1])),
        target_names=None,
        sample_names=phrases,
        extras={"seed_sets": seed_sets, **extras},
    )
