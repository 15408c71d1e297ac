"""Shape buckets: sizes rounded up to a few values per doubling, so that fits of nearby sizes pad their arrays
to one shape and share one compiled program."""

from __future__ import annotations


def size_bucket(n: int, per_doubling: int) -> int:
    """The smallest m 2^e >= n with per_doubling <= m < 2 per_doubling (n itself up to per_doubling): at most
    1 / per_doubling more than n."""
    if n <= per_doubling:
        return n
    scale = 2 ** ((n - 1).bit_length() - per_doubling.bit_length())
    return -(-n // scale) * scale
