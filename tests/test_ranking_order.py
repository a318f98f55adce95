"""The ranking's order: by the first key, then the second, then as given (np.lexsort's)."""

from __future__ import annotations

import numpy as np

from gpucost.planning.ranking import _sorted_by


def test_the_order_is_lexsorts_with_ties_and_missing_values():
    rng = np.random.default_rng(7)
    for size in (0, 1, 2, 50, 5_000):
        # few distinct values: many ties in both keys, some of them NaN
        first = rng.integers(0, 20, size).astype(float)
        second = rng.integers(0, 5, size).astype(float)
        first[rng.random(size) < 0.1] = np.nan
        second[rng.random(size) < 0.1] = np.nan
        assert np.array_equal(_sorted_by(first, second), np.lexsort((second, first)))


def test_distinct_first_keys_need_no_second_sort():
    first = np.array([3.0, 1.0, 2.0, -0.0, 0.0])
    second = np.array([0.0, 9.0, 1.0, 2.0, 1.0])
    assert _sorted_by(first, second).tolist() == np.lexsort((second, first)).tolist()
