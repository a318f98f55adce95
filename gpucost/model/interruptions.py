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
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpucost._io import read_text
from gpucost.errors import InputError
from gpucost.factor import Factor
from gpucost.model.patterns import lowered, pattern_mask
from gpucost.pricing.rates import HYPERSCALER_MONTH_HOURS

TABLE_PATH = Path(__file__).with_name("interruption_rates.csv")
# AWS's and Azure's monthly bands are over their 730-hour billing month
MONTH_HOURS = HYPERSCALER_MONTH_HOURS
MEAN_OUTAGE_HOURS = 1.0

# band -> the monthly interruption probability it stands for
BANDS: dict[str, float] = {
    "<5%": 0.025,
    "5-10%": 0.075,
    "10-15%": 0.125,
    "15-20%": 0.175,
    ">20%": 0.25,
}


def band_rate_per_hr(band: str) -> float:
    """Per-hour rate for a monthly frequency band ("<5%", "5-10%", ... ">20%")."""
    key = band.replace(" ", "")
    if key not in BANDS:
        raise InputError(
            f"unknown interruption band {band!r}", hint="use one of " + ", ".join(BANDS)
        )
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


MAX_RATE_PER_HR = 1.0  # one interruption an hour: past that no job finishes; a typo, not data
MARKETS = ("on-demand", "spot")
_TABLE_COLUMNS = ("provider", "market", "instance", "band", "rate_per_hr", "reliability",
                  "confidence", "source")
_MAX_TABLE_BYTES = 1 << 20


@lru_cache(maxsize=1)
def rules() -> tuple[RateRule, ...]:
    """The rates table, parsed once."""
    return read_rate_table(TABLE_PATH)


def read_rate_table(path: Path) -> tuple[RateRule, ...]:
    """The rules of an interruption-rate table (CSV, ``#`` comment lines), every cell checked:
    InputError (exit 2) names the file, line and column and what was expected."""
    text = read_text(path, what="interruption-rate table", error=InputError,
                     max_bytes=_MAX_TABLE_BYTES)
    numbered = [(n, ln) for n, ln in enumerate(text.splitlines(), 1)
                if ln and not ln.startswith("#")]
    try:
        parsed = list(csv.reader(ln for _, ln in numbered))
    except csv.Error as exc:
        raise InputError(f"{path} is not CSV ({exc})") from None
    if not parsed or tuple(parsed[0]) != _TABLE_COLUMNS:
        raise InputError(f"{path}: the header must be {','.join(_TABLE_COLUMNS)}")
    out = []
    for (line, _), cells in zip(numbered[1:], parsed[1:], strict=True):
        where = f"{path} line {line}"
        if len(cells) != len(_TABLE_COLUMNS):
            raise InputError(f"{where}: {len(cells)} cells, expected {len(_TABLE_COLUMNS)}")
        row = dict(zip(_TABLE_COLUMNS, cells, strict=True))
        if row["market"] not in MARKETS:
            raise InputError(f"{where}: market {row['market']!r}, expected one of "
                             + ", ".join(MARKETS))
        if row["reliability"] not in ("", "host"):
            raise InputError(f"{where}: reliability {row['reliability']!r}, expected '' or "
                             "'host'")
        if row["band"]:
            if row["band"].replace(" ", "") not in BANDS:
                raise InputError(f"{where}: band {row['band']!r}, expected one of "
                                 + ", ".join(BANDS))
            rate = band_rate_per_hr(row["band"])
        else:
            try:
                rate = float(row["rate_per_hr"])
            except ValueError:
                rate = math.nan
            if not 0.0 <= rate <= MAX_RATE_PER_HR or math.copysign(1.0, rate) < 0:
                raise InputError(f"{where}: rate_per_hr {row['rate_per_hr']!r}, expected a "
                                 f"number from 0 to {MAX_RATE_PER_HR:g} per hour (or a band)")
        label = f"{row['band']} monthly band" if row["band"] else f"{rate:g}/h"
        out.append(RateRule(row["provider"], row["market"], row["instance"], rate,
                            row["reliability"] == "host", row["confidence"],
                            f"{label}: {row['source']}"))
    return tuple(out)


def interruption_rates(
    provider: npt.NDArray[np.str_] | Factor,
    instance_type: npt.NDArray[np.str_],
    market: npt.NDArray[np.str_],
    reliability: npt.NDArray[np.float64],
    *,
    override: float | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.object_]]:
    """Per-node interruptions per hour and their source, per row.

    ``override`` replaces the table for interruptible rows (spot, and marketplace hosts with a
    reliability score); on-demand capacity on a cloud stays at 0. ``provider`` may be the
    column's factor (a ranking's, computed once).
    """
    n = len(instance_type)
    # Rule by rule over whole columns (a dozen rules), not row by row: first match wins.
    prov = lowered(provider)
    itype = np.asarray(instance_type, dtype=str)
    rule_index = np.full(n, -1, dtype=np.int64)
    table = rules()
    # each market's rows once (a dozen rules name two markets)
    in_market = {name: market == name for name in {rule.market for rule in table}}
    for k, rule in enumerate(table):
        todo = (rule_index < 0) & in_market[rule.market]
        if rule.provider != "*":
            todo &= prov.equals(rule.provider)
        if rule.instance != "*" and todo.any():
            todo[todo] = pattern_mask(itype[todo], rule.instance)
        rule_index[todo] = k
    unmatched = rule_index < 0
    if unmatched.any():
        raise InputError(f"market must be on-demand or spot, got {market[unmatched][0]!r}")
    base = np.array([r.rate_per_hr for r in table])[rule_index]
    host = np.array([r.use_host_reliability for r in table], dtype=bool)[rule_index]
    # Object dtype: rows share the rule's string instead of each holding a wide fixed-width copy
    # (a <U155 column over 100,000 plans is 60 MB to sort and copy).
    source = np.array([r.source for r in table], dtype=object)[rule_index]
    rate = base + np.where(host, reliability_rate_per_hr(reliability), 0.0)
    if override is not None:
        interruptible = (rate > 0) | (market == "spot")
        rate = np.where(interruptible, override, rate)
        source = np.where(interruptible, f"user override {override:g}/h", source)
    return rate, source
