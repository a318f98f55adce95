"""Money, durations and rates for people: the one place every front end formats them.

Tables want short figures ("$1,235", "12 min"); explanations want exact ones ("$1,234.56",
"12.3 min"). Money under a dollar keeps three significant digits ("$0.0123", "$0.548"): jobs that
cost cents must still read apart, and a local run's fraction of a cent must not read "$0.00".
Every front end rounds a sum the same way, so one figure never reads two ways in one plan.
Plain-text tables (`gpucost gpus`, `prices show`, `runs`) are aligned by :func:`text_table`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

SIGNIFICANT = 3  # digits of a sum under a dollar


def amount(value: float) -> str:
    """A sum of money without its unit, never in exponent form: to the cent from a dollar,
    three significant digits below one ("0.0123", "0.69", "0.004"). NaN reads "-"."""
    if math.isnan(value):
        return "-"
    if value != 0 and abs(value) < 1:
        decimals = SIGNIFICANT - 1 - math.floor(math.log10(abs(value)))
        text = f"{value:.{decimals}f}"
        if abs(float(text)) < 1:  # 0.9996 rounds to 1.000: a dollar, written as dollars
            # "0.69", not "0.690": zeros past the cent add no digit that tells sums apart
            whole, _, cents = text.partition(".")
            return f"{whole}.{cents[:2]}{cents[2:].rstrip('0')}"
    return f"{value:,.2f}"


def usd_text(value: float) -> str:
    """A sum of money in running text and reports: "1,234.56 USD"."""
    return f"{amount(value)} USD"


def usd(value: float, *, exact: bool = False) -> str:
    """Dollars, rounded as :func:`amount`; in tables (not ``exact``) whole dollars from $100.
    NaN reads "-"."""
    if math.isnan(value):
        return "-"
    if not exact and abs(value) >= 100:
        return f"-${-value:,.0f}" if value < 0 else f"${value:,.0f}"
    return "-$" + amount(-value) if value < 0 else "$" + amount(value)


def hours(value: float, *, exact: bool = False) -> str:
    """A duration given in hours: s, min, h or d, whichever reads best. NaN reads "-"."""
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "never"
    if value < 1 / 60:
        return f"{value * 3600:.{1 if exact else 0}f} s"
    if value < 1:
        return f"{value * 60:.{1 if exact else 0}f} min"
    if value < 48:
        return f"{value:.{2 if exact else 1}f} h"
    return f"{value / 24:.1f} d"


def rate(value: float) -> str:
    """A throughput: 1.23M, 45.6k, 789, 1.23."""
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def count(value: float) -> str:
    """A count that may be fractional: 1,281,167 or 2.5."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], *,
               right: Collection[int] = (), rule: bool = False) -> str:
    """Cells aligned under their header, two spaces apart, no trailing blanks: columns whose
    index is in ``right`` (numbers) right-aligned, the others left; ``rule`` puts a line of
    dashes under the header."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    ruler = [line(["-" * w for w in widths])] if rule else []
    return "\n".join([line(header), *ruler, *(line(r) for r in rows)])
