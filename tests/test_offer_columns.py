"""An offer table's columns are declared once (gpucost.pricing.snapshot.OfferColumns): the typed
fields of :class:`Offers`, the validation table :data:`COLUMNS` (kind, default, range) and the
snapshot file's column names are all read off that one declaration."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from gpucost.columns import columns_of
from gpucost.errors import SnapshotError
from gpucost.pricing.snapshot import (
    COLUMNS,
    Column,
    OfferColumns,
    Offers,
    Snapshot,
    default_snapshot_dirs,
    load_snapshots,
    write_snapshot,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
OFFER_COLUMN_LINE = re.compile(r"^\s+(\w+): (?:Float|Text) = _(?:text|number)\(", re.MULTILINE)
FETCHED = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
# One offer whose every cell differs from its column's default, so a written snapshot keeps
# every column.
FULL_ROW = {
    "provider": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p3.2xlarge",
    "gpu": "V100 SXM2 16GB", "gpu_count": 1, "gpu_memory_gb": 16, "vcpus": 8, "ram_gb": 61,
    "price_hr": 3.06, "spot_price_hr": 0.92, "storage_gb_month": 0.08, "egress_gb": 0.09,
    "ingress_gb": 0.01, "month_hours": 720, "network_gbps": 10, "intra_node_link": "nvlink",
    "cpu_arch": "x86-64", "reliability": 0.99, "fetched_at": "2026-11-29T00:00:00Z",
    "source": "elsewhere",
}


def test_every_offer_column_is_declared_on_one_line_of_the_package() -> None:
    declared = Counter(
        name for path in (REPO_ROOT / "gpucost").rglob("*.py")
        for name in OFFER_COLUMN_LINE.findall(path.read_text(encoding="utf-8")))
    names = [f.name for f in fields(OfferColumns)]
    assert len(names) == 21
    assert declared == dict.fromkeys(names, 1)


def test_validation_table_typed_fields_and_file_columns_are_one_set_in_one_order(
        tmp_path: Path) -> None:
    names = [f.name for f in fields(OfferColumns)]
    assert [f.name for f in fields(Offers)] == names == list(COLUMNS)
    assert all(isinstance(check, Column) for check in COLUMNS.values())
    specs = columns_of(OfferColumns)
    assert [c.json_name for c in specs] == names  # no column is renamed in the file
    # the annotation (Float, Text) and the checked kind agree
    assert {c.name: c.kind for c in specs} == {
        n: {"str": "text", "float": "float"}[check.kind] for n, check in COLUMNS.items()}
    offers = Offers.from_records([FULL_ROW])
    for spec in specs:
        assert getattr(offers, spec.name).dtype.kind == ("U" if spec.kind == "text" else "f")
        assert offers[spec.name] is getattr(offers, spec.name)
    written = write_snapshot(Snapshot(source="test", fetched_at=FETCHED, offers=offers), tmp_path)
    assert list(json.loads(written.read_text(encoding="utf-8"))["columns"]) == names


def test_the_embedded_snapshots_name_only_declared_columns() -> None:
    for snapshot in load_snapshots(default_snapshot_dirs()[:1]):
        assert snapshot.path is not None
        stored = json.loads(snapshot.path.read_text(encoding="utf-8"))["columns"]
        assert set(stored) <= set(COLUMNS)
        assert list(stored) == [name for name in COLUMNS if name in stored]


def test_an_offer_table_is_changed_by_copy_never_in_place() -> None:
    offers = Offers.from_records([{k: v for k, v in FULL_ROW.items()
                                   if k not in ("source", "fetched_at")}])
    with pytest.raises(TypeError):
        offers.columns["source"] = np.array(["other"])  # type: ignore[index]
    # The snapshot fills its own source into blank cells of a copy: one table in two snapshots
    # (a test fixture, a merged catalog) says each snapshot's source, not the first one's.
    first = Snapshot(source="first", fetched_at=FETCHED, offers=offers)
    second = Snapshot(source="second", fetched_at=FETCHED, offers=offers)
    assert offers.source.tolist() == [""]
    assert first.offers.source.tolist() == ["first"]
    assert second.offers.source.tolist() == ["second"]
    assert first.offers.fetched_at.tolist() == ["2026-11-30T00:00:00Z"]


def test_columns_of_different_lengths_are_refused() -> None:
    offers = Offers.from_records([FULL_ROW, FULL_ROW])
    with pytest.raises(SnapshotError, match="different lengths"):
        Offers(**{**offers.columns, "price_hr": np.array([1.0])})
