"""Every notebook in notebooks/ runs top to bottom without error with small settings, and is stored with
the outputs of a run with its full settings (``notebooks/execute.py``).

Notebooks read INTERPRETABLE_ZOO_QUICK=1 to shrink their settings. A notebook whose metadata holds
``{"interpretable_zoo": {"needs_data": true}}`` is skipped, with the reason, when the real datasets are absent.
"""

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest

FOLDER = Path(__file__).parents[1] / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("*.ipynb"))
_spec = importlib.util.spec_from_file_location("execute_notebooks", FOLDER / "execute.py")
execute_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_notebooks)


def errors_in(notebook) -> list:
    return [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path):
    if nbformat.read(path, as_version=4).metadata.get("interpretable_zoo", {}).get("needs_data"):
        data = os.environ.get("INTERPRETABLE_ZOO_DATA")
        if not data or not Path(data).is_dir():
            pytest.skip(f"{path.name} needs the real datasets and INTERPRETABLE_ZOO_DATA is not a folder")
    notebook = execute_notebooks.execute(path, quick=True)  # raises CellExecutionError on any failing cell
    assert not errors_in(notebook)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_with_the_outputs_of_a_full_run(path):
    """Stored as ``execute.py`` leaves it: every code cell run once, in order, in one kernel, with full settings."""
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), f"{path.name}: rerun execute.py"
    assert notebook.metadata["interpretable_zoo"]["executed"]["settings"] == "full"
    assert not errors_in(notebook)
    drawing = [i for i, cell in enumerate(code) if any(
        ("plot" in line or "plt." in line) and not line.startswith(("import ", "from ")) for line in cell.source.splitlines()
    )]  # fmt: skip
    blank = [i for i in drawing if not any("image/png" in output.get("data", {}) for output in code[i].outputs)]
    assert drawing
    if notebook.metadata["interpretable_zoo"]["executed"].get("figures", True):  # False: a run that drew off-screen
        assert not blank, f"{path.name}: code cells {blank} draw but store no figure"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_name_no_absolute_path(path):
    """Warnings print the file that raised them; the stored notebook holds it relative to the repository or
    to site-packages (``execute.with_relative_paths``), not this machine's folders."""
    notebook = nbformat.read(path, as_version=4)
    printed = [o.get("text", "") + "".join(o.get("traceback", [])) for cell in notebook.cells for o in cell.get("outputs", [])]
    assert not [text for text in printed if execute_notebooks.ABSOLUTE_PATH.search(text)]


def test_absolute_paths_in_outputs_are_made_relative():
    """The rewrite ``execute.py`` applies, on a stored output of a warning from this package and one from ArviZ."""
    root = execute_notebooks.ROOT
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "stream", name="stderr", text=f"{root}/inference/bcm.py:459: UserWarning: x\n"
                                      f"{root}/.venv/lib/python3.11/site-packages/arviz/stats/stats.py:782: UserWarning: y\n")])])
    text = execute_notebooks.with_relative_paths(notebook).cells[0].outputs[0]["text"]
    assert text == "inference/bcm.py:459: UserWarning: x\narviz/stats/stats.py:782: UserWarning: y\n"

