"""Interruption rates: how often spot capacity (or an unreliable host) goes away, per hour.

Rates come from a small sourced table (``interruption_rates.csv`` beside this module), matched by
provider, market and instance-type pattern, first match wins; the user can override the rate
for everything. Published figures are turned into per-hour rates here:

- AWS Spot Instance Advisor (and Azure's eviction-rate bands) give the share of instances of a
  type interrupted over the trailing month, in bands <5 %, 5-10 %, 10-15 %, 15-20 %, >20 %. The
  band's middle (25 % for ">20 %") as a monthly probability ``p`` gives
  ``rate = -ln(1 - p) / 730`` per hour.
- Vast.ai states each host's reliability ``r`` (the fraction of time it was up). With outages
  of about an hour, a host is lost ``(1 - r) / 1 h`` times per hour.
"""

from __future__ import annotations

import csv
import fnmatch
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpucost.errors import InputError

TABLE_PATH = Path(__file__).with_name("interruption_rates.csv")
MONTH_HOURS = 730.0
MEAN_OUTAGE_HOURS = 1.0

# band -> the monthly interruption probability it stands for
BANDS: dict[str, float] = {
    "<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175, ">20%": 0.25,
}


def band_rate_per_hr(band: str) -> float:
    """Per-hour rate for a monthly frequency band ("<5%", "5-10%", ... ">20%")."""
    key = band.replace(" ", "")
    if key not in BANDS:
        raise InputError(f"unknown interruption band {band!r}",
                         hint="use one of " + ", ".join(BANDS))
    return -math.log1p(-BANDS[key]) / MONTH_HOURS


def reliability_rate_per_hr(reliability: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per-hour host loss rate from a 0..1 reliability score (NaN -> 0: not stated)."""
    r = np.clip(np.nan_to_num(reliability, nan=1.0), 0.0, 1.0)
    return (1.0 - r) / MEAN_OUTAGE_HOURS


@dataclass(frozen=True)
class RateRule:
    provider: str  # or "*"
    market: str  # on-demand | spot
    instance: str  # fnmatch pattern on the instance type
    rate_per_hr: float
    use_host_reliability: bool
    confidence: str
    source: str

    def matches(self, provider: str, market: str, instance_type: str) -> bool:
        return (self.provider in ("*", provider) and self.market == market
                and fnmatch.fnmatchcase(instance_type, self.instance))


@lru_cache(maxsize=1)
def rules() -> tuple[RateRule, ...]:
    """The rates table, parsed once."""
    lines = [ln for ln in TABLE_PATH.read_text(encoding="utf-8").splitlines()
             if ln and not ln.startswith("#")]
    out = []
    for row in csv.DictReader(lines):
        rate = band_rate_per_hr(row["band"]) if row["band"] else float(row["rate_per_hr"])
        label = f"{row['band']} monthly band" if row["band"] else f"{rate:g}/h"
        out.append(RateRule(row["provider"], row["market"], row["instance"], rate,
                            row["reliability"] == "host", row["confidence"],
                            f"{label}: {row['source']}"))
    return tuple(out)


def rule_for(provider: str, market: str, instance_type: str) -> RateRule:
    for rule in rules():
        if rule.matches(provider.lower(), market, instance_type):
            return rule
    raise InputError(f"market must be on-demand or spot, got {market!r}")


def interruption_rates(
    provider: npt.NDArray[np.str_],
    instance_type: npt.NDArray[np.str_],
    market: npt.NDArray[np.str_],
    reliability: npt.NDArray[np.float64],
    *,
    override: float | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.str_]]:
    """Per-node interruptions per hour and their source, per row.

    ``override`` replaces the table for interruptible rows (spot, and marketplace hosts with a
    reliability score); on-demand capacity on a cloud stays at 0.
    """
    n = len(provider)
    keys = np.char.add(np.char.add(np.char.add(provider.astype(str), "\x1f"),
                                   np.char.add(market.astype(str), "\x1f")),
                       instance_type.astype(str))
    uniq, inverse = np.unique(keys, return_inverse=True)
    base = np.empty(len(uniq))
    host = np.empty(len(uniq), dtype=bool)
    sources: list[str] = []
    for j, key in enumerate(uniq.tolist()):
        prov, mkt, itype = key.split("\x1f", 2)
        rule = rule_for(prov, mkt, itype)
        base[j], host[j] = rule.rate_per_hr, rule.use_host_reliability
        sources.append(rule.source)
    rate = base[inverse] + np.where(host[inverse], reliability_rate_per_hr(reliability), 0.0)
    source = np.asarray(sources, dtype=str)[inverse] if n else np.empty(0, dtype=str)
    if override is not None:
        interruptible = (rate > 0) | (market == "spot")
        rate = np.where(interruptible, override, rate)
        source = np.where(interruptible, f"user override {override:g}/h", source)
    return rate, source
