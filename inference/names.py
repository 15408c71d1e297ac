"""Names of features and items carried into explanations: given by the caller, or numbered defaults."""

from __future__ import annotations

from collections import Counter


def resolve_names(names, count: int, *, argument: str, default_prefix: str = "x", counted: str = "columns of X",
                  distinct: bool = True) -> tuple[str, ...]:
    """``names`` as a tuple of ``count`` strings, or ``{default_prefix}{i}`` when ``names`` is None.

    A length mismatch, or with ``distinct`` a repeated name (which would make explanations ambiguous), is a
    ValueError naming ``argument``, e.g. "feature_names: has 3 names for 4 columns of X". Items may share a
    name (two films of one title); a lookup by such a name is then refused where it is made.
    """
    if names is None:
        return tuple(f"{default_prefix}{i}" for i in range(count))
    names = tuple(str(name) for name in names)
    if len(names) != count:
        raise ValueError(f"{argument}: has {len(names)} names for {count} {counted}")
    if distinct and len(set(names)) < len(names):
        repeated, times = Counter(names).most_common(1)[0]
        raise ValueError(f"{argument}: {repeated!r} names {times} of the {counted}; give each a name of its own")
    return names
