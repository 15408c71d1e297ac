"""Mind the Gap on the cartoon faces of sec. 2, and ``izoo fit mgm``."""

from __future__ import annotations


def cli_demo() -> str:
    """The cartoon faces of sec. 2 drawn from the model, fitted with 3 clusters: the distinguishing groups."""
    from interpretable_zoo.datasets.cartoon_faces import make_cartoon_faces
    from interpretable_zoo.inference.mgm import fit_mgm

    faces = make_cartoon_faces(400, 0)
    result = fit_mgm(faces.X, 3, restarts=5, feature_names=faces.feature_names, seed=0)
    return result.explain(cluster_names=result.majority_names(faces.y, faces.target_names))


def cli_fit(X, y, *, seed: int, n_clusters=None, **options):
    """``izoo fit mgm``: :func:`~interpretable_zoo.inference.mgm.fit_mgm` of a binary table (its columns
    name the features) with the command's options; returns the :class:`~interpretable_zoo.inference.mgm.MGMResult`."""
    from interpretable_zoo.inference.mgm import fit_mgm

    return fit_mgm(X, n_clusters, seed=seed, **options)
