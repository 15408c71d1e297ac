"""Prototype selection on real data: the USPS reproduction of Bien & Tibshirani (2011), sec. 6.2."""

import numpy as np
import pytest

from interpretable_zoo.datasets import load_usps
from interpretable_zoo.inference.prototype_selection import select_prototypes
from interpretable_zoo.inference.set_cover import dissimilarity_quantile


def test_usps_greedy_at_fifth_percentile(data_home):
    """Euclidean USPS at eps = the 5th percentile of the 7291 * 7290 / 2 training distances (R's quantile of dist()).

    The authors' R package gives 526 prototypes and 10.01 % test error (201 of 2007) there, with
    integer-program objective 1030.1; the percentile taken over the full 7291 x 7291 matrix
    (diagonal zeros and both triangles) would be 5.32714 and give 530 prototypes instead.
    """
    train, test = load_usps("train", data_home), load_usps("test", data_home)
    eps = dissimilarity_quantile(train.X, 0.05, "l2")
    assert eps == pytest.approx(5.330003, abs=1e-6)
    result = select_prototypes(train.X, train.y, eps=eps)
    assert len(result.prototypes) == 526
    assert np.sum(result.predict(test.X) != test.y) == 201
    assert result.objective == pytest.approx(1030.07, abs=0.01)
    assert result.class_counts() == {0: 54, 1: 1, 2: 134, 3: 57, 4: 66, 5: 84, 6: 31, 7: 19, 8: 61, 9: 19}
    # the first prototype is a "1" newly covering 1001 ones, with 86 other digits in its ball
    assert (result.prototype_classes[0], result.correct_covers[0], result.wrong_covers[0]) == (1, 1001, 86)
