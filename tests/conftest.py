"""Shared fixtures: the real-data folder (tests needing it skip with the reason when it is absent)."""

import os
from pathlib import Path

import pytest

DATA_ENV = "INTERPRETABLE_ZOO_DATA"


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
