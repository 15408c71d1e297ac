"""The cartoon faces of Mind the Gap (sec. 2, fig. 2), drawn from the MGM generative process.

Eight binary features, three clusters. The structure is planted as the paper reports it: winter faces
show (earmuffs OR scarf OR smile), vacation faces (hat OR sunglasses), student faces silly glasses and
pencils; face colour is present half of the time in every cluster and distinguishes nothing. Cluster
memberships, group presences and the features are drawn by ``interpretable_zoo.models.mgm.model``
conditioned on that structure.
"""

from __future__ import annotations

import jax
import numpy as np
from numpyro.handlers import condition, seed, trace

from interpretable_zoo.models import mgm

from .base import Dataset

FACE_FEATURES = ("earmuffs", "scarf", "hat", "sunglasses", "pencil", "silly glasses", "face colour", "smile")
FACE_CLUSTERS = ("winter", "student", "vacation")
FACE_GROUPS = (("earmuffs", "scarf", "smile"), ("hat", "sunglasses"), ("pencil",), ("silly glasses",), ("face colour",))
"""Planted groups (all OR); the first four are important, face colour is not."""
FACE_PRESENCE = np.array(
    [
        # winter student vacation
        [0.95, 0.02, 0.02],  # earmuffs OR scarf OR smile
        [0.02, 0.02, 0.95],  # hat OR sunglasses
        [0.02, 0.95, 0.02],  # pencil
        [0.02, 0.95, 0.02],  # silly glasses
        [0.5, 0.5, 0.5],  # face colour
    ]
)
"""beta_gk: probability that planted group g is present in a face of cluster k."""


def planted_structure() -> dict[str, np.ndarray]:
    """The conditioned sites of the face model: l, f, y, t, beta (G = 8 slots, K = 3) and pi."""
    group_of = {feature: g for g, members in enumerate(FACE_GROUPS) for feature in members}
    n_groups, n_clusters = len(FACE_FEATURES), len(FACE_CLUSTERS)
    beta = np.full((n_clusters, n_groups), 0.5)
    beta[:, : len(FACE_GROUPS)] = FACE_PRESENCE.T
    y = np.zeros(n_groups, np.int32)
    y[:4] = 1
    return {
        "l": np.array([group_of[feature] for feature in FACE_FEATURES], np.int32),
        "f": np.full(n_groups, mgm.OR, np.int32),
        "y": y,
        "t": (beta > 0.5).astype(np.int32),
        "beta": beta,
        "pi": np.full(n_clusters, 1.0 / n_clusters),
    }


def make_cartoon_faces(
    n_faces: int = 400, seed_value: int = 0, priors: mgm.Priors | None = None, exact_or: bool = True
) -> Dataset:
    """``n_faces`` faces (X uint8 (n_faces, 8)); y the cluster (winter, student, vacation).

    ``exact_or`` draws the features of a present OR group by eq. 2 (at least one member shows), else by
    the relaxed eq. 3.

    Example:
        >>> faces = iz.datasets.make_cartoon_faces(n_faces=60)
        >>> faces.X.shape, faces.feature_names[:3], faces.target_names
        ((60, 8), ('earmuffs', 'scarf', 'hat'), ('winter', 'student', 'vacation'))
        >>> faces.extras["groups"][:2]  # planted OR groups: winter faces show the first, vacation faces the second
        (('earmuffs', 'scarf', 'smile'), ('hat', 'sunglasses'))
    """
    if n_faces < 1:
        raise ValueError(f"n_faces: must be at least 1, got {n_faces}")
    priors = mgm.Priors() if priors is None else priors
    planted = planted_structure()
    conditioned = condition(mgm.model, data={k: jax.device_put(np.asarray(v)) for k, v in planted.items()})

    def draw(key):  # compiled as one program (run op by op, each operation would compile its own)
        sites = trace(seed(conditioned, key)).get_trace(
            n_faces, len(FACE_FEATURES), len(FACE_CLUSTERS), priors, exact_or=exact_or
        )
        return sites["w"]["value"], sites["z"]["value"]

    w, z = jax.jit(draw)(jax.random.PRNGKey(seed_value))
    return Dataset(
        name="cartoon_faces",
        X=np.asarray(w, np.uint8),
        y=np.asarray(z, np.int64),
        feature_names=FACE_FEATURES,
        target_names=FACE_CLUSTERS,
        sample_names=None,
        extras={"groups": FACE_GROUPS, "presence": FACE_PRESENCE},
    )
