"""Runs of each model on bundled or synthetic data, and the ``izoo`` command's hooks, one module per paper.

Each module defines ``cli_demo() -> str`` (the explanation and, for MCMC models, an R-hat
table) and, for models fitted to a data file, ``cli_fit(X, y, *, seed, **options) -> result`` (the
options of ``izoo fit`` that the model takes, as keyword arguments). The modules import
the models and data sets inside these functions, so that ``izoo --help`` loads no numerical library.
"""
