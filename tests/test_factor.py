"""Factorised columns (gpucost.factor): the codes a ranking groups offers by."""

from __future__ import annotations

import numpy as np

from gpucost.factor import Factor, packed_codes
from gpucost.model.patterns import lowered
from gpucost.pricing.snapshot import Offers


def test_a_factor_holds_each_distinct_value_once_sorted_and_every_row_points_at_its_own():
    column = np.array(["gcp", "aws", "gcp", "vast", "aws"])
    factor = Factor.of(column)
    assert factor.values.tolist() == ["aws", "gcp", "vast"]
    assert factor.radix == 3
    assert factor.values[factor.codes].tolist() == column.tolist()
    assert factor.equals("gcp").tolist() == [True, False, True, False, False]
    taken = factor.take(np.array([3, 0]))
    assert taken.values[taken.codes].tolist() == ["vast", "gcp"]


def test_missing_numbers_are_one_value():
    factor = Factor.of(np.array([1.5, np.nan, 2.0, np.nan]))
    assert factor.radix == 3
    assert factor.codes[1] == factor.codes[3] != factor.codes[0]


def test_equal_cells_share_one_string_object():
    shared = Factor.of(np.array(["us-east-1", "eu-west-1", "us-east-1"])).objects()
    assert shared.dtype == object
    assert shared.tolist() == ["us-east-1", "eu-west-1", "us-east-1"]
    assert shared[0] is shared[2]


def test_packed_codes_are_equal_exactly_where_rows_agree_in_every_column():
    rng = np.random.default_rng(3)
    columns = [rng.integers(0, k, 500) for k in (2, 3, 5)]
    code = packed_codes([Factor.of(c) for c in columns], 500)
    rows = list(zip(*(c.tolist() for c in columns), strict=True))
    for i in range(0, 500, 7):
        for j in range(500):
            assert (code[i] == code[j]) == (rows[i] == rows[j])
    # ordered as the columns' values, first column first
    assert np.array_equal(np.argsort(code, kind="stable"),
                          np.lexsort(columns[::-1]))


def test_packed_codes_renumber_before_the_digits_overflow_an_int64():
    # four columns of 2**20 values each: 2**80 combinations. Packed without renumbering, a
    # first digit of 16 would be 16 * 2**60 = 2**64, the same int64 as a first digit of 0.
    wide = np.arange(1 << 20)
    first = Factor(wide, np.array([0, 16], dtype=np.int64))
    rest = [Factor(wide, np.array([5, 5], dtype=np.int64)) for _ in range(3)]
    code = packed_codes([first, *rest], 2)
    assert code[0] != code[1]


def test_row_codes_are_dense_and_treat_missing_prices_as_equal():
    offers = Offers.from_columns({
        "provider": ["aws", "aws", "gcp", "aws"], "region": ["r1", "r1", "r1", "r1"],
        "instance_type": ["a", "a", "a", "a"], "gpu": ["T4"] * 4,
        "gpu_count": [1.0] * 4, "price_hr": [1.0, 1.0, 1.0, 2.0],
        "spot_price_hr": [None, None, 0.5, None]})
    codes = offers.row_codes(("provider", "price_hr", "spot_price_hr"))
    assert codes.tolist() == [0, 0, 2, 1]


def test_lowered_lowers_each_spelling_and_keeps_rows_matched():
    names = lowered(np.array(["AWS", "aws", "Vast"]))
    assert names.equals("aws").tolist() == [True, True, False]
    assert names.equals("vast").tolist() == [False, False, True]
    assert lowered(Factor.of(np.array(["GCP"]))).equals("gcp").tolist() == [True]
