"""One file per paper: ``Priors``, the NumPyro generative program and the prior hooks its fast sampler uses.

Edit a model file to change a prior: the sampler reads hyperparameters and prior formulas from it.
"""
