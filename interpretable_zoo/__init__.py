"""interpretable-zoo: five interpretable machine-learning papers as NumPyro models with fast JAX inference.

Subpackages: ``models`` (one file per paper: priors and the generative program), ``inference``
(samplers and optimisers), ``diagnostics`` (ArviZ conversion, summaries, exactness and SBC helpers),
``datasets`` (loaders, bundled data, synthetic generators). Every name is imported at its first use
(see :mod:`interpretable_zoo.lazy`), so ``import interpretable_zoo`` loads no numerical library.
"""

import warnings

from interpretable_zoo.lazy import lazy_attributes
from interpretable_zoo.xla_flags import LATE_IMPORT_WARNING, compile_loops_whole, cpu_backend_started

# before any JAX computation of the process, which reads XLA_FLAGS (interpretable_zoo.xla_flags)
if compile_loops_whole() and cpu_backend_started():
    warnings.warn(LATE_IMPORT_WARNING, RuntimeWarning, stacklevel=2)

# ArviZ announces its 1.0 refactor (on its first import of the day, in a message that starts with a newline);
# it says nothing about this package's use of it. Set here, before any submodule can import ArviZ.
warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)

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
    "datasets",
    "diagnostics",
    "fit_bcm",
    "fit_brl",
    "fit_mgm",
    "fit_mgm_sweep",
    "inference",
    "load_result",
    "models",
    "save_result",
    "select_prototypes",
    "clear_caches",
    "__version__",
]

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        ".compiled_programs": ("clear_caches",),
        ".inference.bayesian_sets": ("BayesianSets",),
        ".inference.bcm": ("BCMClusterer", "fit_bcm"),
        ".inference.checkpoint": ("load_result", "save_result"),
        ".inference.brl": ("BayesianRuleListClassifier", "BRLResult", "fit_brl"),
        ".inference.mgm": ("MGMClusterer", "MGMResult", "fit_mgm", "fit_mgm_sweep"),
        ".inference.prototype_selection": ("PrototypeClassifier", "PrototypeSelection", "select_prototypes"),
    },
)
