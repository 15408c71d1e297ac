"""Every public function and class (``interpretable_zoo``, ``interpretable_zoo.diagnostics``,
``interpretable_zoo.datasets``) has an example in its docstring, and every example runs and prints what
it shows (doctest, with ``...`` for the digits that vary between machines). Examples that read the real
datasets are skipped, with the reason, when they are absent."""

import doctest
import inspect
import os
from pathlib import Path

import pytest

import interpretable_zoo as iz
from interpretable_zoo import datasets, diagnostics

NEEDS_DATA = "load_"  # the loaders of real datasets (all but the bundled ones) read INTERPRETABLE_ZOO_DATA
BUNDLED = {"load_digits", "load_wine", "load_breast_cancer", "load_titanic_table"}


def public_objects() -> list[tuple[str, object]]:
    found = []
    for module, prefix in [(iz, "iz"), (diagnostics, "iz.diagnostics"), (datasets, "iz.datasets")]:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                found.append((f"{prefix}.{name}", obj))
    return found


PUBLIC = public_objects()


def examples_of(obj) -> list[doctest.Example]:
    return doctest.DocTestParser().get_examples(inspect.getdoc(obj) or "")


def test_every_public_function_and_class_has_an_example():
    missing = [name for name, obj in PUBLIC if not examples_of(obj)]
    assert not missing, f"no >>> example in the docstring of {missing}"


@pytest.mark.parametrize("name, obj", PUBLIC, ids=[name for name, _ in PUBLIC])
def test_docstring_example_runs(name, obj, monkeypatch, tmp_path):
    short = name.rsplit(".", 1)[1]
    if short.startswith(NEEDS_DATA) and short not in BUNDLED:
        data = os.environ.get("INTERPRETABLE_ZOO_DATA")
        if not data or not Path(data).is_dir():
            pytest.skip(f"the example of {name} reads the real datasets and INTERPRETABLE_ZOO_DATA is not a folder")
    monkeypatch.chdir(tmp_path)  # examples that save files write here
    monkeypatch.setenv("MPLBACKEND", "Agg")
    test = doctest.DocTestParser().get_doctest(inspect.getdoc(obj) or "", {"iz": iz}, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []  # doctest's account of each failing example: what it expected and what came out
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
