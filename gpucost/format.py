"""Money, durations and rates for people: the one place every front end formats them.

Tables want short figures ("$1,235", "12 min"); explanations want exact ones ("$1,234.56",
"12.3 min"), and a local run can cost a fraction of a cent, which must not read as "$0.00".
"""

from __future__ import annotations

import math


def amount(value: float) -> str:
    """A sum of money without its unit: to the cent, or two significant digits below a cent
    (a local run can cost a fraction of one), never in exponent form. NaN reads "-"."""
    if math.isnan(value):
        return "-"
    if 0 < abs(value) < 0.005:
        return f"{value:.{1 - math.floor(math.log10(abs(value)))}f}"
    return f"{value:,.2f}"


def usd_text(value: float) -> str:
    """A sum of money in running text and reports: "1,234.56 USD"."""
    return f"{amount(value)} USD"


def usd(value: float, *, exact: bool = False) -> str:
    """Dollars: whole dollars from $100 in tables; :func:`amount` with a $ when ``exact``.
    NaN reads "-"."""
    if math.isnan(value):
        return "-"
    if exact:
        return "-" + "$" + amount(-value) if value < 0 else "$" + amount(value)
    if abs(value) >= 100:
        return f"${value:,.0f}"
    return f"${value:,.2f}"


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
