"""Data for the zoo: real data sets (bundled, or read from the data folder), synthetic data drawn from the
models, and preprocessing helpers."""

from .base import DataHomeMissing, Dataset, resolve_data_home
from .bundled import load_breast_cancer, load_digits, load_titanic_table, load_wine
from .cartoon_faces import FACE_CLUSTERS, FACE_FEATURES, make_cartoon_faces
from .gaussian_mixture import make_gaussian_mixture
from .planted_rule_lists import planted_rule_lists
from .preprocessing import bin_levels, binarize, one_hot
from .real import (
    SeedSet,
    load_adult,
    load_animals50,
    load_movielens,
    load_mushroom,
    load_nell,
    load_recipes,
    load_tictactoe,
    load_titanic,
    load_usps,
    load_zoo,
)
from .smiley_faces import conditioned_model, load_usps_bcm, make_smiley_faces

__all__ = [
    "DataHomeMissing",
    "Dataset",
    "FACE_CLUSTERS",
    "FACE_FEATURES",
    "SeedSet",
    "bin_levels",
    "conditioned_model",
    "binarize",
    "load_adult",
    "load_animals50",
    "load_breast_cancer",
    "load_digits",
    "load_movielens",
    "load_mushroom",
    "load_nell",
    "load_recipes",
    "load_tictactoe",
    "load_titanic",
    "load_titanic_table",
    "load_usps",
    "load_usps_bcm",
    "load_wine",
    "load_zoo",
    "make_cartoon_faces",
    "make_gaussian_mixture",
    "make_smiley_faces",
    "one_hot",
    "planted_rule_lists",
    "resolve_data_home",
]
