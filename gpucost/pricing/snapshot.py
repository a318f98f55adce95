"""Price snapshots: the only thing scrapers write and the only thing the planner reads.

Format (``gpucost-price-snapshot``, version 1), one JSON file per source and date, stored as
``<dir>/<source>/<YYYY-MM-DD>.json``::

    {
      "format": "gpucost-price-snapshot", "version": 1,
      "source": "skypilot-catalog",            # registered source name
      "fetched_at": "2026-11-30T00:00:00Z",    # when the prices were read at the source
      "currency": "USD",
      "month_hours": 730,                      # the source's $/month -> $/hour convention
      "provenance": {...},                     # free-form: repository, commit, URL, API, notes
      "columns": {"provider": [...], "price_hr": [...], ...}   # column-major, see COLUMNS
    }

Columns are stored column-major so a 10,000-row file loads straight into numpy arrays.
Missing numbers are ``null`` (NaN in memory): a missing ``spot_price_hr`` means no spot offer.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpucost._io import atomic_write_json
from gpucost.errors import SnapshotError

if TYPE_CHECKING:
    import pandas as pd

FORMAT = "gpucost-price-snapshot"
VERSION = 1

# name -> (kind, default). kind "str" | "float" | "int". A default of None means required.
COLUMNS: dict[str, tuple[str, Any]] = {
    "provider": ("str", None),  # who bills you: aws, gcp, azure, lambda, runpod, vast, ...
    "region": ("str", None),
    "zone": ("str", ""),
    "instance_type": ("str", None),
    "gpu": ("str", None),  # canonical catalog name
    "gpu_count": ("float", None),  # GPUs per instance; fractional GPUs exist (AWS g6f)
    "gpu_memory_gb": ("float", math.nan),  # per GPU
    "vcpus": ("float", math.nan),
    "ram_gb": ("float", math.nan),
    "price_hr": ("float", None),  # on-demand $/h for the whole instance
    "spot_price_hr": ("float", math.nan),  # spot/interruptible $/h; NaN = no spot offer
    "storage_gb_month": ("float", math.nan),  # $/GB-month of attached disk
    "egress_gb": ("float", math.nan),  # $/GB out to the internet
    "ingress_gb": ("float", 0.0),  # $/GB in (most clouds: free; marketplaces: not)
    "month_hours": ("float", math.nan),  # 730 or 720; NaN -> the snapshot's convention
    "network_gbps": ("float", math.nan),  # instance network bandwidth, Gbit/s
    "intra_node_link": ("str", ""),  # "nvlink" | "pcie" | "" (unknown)
    "reliability": ("float", math.nan),  # 0..1 host reliability where a marketplace states it
    "fetched_at": ("str", ""),  # filled from the snapshot when blank
    "source": ("str", ""),  # filled from the snapshot when blank
}
NUMERIC = tuple(name for name, (kind, _) in COLUMNS.items() if kind != "str")
TEXT = tuple(name for name, (kind, _) in COLUMNS.items() if kind == "str")


class Offers:
    """A column table of offers: a dict of equally long numpy arrays (float64 or str)."""

    __slots__ = ("columns",)

    def __init__(self, columns: Mapping[str, np.ndarray]) -> None:
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise SnapshotError(f"offer columns have different lengths: {sorted(lengths)}")
        self.columns: dict[str, np.ndarray] = dict(columns)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def select(self, mask_or_index: np.ndarray) -> Offers:
        return Offers({k: v[mask_or_index] for k, v in self.columns.items()})

    def row_codes(self, names: Sequence[str]) -> np.ndarray:
        """One int per row, equal exactly where the rows agree on every column in ``names``
        (NaN equals NaN): 0..distinct-1."""
        code = np.zeros(len(self), dtype=np.int64)
        for name in names:
            values = self.columns[name]
            if values.dtype.kind == "f":
                values = np.nan_to_num(values, nan=-1.0)
            _, column_code = np.unique(values, return_inverse=True)
            # Re-number after each column so the combined code stays small.
            _, code = np.unique(code * (int(column_code.max()) + 1) + column_code,
                                return_inverse=True)
        return code

    @classmethod
    def empty(cls) -> Offers:
        return cls(
            {
                name: np.array([], dtype=float if kind != "str" else str)
                for name, (kind, _) in COLUMNS.items()
            }
        )

    @classmethod
    def concat(cls, parts: Sequence[Offers]) -> Offers:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        return cls({name: np.concatenate([p.columns[name] for p in parts]) for name in COLUMNS})

    @classmethod
    def from_records(cls, rows: Iterable[Mapping[str, Any]], *, origin: str = "offers") -> Offers:
        rows = list(rows)
        return cls.from_columns(
            {name: [r.get(name) for r in rows] for name in COLUMNS},
            origin=origin,
            allow_missing=True,
        )

    @classmethod
    def from_columns(
        cls,
        raw: Mapping[str, Sequence[Any] | np.ndarray],
        *,
        origin: str = "offers",
        allow_missing: bool = False,
    ) -> Offers:
        """Validated arrays from column lists; defaults fill optional columns and ``None`` cells."""
        unknown = sorted(set(raw) - set(COLUMNS))
        if unknown:
            raise SnapshotError(
                f"{origin}: unknown column(s) {', '.join(unknown)}",
                hint="see gpucost.pricing.snapshot.COLUMNS",
            )
        lengths = {len(v) for v in raw.values()}
        if len(lengths) > 1:
            raise SnapshotError(
                f"{origin}: columns have different lengths {sorted(lengths)}",
                hint="the file is corrupt or truncated; re-import it",
            )
        n = lengths.pop() if lengths else 0
        out: dict[str, np.ndarray] = {}
        for name, (kind, default) in COLUMNS.items():
            values = raw.get(name)
            if values is None:
                if default is None and not (allow_missing and n == 0):
                    raise SnapshotError(f"{origin}: required column {name!r} is missing")
                values = [default] * n
            # Membership tests and whole-list conversions run in C: a 10,000-row snapshot
            # loads in milliseconds (numpy turns None into NaN for float64 by itself).
            if isinstance(values, np.ndarray):
                values = values.tolist()
            if kind == "str":
                has_none = None in values
                if default is None and (has_none or "" in values):
                    row = next(i for i, v in enumerate(values) if v is None or v == "")
                    raise SnapshotError(f"{origin}: column {name!r} is empty in row {row}")
                if has_none:
                    values = ["" if v is None else v for v in values]
                out[name] = np.array(values, dtype=str)
            else:
                try:
                    arr = np.array(values, dtype=np.float64)
                except (TypeError, ValueError):
                    bad = next(i for i, v in enumerate(values) if not _is_number_or_none(v))
                    raise SnapshotError(
                        f"{origin}: column {name!r} row {bad} is not a number: {values[bad]!r}"
                    ) from None
                if default is None and np.isnan(arr).any():
                    row = int(np.flatnonzero(np.isnan(arr))[0])
                    raise SnapshotError(f"{origin}: column {name!r} has no value in row {row}")
                if (arr < 0).any():
                    row = int(np.flatnonzero(arr < 0)[0])
                    raise SnapshotError(
                        f"{origin}: column {name!r} is negative in row {row}: {arr[row]}"
                    )
                out[name] = arr
        return cls(out)

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({k: v for k, v in self.columns.items()})

    def to_records(self) -> list[dict[str, Any]]:
        cols = {k: v.tolist() for k, v in self.columns.items()}
        return [{k: cols[k][i] for k in cols} for i in range(len(self))]


def _is_number_or_none(v: object) -> bool:
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool))


@dataclass(frozen=True)
class Snapshot:
    source: str
    fetched_at: dt.datetime  # timezone-aware UTC
    offers: Offers
    month_hours: float = 730.0
    currency: str = "USD"
    provenance: Mapping[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def __post_init__(self) -> None:
        # Rows carry their snapshot's date, source and month convention, so that offers
        # merged from several snapshots still say where each price came from.
        cols = self.offers.columns
        if len(self.offers):
            stamp = _iso(self.fetched_at)
            cols["fetched_at"] = np.where(cols["fetched_at"] == "", stamp, cols["fetched_at"])
            cols["source"] = np.where(cols["source"] == "", self.source, cols["source"])
            cols["month_hours"] = np.where(
                np.isnan(cols["month_hours"]), self.month_hours, cols["month_hours"]
            )

    @property
    def date(self) -> str:
        return self.fetched_at.date().isoformat()

    def age_days(self, now: dt.datetime | None = None) -> float:
        now = now or dt.datetime.now(dt.UTC)
        return (now - self.fetched_at).total_seconds() / 86400.0

    def to_dict(self) -> dict[str, Any]:
        cols: dict[str, list[Any]] = {}
        # A column whose every value is what a reader fills in anyway (the column default, or
        # the snapshot's own source, date and month) is left out: smaller files, faster loads.
        implied = {
            "fetched_at": _iso(self.fetched_at),
            "source": self.source,
            "month_hours": self.month_hours,
        }
        for name, arr in self.offers.columns.items():
            default = COLUMNS[name][1]
            if len(arr) and any(
                _all_equal(arr, v) for v in (default, implied.get(name)) if v is not None
            ):
                continue
            if arr.dtype.kind == "f":
                cols[name] = [None if math.isnan(x) else x for x in arr.tolist()]
            else:
                cols[name] = arr.tolist()
        return {
            "format": FORMAT,
            "version": VERSION,
            "source": self.source,
            "fetched_at": _iso(self.fetched_at),
            "currency": self.currency,
            "month_hours": self.month_hours,
            "provenance": dict(self.provenance),
            "columns": cols,
        }


def _all_equal(arr: np.ndarray, value: Any) -> bool:
    if arr.dtype.kind == "f":
        return bool(np.isnan(arr).all()) if math.isnan(value) else bool((arr == value).all())
    return bool((arr == value).all())


def _iso(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str, *, origin: str = "snapshot") -> dt.datetime:
    try:
        ts = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise SnapshotError(f"{origin}: fetched_at {text!r} is not an ISO 8601 timestamp") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)


def snapshot_path(directory: str | os.PathLike[str], source: str, fetched_at: dt.datetime) -> Path:
    return Path(directory) / source / f"{fetched_at.astimezone(dt.UTC).date().isoformat()}.json"


def write_snapshot(snapshot: Snapshot, directory: str | os.PathLike[str]) -> Path:
    """Write atomically to ``<directory>/<source>/<date>.json``; returns the path."""
    if snapshot.currency != "USD":
        raise SnapshotError(
            f"snapshot currency {snapshot.currency!r} is not supported; convert to USD"
        )
    path = snapshot_path(directory, snapshot.source, snapshot.fetched_at)
    return atomic_write_json(path, snapshot.to_dict(), indent=None)


def read_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    p = Path(path)
    origin = str(p)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SnapshotError(f"price snapshot {origin!r} not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SnapshotError(
            f"price snapshot {origin!r} is corrupt ({exc})",
            hint="delete it and run `gpucost prices refresh` or re-import",
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError(f"{origin} is not a gpucost price snapshot (no format={FORMAT!r})")
    if data.get("version") != VERSION:
        raise SnapshotError(
            f"{origin}: snapshot version {data.get('version')!r} is not supported",
            hint=f"this gpucost reads version {VERSION}",
        )
    for key in ("source", "fetched_at", "columns"):
        if key not in data:
            raise SnapshotError(f"{origin}: missing {key!r}")
    if not isinstance(data["columns"], dict):
        raise SnapshotError(f"{origin}: 'columns' must be an object of column lists")
    month_hours = data.get("month_hours", 730)
    if not isinstance(month_hours, int | float) or not 600 <= month_hours <= 800:
        raise SnapshotError(
            f"{origin}: month_hours {month_hours!r} is not a plausible month (720 or 730)"
        )
    if data.get("currency", "USD") != "USD":
        raise SnapshotError(f"{origin}: currency {data.get('currency')!r} is not supported")
    fetched_at = parse_timestamp(str(data["fetched_at"]), origin=origin)
    offers = Offers.from_columns(data["columns"], origin=origin)
    return Snapshot(
        source=str(data["source"]),
        fetched_at=fetched_at,
        offers=offers,
        month_hours=float(month_hours),
        currency="USD",
        provenance=data.get("provenance") or {},
        path=p,
    )


def latest_snapshot_paths(directories: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The newest snapshot file per source across ``directories`` (later ones win ties)."""
    newest: dict[str, Path] = {}
    for directory in directories:
        root = Path(directory)
        if not root.is_dir():
            continue
        for source_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            files = sorted(source_dir.glob("*.json"))
            if not files:
                continue
            candidate = files[-1]
            current = newest.get(source_dir.name)
            if current is None or candidate.name >= current.name:
                newest[source_dir.name] = candidate
    return [newest[k] for k in sorted(newest)]


def default_snapshot_dirs() -> list[Path]:
    from gpucost.paths import embedded_snapshots_dir, user_snapshots_dir

    return [embedded_snapshots_dir(), user_snapshots_dir()]


def load_snapshots(paths: Sequence[str | os.PathLike[str]] | None = None) -> list[Snapshot]:
    """Snapshots from files or folders; ``None``: the newest per source (user, else embedded)."""
    if paths is None:
        files = latest_snapshot_paths(default_snapshot_dirs())
    else:
        files = []
        for item in paths:
            p = Path(item)
            if p.is_dir():
                found = latest_snapshot_paths([p])
                if not found:
                    raise SnapshotError(
                        f"no price snapshots under {str(p)!r}",
                        hint="expected <dir>/<source>/<date>.json files",
                    )
                files.extend(found)
            else:
                files.append(p)
    if not files:
        raise SnapshotError(
            "no price snapshots found",
            hint="run `gpucost prices refresh` or `gpucost prices import`",
        )
    return [read_snapshot(f) for f in files]


# What makes two rows the same machine, whichever source priced it.
OFFER_IDENTITY = ("provider", "instance_type", "region", "zone")


def merge_offers(snapshots: Sequence[Snapshot]) -> Offers:
    """The snapshots' offers in one table, each machine once: where several snapshots price the
    same provider, instance type, region and zone (the embedded SkyPilot catalog and a fresh
    `gpucost prices refresh aws`), the most recently fetched snapshot's rows are kept. Rows of
    one snapshot are never merged with each other."""
    parts = [s.offers for s in snapshots]
    merged = Offers.concat(parts)
    if len(snapshots) < 2 or not len(merged):
        return merged
    # Rank each snapshot by fetch time (later in the list wins a tie), then keep, per machine,
    # only the rows of its best-ranked snapshot.
    order = sorted(range(len(snapshots)), key=lambda i: (snapshots[i].fetched_at, i))
    rank_of = np.empty(len(snapshots), dtype=np.int64)
    rank_of[order] = np.arange(len(snapshots))
    row_rank = np.repeat(rank_of, [len(p) for p in parts])
    machine = merged.row_codes(OFFER_IDENTITY)
    best = np.full(machine.max() + 1, -1, dtype=np.int64)
    np.maximum.at(best, machine, row_rank)
    keep = row_rank == best[machine]
    return merged if keep.all() else merged.select(keep)


def load_offers(paths: Sequence[str | os.PathLike[str]] | None = None) -> Offers:
    """All offers of the given (or default) snapshots merged into one table (see
    :func:`merge_offers`)."""
    return merge_offers(load_snapshots(paths))
