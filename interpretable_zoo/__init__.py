"""interpretable-zoo: five interpretable machine-learning papers as NumPyro models with fast JAX inference.

Subpackages: ``models`` (one file per paper: priors and the generative program), ``inference``
(samplers and optimisers), ``diagnostics`` (ArviZ conversion, summaries, exactness and SBC helpers),
``datasets`` (loaders, bundled data, synthetic generators).
"""

import warnings

# ArviZ announces its 1.0 refactor on every import; it says nothing about this package's use of it.
warnings.filterwarnings("ignore", message="ArviZ is undergoing a major refactor", category=FutureWarning)

from interpretable_zoo import datasets, diagnostics, inference, models  # noqa: E402
from interpretable_zoo.inference.bayesian_sets import BayesianSets  # noqa: E402
from interpretable_zoo.inference.bcm import BCMClusterer, fit_bcm  # noqa: E402
from interpretable_zoo.inference.brl import TEMPERED_LADDER, BayesianRuleListClassifier, BRLResult, fit_brl  # noqa: E402
from interpretable_zoo.inference.mgm import MGMClusterer, MGMResult, fit_mgm, fit_mgm_sweep  # noqa: E402
from interpretable_zoo.inference.prototype_selection import (  # noqa: E402
    PrototypeClassifier,
    PrototypeSelection,
    select_prototypes,
)

__version__ = "0.1.0"

__all__ = [
    "BCMClusterer",
    "BRLResult",
    "BayesianRuleListClassifier",
    "BayesianSets",
    "MGMClusterer",
    "MGMResult",
    "PrototypeClassifier",
    "PrototypeSelection",
    "TEMPERED_LADDER",
    "datasets",
    "diagnostics",
    "fit_bcm",
    "fit_brl",
    "fit_mgm",
    "fit_mgm_sweep",
    "inference",
    "models",
    "select_prototypes",
    "__version__",
]
