"""Data for the zoo: real data sets (bundled, or read from the data folder), synthetic data drawn from the
models, and preprocessing helpers. Each loader's module is imported at first use."""

from interpretable_zoo.lazy import lazy_attributes

__all__ = [
    "DataFileError",
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

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        ".base": ("DataFileError", "DataHomeMissing", "Dataset", "resolve_data_home"),
        ".bundled": ("load_breast_cancer", "load_digits", "load_titanic_table", "load_wine"),
        ".cartoon_faces": ("FACE_CLUSTERS", "FACE_FEATURES", "make_cartoon_faces"),
        ".gaussian_mixture": ("make_gaussian_mixture",),
        ".planted_rule_lists": ("planted_rule_lists",),
        ".preprocessing": ("bin_levels", "binarize", "one_hot"),
        ".real": (
            "SeedSet",
            "load_adult",
            "load_animals50",
            "load_movielens",
            "load_mushroom",
            "load_nell",
            "load_recipes",
            "load_tictactoe",
            "load_titanic",
            "load_usps",
            "load_zoo",
        ),
        ".smiley_faces": ("conditioned_model", "load_usps_bcm", "make_smiley_faces"),
    },
)
