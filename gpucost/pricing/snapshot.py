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
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic

import numpy as np
import numpy.typing as npt

from gpucost import providers
from gpucost._io import _check_depth, atomic_write_json, read_text
from gpucost.catalog.table import entries_by_name
from gpucost.columns import Float, Text, column
from gpucost.errors import SnapshotError
from gpucost.factor import Factor, packed_codes
from gpucost.limits import (
    MAX_GPUS_PER_NODE,
    MAX_PRICE_HR_USD,
    MAX_SNAPSHOT_BYTES,
    MAX_SNAPSHOT_OFFERS,
)
from gpucost.paths import embedded_snapshots_dir, user_snapshots_dir

if TYPE_CHECKING:
    import pandas as pd

Floats = npt.NDArray[np.float64]
Texts = npt.NDArray[np.str_]

FORMAT = "gpucost-price-snapshot"
VERSION = 1

# Limits a value must keep to (prices and GPU counts: gpucost.limits, shared with plan files).
# Each is far beyond any real offer (the dearest machine in the embedded catalogs rents for
# $142/h, the largest has 16 GPUs and 6 TB of RAM), so only damaged or hostile data meets them.
MAX_PRICE_HR = MAX_PRICE_HR_USD  # $/h for one instance, on-demand or spot
MAX_RATE_USD = 1_000.0  # $/GB-month of disk, $/GB of transfer
MAX_TEXT_CHARS = 200  # one text cell (names, regions, timestamps)


@dataclass(frozen=True, slots=True)
class Column:
    """One snapshot column: its kind, what fills a missing cell, and the values it accepts."""

    kind: str  # "str" | "float"
    default: Any  # None: required (no cell may be missing or empty)
    low: float = 0.0
    high: float = math.inf
    above_low: bool = False  # the value must exceed ``low`` (a price of 0 is an error, not free)
    expected: str = ""  # what a valid value is, for the one-line error

    def out_of_range(self, arr: np.ndarray) -> np.ndarray:
        """Rows whose value breaks this column's range (NaN: missing, judged elsewhere)."""
        above = arr > self.low if self.above_low else arr >= self.low
        # -0.0 passes ``>= 0`` but is a sign error in whatever wrote it (a "free" A100).
        valid: np.ndarray = (above & (arr <= self.high) & ~np.signbit(arr)) | np.isnan(arr)
        return ~valid


def _text(unit: str, default: str | None = "") -> Any:
    """A text column (``default`` None: required, no cell may be missing or empty)."""
    return column(unit, check=Column("str", default))


def _number(unit: str, default: float | None, low: float, high: float, expected: str, *,
            above_low: bool = False) -> Any:
    """A float64 column whose cells lie in [low, high] (``above_low``: above ``low``)."""
    return column(unit, check=Column("float", default, low, high, above_low, expected))


_PRICE = f"a $/h above 0 and at most {MAX_PRICE_HR:,.0f}"
_RATE = f"a USD rate from 0 to {MAX_RATE_USD:,.0f}"
_GPUS = f"a GPU count above 0 and at most {MAX_GPUS_PER_NODE}"
_NAN = math.nan  # a missing cell: unknown, or (spot_price_hr) no such offer


@dataclass(frozen=True)
class OfferColumns(Generic[Float, Text]):
    """Every column of an offer table, in file order: its unit, and the checks and default of
    its cells (a ``None`` default: required). Field order is the snapshot file's column order."""

    __slots__ = ()
    provider: Text = _text("who bills you: a provider's name (gpucost.providers)", None)
    region: Text = _text("", None)
    zone: Text = _text("")
    instance_type: Text = _text("", None)
    gpu: Text = _text("canonical catalog name", None)
    gpu_count: Float = _number("GPUs per instance (fractional: AWS g6f)", None, 0.0,
                               MAX_GPUS_PER_NODE, _GPUS, above_low=True)
    gpu_memory_gb: Float = _number("GB per GPU", _NAN, 0.0, 2048.0,
                                   "GB per GPU above 0 and at most 2048", above_low=True)
    vcpus: Float = _number("vCPUs per instance", _NAN, 0.0, 65_536.0,
                           "a vCPU count above 0 and at most 65536", above_low=True)
    ram_gb: Float = _number("GB of RAM per instance", _NAN, 0.0, 1_048_576.0,
                            "GB of RAM above 0 and at most 1048576", above_low=True)
    price_hr: Float = _number("USD/h per instance, on-demand", None, 0.0, MAX_PRICE_HR, _PRICE,
                              above_low=True)
    spot_price_hr: Float = _number("USD/h per instance, spot (null: no spot offer)", _NAN, 0.0,
                                   MAX_PRICE_HR, _PRICE, above_low=True)
    storage_gb_month: Float = _number("USD/GB-month of disk", _NAN, 0.0, MAX_RATE_USD, _RATE)
    egress_gb: Float = _number("USD/GB out to the internet", _NAN, 0.0, MAX_RATE_USD, _RATE)
    ingress_gb: Float = _number("USD/GB in (clouds: free; not all)", 0.0, 0.0, MAX_RATE_USD,
                                _RATE)
    month_hours: Float = _number("h per month, 730 or 720 (null: the snapshot's)", _NAN, 600.0,
                                 800.0, "hours per month from 600 to 800")
    network_gbps: Float = _number("Gbit/s, the instance's network", _NAN, 0.0, 1e5,
                                  "Gbit/s above 0 and at most 100000", above_low=True)
    intra_node_link: Text = _text("nvlink | pcie | socket | '' (unknown)")
    # "" where the source does not say (:func:`cpu_archs` infers it)
    cpu_arch: Text = _text("the host CPU's architecture: x86-64 | arm64 | ''")
    reliability: Float = _number("0..1 host reliability where a marketplace states it", _NAN,
                                 0.0, 1.0, "a reliability from 0 to 1")
    fetched_at: Text = _text("ISO 8601 time; filled from the snapshot when blank")
    source: Text = _text("price snapshot source; filled from the snapshot when blank")


# Each column's checks and default, in file order: read off the declaration.
COLUMNS: dict[str, Column] = {f.name: f.metadata["check"] for f in fields(OfferColumns)}
CPU_ARCHS = ("x86-64", "arm64")
_NUMBER_TYPES: frozenset[type] = frozenset({int, float, type(None)})
# Control characters and lone surrogates (which JSON's \u escapes can carry) break terminals
# and UTF-8 output; no provider, region or instance name has them.
_BAD_TEXT = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Offers(OfferColumns[Floats, Texts]):
    """A column table of offers: field ``x`` holds every offer's ``x``, equally long numpy
    arrays (float64, or fixed-width str). Read from files through :meth:`from_columns` and
    :meth:`from_records`, which check every cell."""

    def __post_init__(self) -> None:
        lengths = {len(getattr(self, name)) for name in COLUMNS}
        if len(lengths) > 1:
            raise SnapshotError(f"offer columns have different lengths: {sorted(lengths)}")

    def __len__(self) -> int:
        return len(self.provider)

    def __getitem__(self, name: str) -> np.ndarray:
        """The column named ``name``, for callers that pick columns by name."""
        if name not in COLUMNS:
            raise KeyError(name)
        values: np.ndarray = getattr(self, name)
        return values

    @property
    def columns(self) -> Mapping[str, np.ndarray]:
        """Name -> column, in file order (read-only: :func:`dataclasses.replace` makes a
        changed table)."""
        return MappingProxyType({name: getattr(self, name) for name in COLUMNS})

    def select(self, mask_or_index: np.ndarray) -> Offers:
        return Offers(**{name: getattr(self, name)[mask_or_index] for name in COLUMNS})

    def row_codes(self, names: Sequence[str]) -> np.ndarray:
        """One int per row, equal exactly where the rows agree on every column in ``names``
        (NaN equals NaN): 0..distinct-1."""
        factors = [Factor.of(self[name]) for name in names]  # a float column's NaN: one value
        # one sort per column, then one of the packed ints (not one per column again)
        _, code = np.unique(packed_codes(factors, len(self)), return_inverse=True)
        return code.reshape(-1)

    @classmethod
    def empty(cls) -> Offers:
        return cls(**{name: np.array([], dtype=float if check.kind != "str" else str)
                      for name, check in COLUMNS.items()})

    @classmethod
    def concat(cls, parts: Sequence[Offers]) -> Offers:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        return cls(**{name: np.concatenate([p[name] for p in parts]) for name in COLUMNS})

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
                f"{origin}: unknown column(s) {', '.join(map(_shown, unknown[:5]))}",
                hint="see gpucost.pricing.snapshot.COLUMNS",
            )
        not_list = next((k for k, v in raw.items()
                         if not isinstance(v, list | tuple | np.ndarray)), None)
        if not_list is not None:
            raise SnapshotError(f"{origin}: column {not_list!r} is not a list")
        lengths = {len(v) for v in raw.values()}
        if len(lengths) > 1:
            raise SnapshotError(
                f"{origin}: columns have different lengths {sorted(lengths)}",
                hint="the file is corrupt or truncated; re-import it",
            )
        n = lengths.pop() if lengths else 0
        out: dict[str, np.ndarray] = {}
        for name, check in COLUMNS.items():
            values = raw.get(name)
            if values is None:
                if check.default is None and not (allow_missing and n == 0):
                    raise SnapshotError(f"{origin}: required column {name!r} is missing")
                # Left out because every cell is the default (see Snapshot.to_dict): no checks.
                out[name] = np.full(n, check.default,
                                    dtype=str if check.kind == "str" else np.float64)
                continue
            # Type checks, membership tests and whole-list conversions run in C: a 10,000-row
            # snapshot loads and validates in milliseconds (numpy turns None into NaN itself).
            if isinstance(values, np.ndarray):
                values = values.tolist()
            out[name] = (_text_column if check.kind == "str" else _number_column)(
                name, check, values, origin)
        offers = cls(**out)
        bad_arch = ~np.isin(offers.cpu_arch, ("", *CPU_ARCHS))
        if bad_arch.any():
            row = int(np.flatnonzero(bad_arch)[0])
            raise SnapshotError(
                f"{origin}: column 'cpu_arch' row {row}: {_shown(offers.cpu_arch[row])} is not "
                f"{' or '.join(CPU_ARCHS)}", hint="leave it empty where the source does not say")
        return offers

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(dict(self.columns))

    def to_records(self) -> list[dict[str, Any]]:
        cols = {k: v.tolist() for k, v in self.columns.items()}
        return [{k: cols[k][i] for k in cols} for i in range(len(self))]


def cpu_archs(offers: Offers) -> np.ndarray:
    """Each offer's host CPU architecture: the one its source states, else arm64 for a Grace
    superchip (GH200, GB200: the GPU's catalog form factor is "Superchip") and AWS's Graviton GPU
    instances, else x86-64 (every other GPU host the sources list)."""
    stated = offers.cpu_arch
    superchips = [name for name, entry in entries_by_name().items()
                  if entry.spec.form_factor == "Superchip"]
    # a comparison per superchip (a few), not a sort of the GPU column
    arm = np.isin(offers.gpu, superchips)
    for provider, prefixes in providers.arm_instance_prefixes().items():
        rows = np.flatnonzero(offers.provider == provider)
        types = offers.instance_type[rows].tolist()
        arm[rows[[t.startswith(prefixes) for t in types]]] = True
    return np.where(stated != "", stated, np.where(arm, "arm64", "x86-64"))


def _first_bad_type(values: Sequence[Any], allowed: frozenset[type]) -> int | None:
    if set(map(type, values)) <= allowed:  # a set of types: one C pass over the column
        return None
    return next(i for i, v in enumerate(values) if type(v) not in allowed)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _text_column(name: str, check: Column, values: Sequence[Any], origin: str) -> np.ndarray:
    try:
        joined: str | None = "".join(values)  # refuses anything but text (None too), in C
        has_none = False
    except TypeError:  # only then look for missing cells: a scan of the list each
        joined, has_none = None, None in values
    if check.default is None and (has_none or "" in values):
        row = next(i for i, v in enumerate(values) if v is None or v == "")
        raise SnapshotError(f"{origin}: column {name!r} is empty in row {row}")
    if joined is None:
        values = ["" if v is None else v for v in values]
        try:
            joined = "".join(values)
        except TypeError:
            bad = next(i for i, v in enumerate(values) if not isinstance(v, str))
            raise SnapshotError(f"{origin}: column {name!r} row {bad} is {_shown(values[bad])}, "
                                "expected text") from None
    # isprintable() is the fast test; the pattern decides (a no-break space is fine).
    if not joined.isprintable() and _BAD_TEXT.search(joined):
        row = next(i for i, v in enumerate(values) if _BAD_TEXT.search(v))
        raise SnapshotError(f"{origin}: column {name!r} row {row} is {_shown(values[row])}, "
                            "expected printable text (no control characters)")
    width = max(map(len, values), default=0)
    if width > MAX_TEXT_CHARS:
        row = next(i for i, v in enumerate(values) if len(v) == width)
        raise SnapshotError(f"{origin}: column {name!r} row {row} is {width:,} characters long, "
                            f"expected at most {MAX_TEXT_CHARS}")
    # the width given: numpy need not find the longest cell itself (twice as fast)
    return np.array(values, dtype=f"<U{max(width, 1)}")


def _number_column(name: str, check: Column, values: Sequence[Any],
                   origin: str) -> np.ndarray:
    bad = _first_bad_type(values, _NUMBER_TYPES)
    if bad is not None:
        raise SnapshotError(f"{origin}: column {name!r} row {bad} is not a number: "
                            f"{_shown(values[bad])}", hint=f"expected {check.expected}")
    try:
        arr = np.array(values, dtype=np.float64)
    except OverflowError:  # an integer beyond float range (10**400)
        row = next(i for i, v in enumerate(values) if isinstance(v, int) and abs(v) > 2**1023)
        raise SnapshotError(f"{origin}: column {name!r} row {row} is out of range",
                            hint=f"expected {check.expected}") from None
    missing = np.isnan(arr)
    if check.default is None and missing.any():
        row = int(np.flatnonzero(missing)[0])
        raise SnapshotError(f"{origin}: column {name!r} has no value in row {row}")
    wrong = check.out_of_range(arr)
    if wrong.any():
        row = int(np.flatnonzero(wrong)[0])
        negative = bool(np.signbit(arr[row]))
        shown = "-0" if negative and arr[row] == 0 else f"{float(arr[row]):g}"
        what = "negative" if negative else "out of range"
        raise SnapshotError(f"{origin}: column {name!r} is {what} in row {row}: {shown}",
                            hint=f"expected {check.expected}")
    return arr


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
        offers = self.offers
        if len(offers):
            stamp = _iso(self.fetched_at)
            filled = replace(
                offers,
                fetched_at=np.where(offers.fetched_at == "", stamp, offers.fetched_at),
                source=np.where(offers.source == "", self.source, offers.source),
                month_hours=np.where(np.isnan(offers.month_hours), self.month_hours,
                                     offers.month_hours))
            object.__setattr__(self, "offers", filled)  # frozen: set once, while constructed

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
            default = COLUMNS[name].default
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
    """An ISO 8601 time as timezone-aware UTC (no zone: UTC), from 2000 to 2100."""
    try:
        ts = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        ts = (ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)
    except (ValueError, AttributeError, OverflowError):
        raise SnapshotError(f"{origin}: fetched_at {_shown(text)} is not an ISO 8601 timestamp"
                            ) from None
    if not 2000 <= ts.year < 2100:
        raise SnapshotError(f"{origin}: fetched_at {text!r} is not a date from 2000 to 2099")
    return ts


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


class _NonFinite:
    """What JSON's ``NaN``/``Infinity`` tokens read as: a value no column or field accepts, so
    the message names the field (json.loads would quietly make them floats)."""

    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token

    def __repr__(self) -> str:
        return self.token


_SOURCE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def read_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """The snapshot in ``path``, every field and cell checked (types, finiteness, ranges,
    encoding, size and nesting); SnapshotError (exit 2) names the file, the field and what was
    expected. The one entry point for reading a snapshot file."""
    p = Path(path)
    origin = str(p)
    if p.is_dir():
        raise SnapshotError(f"price snapshot {origin!r} is a folder, not a file",
                            hint="snapshots are <dir>/<source>/<date>.json files")
    text = read_text(p, what="price snapshot", error=SnapshotError,
                     max_bytes=MAX_SNAPSHOT_BYTES)
    try:
        data = json.loads(text, parse_constant=_NonFinite)
    except json.JSONDecodeError as exc:
        raise SnapshotError(
            f"price snapshot {origin!r} is corrupt ({exc})",
            hint="delete it and run `gpucost prices refresh` or re-import",
        ) from None
    except RecursionError:
        raise SnapshotError(f"price snapshot {origin!r} is corrupt (nested too deeply)",
                            hint="delete it and run `gpucost prices refresh` or re-import"
                            ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError(f"{origin} is not a gpucost price snapshot (no format={FORMAT!r})")
    if data.get("version") != VERSION:
        raise SnapshotError(
            f"{origin}: snapshot version {_shown(data.get('version'))} is not supported",
            hint=f"this gpucost reads version {VERSION}",
        )
    for key in ("source", "fetched_at", "columns"):
        if key not in data:
            raise SnapshotError(f"{origin}: missing {key!r}")
    if not isinstance(data["columns"], dict):
        raise SnapshotError(f"{origin}: 'columns' must be an object of column lists")
    source = data["source"]
    if not isinstance(source, str) or not _SOURCE_NAME.fullmatch(source):
        raise SnapshotError(f"{origin}: source {_shown(source)} is not a source name",
                            hint="expected lower-case letters, digits, '.', '_' or '-'")
    month_hours = data.get("month_hours", 730)
    if type(month_hours) not in (int, float) or not 600 <= month_hours <= 800:
        raise SnapshotError(
            f"{origin}: month_hours {_shown(month_hours)} is not a plausible month (720 or 730)"
        )
    if data.get("currency", "USD") != "USD":
        raise SnapshotError(f"{origin}: currency {_shown(data.get('currency'))} is not supported")
    if not isinstance(data["fetched_at"], str):
        raise SnapshotError(f"{origin}: fetched_at {_shown(data['fetched_at'])} is not an ISO "
                            "8601 timestamp")
    fetched_at = parse_timestamp(data["fetched_at"], origin=origin)
    provenance = data.get("provenance") or {}
    if not isinstance(provenance, dict):
        raise SnapshotError(f"{origin}: 'provenance' must be an object")
    _check_depth(provenance, f"{origin}: 'provenance'", SnapshotError)
    try:
        json.dumps(provenance, allow_nan=False)
    except (ValueError, TypeError):
        raise SnapshotError(f"{origin}: 'provenance' holds NaN or Infinity, which is not JSON"
                            ) from None
    rows = max((len(v) for v in data["columns"].values() if isinstance(v, list)), default=0)
    if rows > MAX_SNAPSHOT_OFFERS:
        raise SnapshotError(f"{origin}: {rows:,} offers, more than the {MAX_SNAPSHOT_OFFERS:,} "
                            "a snapshot may hold (compare would need gigabytes)",
                            hint="split it by provider or region into smaller snapshots")
    offers = Offers.from_columns(data["columns"], origin=origin)
    return Snapshot(
        source=source,
        fetched_at=fetched_at,
        offers=offers,
        month_hours=float(month_hours),
        currency="USD",
        provenance=provenance,
        path=p,
    )


def warn_on_stderr(message: str) -> None:
    """How a skipped snapshot is reported unless the caller says otherwise (one line)."""
    print(f"gpucost: warning: {message}", file=sys.stderr)


def snapshot_candidates(directories: Sequence[str | os.PathLike[str]]) -> dict[str, list[Path]]:
    """Every snapshot file per source across ``directories``, newest first (on a tie of dates
    the later directory's file first). Folders named like a snapshot file are not candidates."""
    found: dict[str, list[tuple[str, int, Path]]] = {}
    for rank, directory in enumerate(directories):
        root = Path(directory)
        if not root.is_dir():
            continue
        for source_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for file in source_dir.glob("*.json"):
                if file.is_file():
                    found.setdefault(source_dir.name, []).append((file.name, rank, file))
    return {name: [p for _, _, p in sorted(files, reverse=True)]
            for name, files in sorted(found.items())}


def latest_snapshot_paths(directories: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The newest snapshot file per source across ``directories`` (later ones win ties)."""
    return [files[0] for files in snapshot_candidates(directories).values()]


def newest_intact_snapshots(directories: Sequence[str | os.PathLike[str]], *,
                            warn: Callable[[str], None] = warn_on_stderr) -> list[Snapshot]:
    """The newest snapshot of each source that reads cleanly. A damaged (corrupt, truncated,
    empty, out-of-range) newer file is skipped with a ``warn`` line naming it, so one bad file
    never hides a source's older prices, nor any other source's."""
    loaded = []
    for source, files in snapshot_candidates(directories).items():
        for file in files:
            try:
                loaded.append(read_snapshot(file))
                break
            except SnapshotError as exc:
                warn(f"skipped a damaged price snapshot: {exc}")
        else:
            warn(f"no intact price snapshot of source {source!r}: its prices are left out")
    return loaded


def default_snapshot_dirs() -> list[Path]:
    return [embedded_snapshots_dir(), user_snapshots_dir()]


def load_snapshots(paths: Sequence[str | os.PathLike[str]] | None = None, *,
                   warn: Callable[[str], None] = warn_on_stderr) -> list[Snapshot]:
    """Snapshots from files or folders; ``None``: the newest per source (user, else embedded).

    A folder gives the newest intact snapshot per source (see :func:`newest_intact_snapshots`);
    a file named explicitly must read cleanly (SnapshotError otherwise)."""
    if paths is None:
        snapshots = newest_intact_snapshots(default_snapshot_dirs(), warn=warn)
    else:
        snapshots = []
        for item in paths:
            p = Path(item)
            if not p.is_dir():
                snapshots.append(read_snapshot(p))
            elif snapshot_candidates([p]):
                snapshots.extend(newest_intact_snapshots([p], warn=warn))
            else:
                raise SnapshotError(f"no price snapshots under {str(p)!r}",
                                    hint="expected <dir>/<source>/<date>.json files")
    if not snapshots:
        raise SnapshotError(
            "no price snapshots found (or only damaged ones, named above)",
            hint="run `gpucost prices refresh` or `gpucost prices import`",
        )
    return snapshots


# What makes two rows the same machine, whichever source priced it.
OFFER_IDENTITY = ("provider", "instance_type", "region", "zone")


def merge_offers(snapshots: Sequence[Snapshot]) -> Offers:
    """The snapshots' offers in one table, each machine once: where several snapshots price the
    same provider, instance type, region and zone (the embedded SkyPilot catalog and a fresh
    `gpucost prices refresh aws`), the most recently fetched snapshot's rows are kept. Rows of
    one snapshot are never merged with each other."""
    parts = [s.offers for s in snapshots]
    total = sum(len(p) for p in parts)
    if total > MAX_SNAPSHOT_OFFERS:
        raise SnapshotError(f"{len(snapshots)} price snapshots hold {total:,} offers together, "
                            f"more than the {MAX_SNAPSHOT_OFFERS:,} one ranking may read",
                            hint="name fewer with --prices, or refresh fewer sources")
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
