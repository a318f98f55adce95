"""The cheapest offers in a table of offers: per GPU-hour for one GPU (`gpucost prices show
--gpu`), and of one instance type (`gpucost breakeven --offer`). Pure functions of the offers,
so the command line, the TUI and the Python API find the same ones."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpucost.pricing.snapshot import Offers


@dataclass(frozen=True)
class GpuHourOffer:
    """One offer's place and on-demand price, with its price per GPU-hour (fields in the order
    `prices show --format json` lists them)."""

    provider: str
    region: str
    instance_type: str
    zone: str
    gpu_count: float
    price_hr: float
    spot_price_hr: float | None  # None: no spot market
    usd_per_gpu_hr: float  # rounded to 6 decimals, as published
    source: str
    date: str  # YYYY-MM-DD of the prices


def cheapest_per_gpu_hour(offers: Offers, gpu: str, limit: int) -> tuple[GpuHourOffer, ...]:
    """The ``limit`` cheapest offers of ``gpu`` (its catalog name) by on-demand $ per GPU-hour,
    one per (provider, region, instance type): the first in price order, ties in table order."""
    offers = offers.select(offers.gpu == gpu)
    per_gpu = offers.price_hr / offers.gpu_count
    seen: set[tuple[str, str, str]] = set()
    out: list[GpuHourOffer] = []
    for i in np.argsort(per_gpu, kind="stable").tolist():
        if len(out) == limit:
            break
        key = (str(offers.provider[i]), str(offers.region[i]),
               str(offers.instance_type[i]))
        if key in seen:
            continue
        seen.add(key)
        spot = float(offers.spot_price_hr[i])
        out.append(GpuHourOffer(
            provider=key[0], region=key[1], instance_type=key[2],
            zone=str(offers.zone[i]), gpu_count=float(offers.gpu_count[i]),
            price_hr=float(offers.price_hr[i]),
            spot_price_hr=None if math.isnan(spot) else spot,  # NaN: no spot market
            usd_per_gpu_hr=round(float(per_gpu[i]), 6),
            source=str(offers.source[i]), date=str(offers.fetched_at[i])[:10]))
    return tuple(out)


def cheapest_of_instance(offers: Offers, instance_type: str, provider: str = "") -> int | None:
    """The row of the cheapest on-demand offer of ``instance_type`` (on ``provider`` when one is
    named; the first in table order among equal prices), or None when there is none."""
    rows = offers.instance_type == instance_type
    if provider:
        rows &= offers.provider == provider
    found = np.flatnonzero(rows)
    if not found.size:
        return None
    return int(found[np.argmin(offers.price_hr[found])])
