"""Sphinx configuration of the interpretable-zoo site (``make docs``; offline, warnings are errors)."""

import shutil
from pathlib import Path

import interpretable_zoo

DOCS = Path(__file__).parent
ROOT = DOCS.parent

project = "interpretable-zoo"
author = "interpretable-zoo contributors"
release = version = interpretable_zoo.__version__
copyright = "2026, interpretable-zoo contributors"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

# The notebooks are rendered with the outputs stored by ``notebooks/execute.py``, never re-run here.
# Sphinx reads sources only below this folder, so the build copies them into ``examples/notebooks``.
NOTEBOOKS = DOCS / "examples" / "notebooks"
shutil.rmtree(NOTEBOOKS, ignore_errors=True)
NOTEBOOKS.mkdir(parents=True)
for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
    shutil.copy(notebook, NOTEBOOKS / notebook.name)
nb_execution_mode = "off"
nb_merge_streams = True

myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build"]

# One docstring convention throughout: Google style (napoleon), prose parameters in ``Args:`` sections.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
templates_path = ["_templates"]
autosummary_generate = True
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}

# Every cross-reference must resolve (``-n``). The site is built offline, so references to other
# projects' objects (NumPy, JAX, pandas, ...) cannot resolve and are the only ones ignored.
nitpicky = True
_EXTERNAL = r"(collections|numpy|jax|numpyro|sklearn|pandas|scipy|arviz|xarray|matplotlib)\..*"
nitpick_ignore_regex = [(r"py:.*", _EXTERNAL)]

html_theme = "pydata_sphinx_theme"
html_title = "interpretable-zoo"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}


def _skip_scikit_learn_members(app, what, name, obj, skip, options):
    """Leave out what the estimators inherit from scikit-learn (documented there, not here)."""
    module = getattr(obj, "__module__", None) or ""
    return True if module.startswith("sklearn.") else None


def setup(app):
    app.connect("autodoc-skip-member", _skip_scikit_learn_members)
