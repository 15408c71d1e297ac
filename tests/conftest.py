"""Shared fixtures: the real-data folder (tests needing it skip with the reason when it is absent); Python's
collector thresholds for the workers."""

import gc
import os
import warnings
from pathlib import Path

import pytest

from interpretable_zoo import compiled_programs

DATA_ENV = "INTERPRETABLE_ZOO_DATA"
GC_THRESHOLDS = (50_000, 20, 100)
"""Python's cyclic garbage collector runs once per this many net allocations (generation 0), and every this many
collections of the generation below (1 and 2). A worker traces thousands of programs and keeps the compiled
ones, so each collection walks a growing heap; Python's defaults (700, 10, 10) collect far more often than
that heap needs (docs/decisions/test-suite.md, "Python's garbage collector")."""


def pytest_configure(config):
    gc.set_threshold(*GC_THRESHOLDS)


@pytest.fixture(scope="session")
def data_home() -> Path:
    """The folder of real datasets named by INTERPRETABLE_ZOO_DATA; skips the test when it is unset or absent."""
    value = os.environ.get(DATA_ENV)
    if not value:
        pytest.skip(f"{DATA_ENV} is not set; real-data tests need the shared datasets folder")
    path = Path(value)
    if not path.is_dir():
        pytest.skip(f"{DATA_ENV}={value} is not a folder; real-data tests need the shared datasets folder")
    return path


@pytest.fixture
def whole_chunks():
    """Tempered runs cut into chunks of ``scans_per_chunk`` scans whatever their pace (by default a run's
    first chunk is one scan and a chunk runs at most ``convergence.CHUNK_SECONDS``), for tests that
    count chunks; a patch of its own, which the test's ``monkeypatch.undo()`` leaves in place."""
    from interpretable_zoo.inference import convergence

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(convergence, "FIRST_CHUNK_SCANS", 1 << 62)
        patch.setattr(convergence, "CHUNK_SECONDS", float("inf"))
        yield


WORKER_MAPPING_SHARE = 0.3
"""A test worker runs many files in one process and compiles thousands of programs: past this share of
``vm.max_map_count`` it releases them after a file (``interpretable_zoo.compiled_programs``), before a fit's
own check (at half) would warn inside a test."""


@pytest.fixture(scope="module", autouse=True)
def compiled_programs_released_between_files():
    yield
    with warnings.catch_warnings():  # the release's warning is for users, between two of their fits
        warnings.simplefilter("ignore", RuntimeWarning)
        compiled_programs.release_if_mappings_run_low(WORKER_MAPPING_SHARE)
