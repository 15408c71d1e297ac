"""Shape buckets (``inference.shapes``): sizes padded to a few values per doubling."""

from interpretable_zoo.inference import set_cover
from interpretable_zoo.inference.shapes import size_bucket


def test_size_buckets():
    assert [size_bucket(n, 8) for n in (1, 8, 9, 16, 17, 19, 30, 33, 100)] == [1, 8, 9, 16, 18, 20, 30, 36, 104]
    assert [size_bucket(n, 4) for n in (4, 5, 9, 10, 33, 56, 57, 100)] == [4, 5, 10, 10, 40, 56, 64, 112]
    assert [size_bucket(n, 1) for n in (1, 2, 3, 5, 300)] == [1, 2, 4, 8, 512]
    for per_doubling in (1, 4, 8):
        for n in range(1, 2000):
            bucket = size_bucket(n, per_doubling)
            assert n <= bucket <= max(n, (1 + 1 / per_doubling) * n)


def test_prototype_selection_tiles_round_up_to_eight_sizes_per_doubling_from_64():
    assert [set_cover._bucket(n) for n in (1, 64, 65, 100, 128, 129, 1000)] == [64, 64, 72, 104, 128, 144, 1024]
