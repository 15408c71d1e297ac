# `make bench ARGS="-k NAME"` runs only matching benchmarks.
# Each target creates .venv when missing and installs the package (editable) with what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= $(abspath ../shared/datasets)

.PHONY: demo test docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/izoo demo

# The tests run as users' fits do: at XLA's default optimisation level, and without the persistent
# compilation cache (INTERPRETABLE_ZOO_CACHE_DIR=off: nothing is read from or left in the user's cache; the
# tests of the cache itself use caches of their own). Runs at optimisation level 0, which compiles about
# twice as fast, lost workers to segmentation faults inside XLA (compiling a program, serialising it to the
# shared cache, deserialising it), at XLA's older loop emitters and at its default ones alike, with the
# cache and without it; fits at the default level, the benchmarks' many hours included, have shown none.
test: $(VENV)/.installed
	INTERPRETABLE_ZOO_CACHE_DIR=off \
	INTERPRETABLE_ZOO_DATA=$${INTERPRETABLE_ZOO_DATA:-$(DATA)} $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15

# The site (docs/_build/html) from the docstrings, the guides and the notebooks' stored outputs; offline.
# A warning, a broken cross-reference included, fails the build.
docs: $(VENV)/.installed
	$(BIN)/python -m sphinx -b html -n -W --keep-going docs docs/_build/html

bench: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	INTERPRETABLE_ZOO_DATA=$${INTERPRETABLE_ZOO_DATA:-$(DATA)} $(BIN)/python -m benchmarks $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info docs/_build docs/api/generated docs/examples/notebooks
