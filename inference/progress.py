"""Progress bars of long fits: on by default outside CI (the environment variable ``CI`` unset), as NumPyro's."""

from __future__ import annotations

import os

from interpretable_zoo.inference.validation import check_flag


def bar(enabled: bool | None, description: str, *, total: int | None = None, unit: str = " steps"):
    """A tqdm bar, or None when ``enabled`` is False (or None, and ``CI`` is set); close it when done."""
    if enabled is None:
        enabled = not os.environ.get("CI")
    if not check_flag(enabled, "progress_bar"):
        return None
    from tqdm.auto import tqdm

    return tqdm(desc=description, total=total, unit=unit, leave=True)
