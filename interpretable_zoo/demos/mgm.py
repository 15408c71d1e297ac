"""Mind the Gap on the cartoon faces of sec. 2."""

from __future__ import annotations


def cli_demo(data_home=None) -> str:
    """The cartoon faces of sec. 2 drawn from the model, fitted with 3 clusters: the distinguishing groups."""
    from interpretable_zoo.datasets.cartoon_faces import make_cartoon_faces
    from interpretable_zoo.inference.mgm import fit_mgm

    faces = make_cartoon_faces(400, 0)
    result = fit_mgm(faces.X, 3, restarts=5, feature_names=faces.feature_names, seed=0)
    return result.explain(cluster_names=result.majority_names(faces.y, faces.target_names))
