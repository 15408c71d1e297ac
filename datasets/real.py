"""Loaders for the real data files in the data folder (see `resolve_data_home`); nothing is downloaded."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import NamedTuple

import h5py
import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse

from .base import Dataset, data_file
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


class SeedSet(NamedTuple):
    """A NELL seed query: the phrases found among the items, their item indices, and phrases not found."""

    phrases: tuple[str, ...]
    indices: np.ndarray
    missing: tuple[str, ...]


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def _read_lines(path: Path, encoding: str = "utf-8") -> tuple[str, ...]:
    return tuple(path.read_text(encoding=encoding).splitlines())


def _read_numbered_names(path: Path) -> tuple[str, ...]:
    """Names from lines of the form ``<number><tab><name>``."""
    return tuple(line.split("\t")[1].strip() for line in _read_lines(path))


def _label_codes(labels: pd.Series, levels: tuple, path: Path) -> np.ndarray:
    """The position of each label in ``levels``; ValueError naming the file for a label outside them."""
    codes = pd.Categorical(labels, categories=levels).codes.astype(np.int64)
    if (codes < 0).any():
        unknown = sorted(set(labels) - set(levels))
        raise ValueError(f"{path} has labels {unknown} outside {levels}")
    return codes


def load_usps(split: str = "train", data_home: DataHome = None) -> Dataset:
    """USPS handwritten digits, standard split: X float32 (7291 or 2007, 256) grey levels in [0, 1], y digits 0-9."""
    _check_split(split)
    with h5py.File(data_file("usps/usps.h5", data_home), "r") as file:
        X = file[f"{split}/data"][:]
        y = file[f"{split}/target"][:].astype(np.int64)
    return Dataset(
        name=f"usps_{split}",
        X=X,
        y=y,
        feature_names=tuple(f"pixel_{row}_{column}" for row in range(16) for column in range(16)),
        target_names=tuple(str(digit) for digit in range(10)),
        sample_names=None,
    )


def load_recipes(data_home: DataHome = None) -> Dataset:
    """56 contest recipes x 147 ingredients, X uint8 0/1; y the category (pasta, chili, brownies, punch)."""
    X = np.loadtxt(data_file("recipes/ingredlist", data_home), delimiter=",", dtype=np.uint8, ndmin=2)
    return Dataset(
        name="recipes",
        X=X,
        y=np.repeat(np.arange(len(RECIPE_CATEGORIES)), list(RECIPE_CATEGORIES.values())),
        feature_names=_read_lines(data_file("recipes/ingrednames", data_home)),
        target_names=tuple(RECIPE_CATEGORIES),
        sample_names=_read_lines(data_file("recipes/recipe_names", data_home)),
    )


def load_zoo(data_home: DataHome = None, *, binary: bool = True) -> Dataset:
    """UCI Zoo, 101 animals x 16 attributes; y the type, 0 mammal ... 6 invertebrate.

    With ``binary=True`` X is a uint8 0/1 array in which ``legs`` means "has legs" (count > 0);
    with ``binary=False`` X is an integer DataFrame keeping the number of legs (0-8).
    """
    table = pd.read_csv(data_file("zoo/zoo.data", data_home), header=None, names=["name", *ZOO_ATTRIBUTES, "type"])
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
    """Osherson / Kemp & Tenenbaum animals: X uint8 0/1 (50 animals, 85 properties), no labels."""
    X = np.loadtxt(data_file("animals50/predicate-matrix-binary.txt", data_home), dtype=np.uint8, ndmin=2)
    return Dataset(
        name="animals50",
        X=X,
        y=None,
        feature_names=_read_numbered_names(data_file("animals50/predicates.txt", data_home)),
        target_names=None,
        sample_names=_read_numbered_names(data_file("animals50/classes.txt", data_home)),
    )


def load_titanic(split: str = "train", data_home: DataHome = None) -> Dataset:
    """Letham et al.'s Titanic split (1761 train, 440 test): X columns class, age, sex; y survived 1, died 0."""
    _check_split(split)
    items = _read_lines(data_file(f"titanic/titanic_{split}.tab", data_home))
    rows = []
    for line in items:
        passenger_class, age, sex = line.split()
        rows.append((passenger_class.removesuffix("_class"), age, sex))
    X = titanic_frame(rows)
    if X.isna().any().any():
        raise ValueError(f"titanic_{split}.tab has values outside {TITANIC_LEVELS}")
    died_survived = np.loadtxt(data_file(f"titanic/titanic_{split}.Y", data_home), dtype=np.int64, ndmin=2)
    return Dataset(
        name=f"titanic_{split}",
        X=X,
        y=died_survived[:, 1],
        feature_names=tuple(TITANIC_LEVELS),
        target_names=TITANIC_SURVIVAL,
        sample_names=None,
    )


def load_tictactoe(data_home: DataHome = None) -> Dataset:
    """UCI tic-tac-toe endgames: X categorical cells c1..c9 in x/o/b (958 boards); y 1 where x wins."""
    path = data_file("tictactoe/tictactoe.txt.gz", data_home)
    table = pd.read_csv(path)
    cells = [f"c{k}" for k in range(1, 10)]
    return Dataset(
        name="tictactoe",
        X=table[cells].astype(pd.CategoricalDtype(["x", "o", "b"])),
        y=_label_codes(table["label"], (0, 1), path),
        feature_names=tuple(cells),
        target_names=("negative", "positive"),
        sample_names=None,
    )


def load_mushroom(data_home: DataHome = None) -> Dataset:
    """UCI mushroom: X 22 categorical attributes (8124 rows; '?' in stalk-root is kept as a value); y 1 poisonous."""
    path = data_file("mushroom/agaricus-lepiota.data", data_home)
    table = pd.read_csv(path, dtype="category")
    attributes = table.drop(columns="edibility")
    return Dataset(
        name="mushroom",
        X=attributes,
        y=_label_codes(table["edibility"], ("e", "p"), path),
        feature_names=tuple(attributes.columns),
        target_names=("edible", "poisonous"),
        sample_names=None,
    )


def load_adult(data_home: DataHome = None) -> Dataset:
    """UCI adult census income: X a DataFrame of integer and categorical columns; y 1 for income >50K."""
    path = data_file("adult/adult.data", data_home)
    table = pd.read_csv(path, skipinitialspace=True)
    attributes = table.drop(columns="income")
    text_columns = attributes.select_dtypes(exclude="number").columns
    attributes = attributes.astype({column: "category" for column in text_columns})
    return Dataset(
        name="adult",
        X=attributes,
        y=_label_codes(table["income"], ("<=50K", ">50K"), path),
        feature_names=tuple(attributes.columns),
        target_names=("<=50K", ">50K"),
        sample_names=None,
    )


def load_movielens(data_home: DataHome = None) -> Dataset:
    """MovieLens 100k as movies x users: X float64 CSR (1682, 943), 1 where the user rated the movie above 3.

    y is the (1682, 19) 0/1 genre matrix from u.item, one column per name in ``target_names``.
    """
    ratings = pd.read_csv(
        data_file("movielens-100k/u.data", data_home), sep="\t", header=None,
        names=["user", "movie", "rating", "timestamp"],
    )  # fmt: skip
    movies = pd.read_csv(
        data_file("movielens-100k/u.item", data_home), sep="|", header=None, encoding="latin-1",
        quoting=csv.QUOTE_NONE, names=["movie", "title", "release", "video_release", "url", *MOVIELENS_GENRES],
    )  # fmt: skip
    n_users = int(ratings["user"].max())
    liked = ratings[ratings["rating"] > MOVIELENS_LIKED_ABOVE]
    X = scipy.sparse.csr_matrix(
        (np.ones(len(liked)), (liked["movie"].to_numpy() - 1, liked["user"].to_numpy() - 1)),
        shape=(len(movies), n_users),
    )
    return Dataset(
        name="movielens",
        X=X,
        y=movies[list(MOVIELENS_GENRES)].to_numpy(dtype=np.uint8),
        feature_names=tuple(f"user_{user}" for user in range(1, n_users + 1)),
        target_names=MOVIELENS_GENRES,
        sample_names=tuple(movies["title"]),
    )


def load_nell(data_home: DataHome = None) -> Dataset:
    """NELL noun phrases x contexts: X float64 CSR (229897, 5548) with 557,495 ones, items as rows.

    ``sample_names`` are the noun phrases (some repeat). ``extras["seed_sets"]`` maps each seed file's
    name to a `SeedSet`; a phrase that repeats is indexed at its first occurrence.
    """
    contexts_by_items = scipy.io.loadmat(data_file("nell/nell_exp_X_transpose.mat", data_home))["X"]
    X = scipy.sparse.csr_matrix(contexts_by_items.T, dtype=np.float64)
    phrases = _read_lines(data_file("nell/all_set_elements.csv", data_home))
    first_index: dict[str, int] = {}
    for index, phrase in enumerate(phrases):
        first_index.setdefault(phrase, index)
    seed_sets = {}
    for seed_set in NELL_SEED_SETS:
        query = _read_lines(data_file(f"nell/{seed_set}.csv", data_home))
        found = tuple(phrase for phrase in query if phrase in first_index)
        seed_sets[seed_set] = SeedSet(
            phrases=found,
            indices=np.array([first_index[phrase] for phrase in found], dtype=np.int64),
            missing=tuple(phrase for phrase in query if phrase not in first_index),
        )
    return Dataset(
        name="nell",
        X=X,
        y=None,
        feature_names=tuple(f"context_{j}" for j in range(X.shape[1])),
        target_names=None,
        sample_names=phrases,
        extras={"seed_sets": seed_sets},
    )
