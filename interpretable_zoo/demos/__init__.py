"""Runs of each model on bundled or synthetic data, and the ``izoo`` command's hooks, one module per paper.

Each module defines ``cli_demo(data_home) -> str`` (the explanation and, for MCMC models, an R-hat
table) and, for models with a posterior, ``cli_fit(X, y, args) -> InferenceData``. The modules import
the models and data sets inside these functions, so that ``izoo --help`` loads no numerical library.
"""
