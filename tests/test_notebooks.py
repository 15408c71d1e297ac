"""Every notebook in notebooks/ runs top to bottom without error, with small settings.

Notebooks read INTERPRETABLE_ZOO_QUICK=1 to shrink their settings. A notebook whose metadata holds
``{"interpretable_zoo": {"needs_data": true}}`` is skipped, with the reason, when the real datasets are absent.
"""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 600


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    if notebook.metadata.get("interpretable_zoo", {}).get("needs_data"):
        data = os.environ.get("INTERPRETABLE_ZOO_DATA")
        if not data or not Path(data).is_dir():
            pytest.skip(f"{path.name} needs the real datasets and INTERPRETABLE_ZOO_DATA is not a folder")
    monkeypatch.setenv("INTERPRETABLE_ZOO_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError, with the failing cell and traceback, on any error
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    stored = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code" and cell.outputs]
    assert not stored, f"{path.name}: code cells {stored} carry outputs; clear them before committing"
