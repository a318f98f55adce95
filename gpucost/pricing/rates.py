"""Storage, data-transfer and month conventions per provider: the prices a $/hour list leaves out.

A price catalog gives $/h for the machine; a job also pays for the disk it keeps (while running
and, if stopped, while idle), for data out, and some marketplaces for data in. Each provider's
figures live in its declaration (:mod:`gpucost.providers`, with a source and an "as of" date);
importers copy them into each offer through :func:`offer_rates` (snapshot columns
``storage_gb_month``, ``egress_gb``, ``ingress_gb``, ``month_hours``). A marketplace that prices
storage per offer has ``None`` there and the offer's own figure in a snapshot taken from its API.
"""

from __future__ import annotations

import math

from gpucost import providers
from gpucost.providers import HYPERSCALER_MONTH_HOURS, MARKETPLACE_MONTH_HOURS, Rates

__all__ = ["HYPERSCALER_MONTH_HOURS", "MARKETPLACE_MONTH_HOURS", "Rates", "month_hours_for",
           "offer_rates", "rates_for"]

# Providers gpucost knows nothing more about: month convention only.
_DEFAULT_MONTH_HOURS = HYPERSCALER_MONTH_HOURS


def rates_for(provider: str) -> Rates | None:
    known = providers.find(provider)
    return known.rates if known else None


def month_hours_for(provider: str) -> float:
    known = providers.find(provider)
    return known.month_hours if known else _DEFAULT_MONTH_HOURS


def offer_rates(provider: str) -> dict[str, float]:
    """The snapshot columns for ``provider``: NaN where its declaration does not know the figure."""
    known = rates_for(provider)

    def value(x: float | None) -> float:
        return math.nan if x is None else x

    if known is None:
        return {"storage_gb_month": math.nan, "egress_gb": math.nan, "ingress_gb": math.nan,
                "month_hours": month_hours_for(provider)}
    return {"storage_gb_month": value(known.storage_gb_month), "egress_gb": value(known.egress_gb),
            "ingress_gb": value(known.ingress_gb), "month_hours": month_hours_for(provider)}
