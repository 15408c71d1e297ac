"""Write the example data files of the command-line guide's section "Data files" (docs/guides/cli.md), one
per model that ``izoo fit`` fits.

Run from the repository root: ``python docs/examples/write_examples.py``. Every file is drawn from a
generator or table of the package, so it is reproduced exactly.
"""

from pathlib import Path

import numpy as np
import pandas as pd

from interpretable_zoo.datasets import load_titanic_table
from interpretable_zoo.datasets.cartoon_faces import make_cartoon_faces
from interpretable_zoo.datasets.gaussian_mixture import make_gaussian_mixture
from interpretable_zoo.datasets.smiley_faces import make_smiley_faces

FOLDER = Path(__file__).parent


def main() -> None:
    titanic = load_titanic_table()
    rows = np.random.default_rng(0).choice(len(titanic.y), 300, replace=False)
    brl = titanic.X.iloc[np.sort(rows)].reset_index(drop=True)
    brl["survived"] = np.array(titanic.target_names)[titanic.y[np.sort(rows)]]
    brl.to_csv(FOLDER / "brl_titanic.csv", index=False)

    smiley = make_smiley_faces()
    smiley.X.to_csv(FOLDER / "bcm_smiley_faces.csv", index=False)

    faces = make_cartoon_faces(200, 0)
    pd.DataFrame(faces.X, columns=faces.feature_names).to_csv(FOLDER / "mgm_cartoon_faces.csv", index=False)

    mixture = make_gaussian_mixture(50, seed=0)
    points = pd.DataFrame(mixture.X.round(4), columns=["x1", "x2"])
    points["class"] = np.array(["a", "b", "c"])[mixture.y]
    points.to_csv(FOLDER / "prototype_selection_mixture.csv", index=False)


if __name__ == "__main__":
    main()
