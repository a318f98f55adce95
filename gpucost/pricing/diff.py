"""Price changes between two sets of offers: added, removed, and changed beyond a threshold.

An offer is identified by (source, provider, region, zone, instance type, GPU, GPU count): one
GCP N1 machine type carries a T4 or a V100, so the GPU is part of the name. It *changed* when its
on-demand or spot $/h moved by more than ``threshold_pct`` percent of the old price, or when a
spot market appeared or disappeared. Duplicated keys inside one side keep the cheapest offer.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpucost.pricing.snapshot import Offers, load_offers

KEY_COLUMNS = ("source", "provider", "region", "zone", "instance_type", "gpu", "gpu_count")
Key = tuple[str, str, str, str, str, str, str]


@dataclass(frozen=True)
class PriceChange:
    key: Key
    gpu: str
    gpu_count: float
    old_price_hr: float
    new_price_hr: float
    old_spot_price_hr: float  # NaN: no spot offer
    new_spot_price_hr: float

    @property
    def price_change_pct(self) -> float:
        return _pct(self.old_price_hr, self.new_price_hr)

    @property
    def spot_change_pct(self) -> float:
        """Percent change of the spot price; NaN when either side has no spot offer."""
        return _pct(self.old_spot_price_hr, self.new_spot_price_hr)


@dataclass(frozen=True)
class SnapshotDiff:
    added: tuple[dict[str, Any], ...]
    removed: tuple[dict[str, Any], ...]
    changed: tuple[PriceChange, ...]
    unchanged: int
    threshold_pct: float

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def _pct(old: float, new: float) -> float:
    if math.isnan(old) or math.isnan(new):
        return math.nan
    if old == 0:
        return 0.0 if new == 0 else math.inf
    return (new - old) / old * 100.0


def _index(offers: Offers) -> dict[Key, dict[str, Any]]:
    out: dict[Key, dict[str, Any]] = {}
    for record in offers.to_records():
        key: Key = tuple(str(record[c]) for c in KEY_COLUMNS)  # type: ignore[assignment]
        if key not in out or record["price_hr"] < out[key]["price_hr"]:
            out[key] = record
    return out


def diff_offers(old: Offers, new: Offers, *, threshold_pct: float = 5.0) -> SnapshotDiff:
    if threshold_pct < 0 or math.isnan(threshold_pct):
        raise ValueError("threshold_pct must be a non-negative number")
    before, after = _index(old), _index(new)
    added = tuple(after[k] for k in sorted(after.keys() - before.keys()))
    removed = tuple(before[k] for k in sorted(before.keys() - after.keys()))
    changed = []
    unchanged = 0
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key], after[key]
        change = PriceChange(key, str(b["gpu"]), float(b["gpu_count"]), a["price_hr"],
                             b["price_hr"], a["spot_price_hr"], b["spot_price_hr"])
        spot_market_moved = math.isnan(a["spot_price_hr"]) != math.isnan(b["spot_price_hr"])
        moved = [abs(p) for p in (change.price_change_pct, change.spot_change_pct)
                 if not math.isnan(p)]
        if spot_market_moved or any(p > threshold_pct for p in moved):
            changed.append(change)
        else:
            unchanged += 1
    return SnapshotDiff(added, removed, tuple(changed), unchanged, threshold_pct)


def diff_snapshots(old: Sequence[str | os.PathLike[str]], new: Sequence[str | os.PathLike[str]],
                   *, threshold_pct: float = 5.0) -> SnapshotDiff:
    """Diff snapshot files or folders (a folder means its newest snapshot per source)."""
    return diff_offers(load_offers(old), load_offers(new), threshold_pct=threshold_pct)


def format_diff(diff: SnapshotDiff, *, limit: int | None = None) -> list[str]:
    """Plain-text lines: a summary, then added (+), removed (-) and changed (~) offers."""
    lines = [f"{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.changed)} changed "
             f"by more than {diff.threshold_pct:g}%, {diff.unchanged} unchanged"]

    def name(record: dict[str, Any] | PriceChange) -> str:
        if isinstance(record, PriceChange):
            source, provider, region, zone, instance_type = record.key[:5]
            gpu, count = record.gpu, record.gpu_count
        else:
            source, provider, region, zone, instance_type = (str(record[c])
                                                             for c in KEY_COLUMNS[:5])
            gpu, count = str(record["gpu"]), float(record["gpu_count"])
        where = f"{region}/{zone}" if zone else region
        return f"{provider} {where} {instance_type} ({count:g}x {gpu}) [{source}]"

    def money(value: float) -> str:
        return "no spot" if math.isnan(value) else f"${value:,.4f}/h"

    shown = 0
    for prefix, records in (("+", diff.added), ("-", diff.removed)):
        for record in records:
            if limit is not None and shown >= limit:
                break
            lines.append(f"{prefix} {name(record)}  {money(record['price_hr'])}"
                         f"  spot {money(record['spot_price_hr'])}")
            shown += 1
    for change in diff.changed:
        if limit is not None and shown >= limit:
            break
        parts = [f"{money(change.old_price_hr)} -> {money(change.new_price_hr)}"
                 f" ({change.price_change_pct:+.1f}%)"]
        if not (math.isnan(change.old_spot_price_hr) and math.isnan(change.new_spot_price_hr)):
            pct = change.spot_change_pct
            parts.append(f"spot {money(change.old_spot_price_hr)} -> "
                         f"{money(change.new_spot_price_hr)}"
                         + ("" if math.isnan(pct) else f" ({pct:+.1f}%)"))
        lines.append(f"~ {name(change)}  " + "  ".join(parts))
        shown += 1
    hidden = len(diff.added) + len(diff.removed) + len(diff.changed) - shown
    if hidden > 0:
        lines.append(f"... {hidden} more (use --limit 0 to show all)")
    return lines
