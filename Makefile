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

# The tests (their workers and notebook kernels) share the package's compilation cache in a folder that
# lives for this run only: a program that several tests or notebooks compile alike (same shapes and
# constants) is compiled once, and nothing is read from or left in the user's cache. The suite runs many
# small problems once each, so XLA compilation dominates it: the backend's optimisation level 0 compiles
# about twice as fast, and XLA's older loop emitters (fusion emitters off) a further 20-30 % faster
# (the programs compute the same functions; only their speed differs). The HLO verifier, which XLA runs
# after every pass to check the module, is left out: about a tenth of compiling, and the programs are the
# same. Where the machine has jemalloc (Debian: libjemalloc2), the tests run with it: XLA's compiler
# spends about a tenth of its time in glibc's malloc, and compiles about a sixth faster with jemalloc
# (docs/decisions/test-suite.md).
JEMALLOC := $(shell /sbin/ldconfig -p 2>/dev/null | awk '/libjemalloc\.so\.2 /{print $$NF; exit}')

test: $(VENV)/.installed
	cache=$$(mktemp -d) && trap 'rm -rf "$$cache"' EXIT && \
	INTERPRETABLE_ZOO_CACHE_DIR=$$cache $(if $(JEMALLOC),LD_PRELOAD="$(JEMALLOC)$${LD_PRELOAD:+ $$LD_PRELOAD}") \
	XLA_FLAGS="$${XLA_FLAGS:-} --xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false --xla_disable_hlo_passes=hlo-verifier" \
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
