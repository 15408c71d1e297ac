"""One file per paper: ``Priors``, the NumPyro generative program and the prior hooks its fast sampler uses.

Edit a model file to change a prior: the sampler reads hyperparameters and prior formulas from it.
Each model file is imported at first use (``interpretable_zoo.models.bcm``).
"""

from interpretable_zoo.compilation_cache import configure
from interpretable_zoo.lazy import lazy_attributes

configure()  # the persistent compilation cache is set before any model file compiles

__getattr__, __dir__ = lazy_attributes(__name__, {})
