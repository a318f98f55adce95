"""One plain-text table renderer for `gpucost gpus`, `prices show` and `runs`."""

from __future__ import annotations

from gpucost.format import text_table

HEADER = ["provider", "GPUs", "$/h"]
ROWS = [["aws", "8", "32.773"], ["runpod", "1", "0.69"], ["lambda", "8", "14.32"]]


def test_numbers_right_text_left_two_spaces_apart() -> None:
    assert text_table(HEADER, ROWS, right={1, 2}).splitlines() == [
        "provider  GPUs     $/h",
        "aws          8  32.773",
        "runpod       1    0.69",
        "lambda       8   14.32",
    ]


def test_rule_under_the_header_and_no_trailing_blanks() -> None:
    lines = text_table(["name", "note"], [["a", ""], ["bb", "x"]], rule=True).splitlines()
    assert lines == ["name  note", "----  ----", "a", "bb    x"]


def test_a_header_wider_than_its_cells_sets_the_width_and_no_rows_is_a_header() -> None:
    assert text_table(["instance", "$"], [], right={1}) == "instance  $"
    assert text_table(["a", "b"], [["long cell", "1"]]) == "a          b\nlong cell  1"
