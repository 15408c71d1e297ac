"""Run the notebooks top to bottom and store them with their outputs.

``python notebooks/execute.py [NAME ...]`` runs the named notebooks (default: all) with their full
settings, as committed, and records the run in each notebook's metadata (``interpretable_zoo.executed``:
settings, seconds, package version). The test suite runs them with ``quick=True`` (small settings, the
environment variable ``INTERPRETABLE_ZOO_QUICK=1``) and stores nothing.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.corpus.words import generate_corpus_id

FOLDER = Path(__file__).parent
ROOT = FOLDER.parent
CELL_TIMEOUT_S = 3600
# A warning's location as Python prints it: an absolute path into the repository or an installed package.
ABSOLUTE_PATH = re.compile(r"/\S*?/site-packages/|" + re.escape(str(ROOT)) + "/")


def execute(path: Path, *, quick: bool) -> nbformat.NotebookNode:
    """The notebook at ``path`` executed in a fresh kernel (raises CellExecutionError on a failing cell)."""
    notebook = nbformat.read(path, as_version=4)
    # quick runs draw off-screen; full runs keep the kernel's inline backend, so the figures are stored
    settings = {"INTERPRETABLE_ZOO_QUICK": "1" if quick else "0", "MPLBACKEND": "Agg" if quick else None}
    saved = {name: os.environ.get(name) for name in settings}
    _set_environment(settings)  # the kernel inherits this process's environment
    try:
        NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()  # fmt: skip
    finally:
        _set_environment(saved)
    return notebook


def _set_environment(values: dict) -> None:
    """Set the environment variables in ``values``; a value None removes the variable."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def with_relative_paths(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``notebook`` with the absolute paths in its printed outputs made relative to the repository or to
    site-packages (warnings print the file that raised them), so a stored notebook names no machine's folders."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                output["text"] = ABSOLUTE_PATH.sub("", output["text"])
            elif output.get("output_type") == "error":
                output["traceback"] = [ABSOLUTE_PATH.sub("", line) for line in output["traceback"]]
    return notebook


def main(names: list[str]) -> None:
    from interpretable_zoo import __version__

    paths = [FOLDER / f"{name}.ipynb" for name in names] if names else sorted(FOLDER.glob("*.ipynb"))
    for path in paths:
        start = time.perf_counter()
        notebook = with_relative_paths(execute(path, quick=False))
        seconds = time.perf_counter() - start
        notebook.metadata.setdefault("interpretable_zoo", {})["executed"] = {
            "settings": "full", "seconds": round(seconds), "version": __version__, "figures": True,
        }  # fmt: skip
        for cell in notebook.cells:
            cell.setdefault("id", generate_corpus_id())  # nbformat 4.5 gives every cell an id
        nbformat.write(notebook, path)
        print(f"{path.name}: {seconds:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
