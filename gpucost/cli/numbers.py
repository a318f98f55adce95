"""Checked numbers for command-line options: a type for argparse that refuses, in one line
naming the option, what is not a number, not finite, or outside the option's stated range
(:mod:`gpucost.limits`). `--epochs 1e300`, `-k 0` and `--stale-days -1` stop here with exit 2
instead of printing a plan for 1e306 samples."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) and abs(x) < 1e15 else f"{x:g}"


def number(
    low: float, high: float, *, low_open: bool = False
) -> Callable[[str], float]:
    """A float in [low, high] (or (low, high] with ``low_open``)."""
    lower = f"above {_fmt(low)}" if low_open else f"at least {_fmt(low)}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < low or (low_open and value == low) or value > high:
            raise argparse.ArgumentTypeError(
                f"must be {lower} and at most {_fmt(high)}, got {text}"
            )
        return value

    return parse


def positive(high: float) -> Callable[[str], float]:
    """A float in (0, high]."""
    return number(0.0, high, low_open=True)


def count(low: int, high: int) -> Callable[[str], int]:
    """An integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be at least {low:,} and at most {high:,}, got {text}"
            )
        return value

    return parse
