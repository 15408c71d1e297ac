"""The Bayesian Case Model on the smiley faces of sec. 3.1, and ``izoo fit bcm``."""

from __future__ import annotations


def smiley_demo(**fit_options) -> tuple:
    """The sec. 3.1 example: 240 smiley faces drawn from the model, fitted with three clusters
    (:func:`~interpretable_zoo.inference.bcm.fit_bcm` with ``fit_options``, by default until converged
    within 60 s). Returns (faces Dataset, BCMResult)."""
    from interpretable_zoo.datasets.smiley_faces import SMILEY_PRIORS, make_smiley_faces
    from interpretable_zoo.inference.bcm import fit_bcm

    faces = make_smiley_faces()
    result = fit_bcm(faces.X, 3, priors=SMILEY_PRIORS, seed=0, **{"max_seconds": 60.0, **fit_options})
    return faces, result


def format_demo(faces, result) -> str:
    """The demo's printout: planted and found subspaces, and the R-hat table."""
    import pandas as pd

    from interpretable_zoo.datasets.smiley_faces import SMILEY_SUBSPACES

    planted = "\n".join(f"  cluster {s}: {', '.join(features)}" for s, features in enumerate(SMILEY_SUBSPACES))
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 60):
        return (
            f"BCM on {len(faces.X)} smiley faces (3 clusters)\nplanted subspaces:\n"
            f"{planted}\nprototypes and subspaces found:\n{result.explain()}\n\n{result.summary()}"
        )


def cli_demo() -> str:
    """Quick run on the bundled smiley faces (sec. 3.1): planted vs found subspaces, and the R-hat table."""
    return format_demo(*smiley_demo())


def cli_fit(X, y, *, seed: int, n_clusters=None, progress=None, **options):
    """``izoo fit bcm``: :func:`~interpretable_zoo.inference.bcm.fit_bcm` with the command's options
    (``progress``: None, a bar outside CI); returns the :class:`~interpretable_zoo.inference.bcm.BCMResult`."""
    from interpretable_zoo.inference.bcm import fit_bcm

    return fit_bcm(X, n_clusters, seed=seed, progress_bar=progress, **options)
