# `make bench ARGS="-k NAME"` runs only matching benchmarks.
# Each target creates .venv when missing and installs the package (editable) with what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= $(abspath ../shared/datasets)

.PHONY: demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/izoo demo

# The tests share a JAX compilation cache that lives for this run only: a program that several tests
# or notebooks compile alike (same shapes and constants) is compiled once.
test: $(VENV)/.installed
	cache=$$(mktemp -d) && trap 'rm -rf "$$cache"' EXIT && \
	JAX_COMPILATION_CACHE_DIR=$$cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0.5 \
	INTERPRETABLE_ZOO_DATA=$${INTERPRETABLE_ZOO_DATA:-$(DATA)} $(BIN)/python -m pytest -q -n 2 --dist loadfile

bench: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	INTERPRETABLE_ZOO_DATA=$${INTERPRETABLE_ZOO_DATA:-$(DATA)} $(BIN)/python -m benchmarks $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
