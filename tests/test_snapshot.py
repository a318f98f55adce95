"""Price snapshot format v1: round trips, validation of damaged files, merging, atomic writes."""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucost.errors import SnapshotError
from gpucost.paths import embedded_snapshots_dir
from gpucost.pricing.snapshot import (
    COLUMNS,
    MAX_PRICE_HR,
    Offers,
    Snapshot,
    latest_snapshot_paths,
    load_offers,
    load_snapshots,
    merge_offers,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)

DAY = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def offers(n: int = 3, provider: str = "aws") -> Offers:
    return Offers.from_records([
        {"provider": provider, "region": f"r{i}", "instance_type": f"t{i}", "gpu": "A100 SXM4 40GB",
         "gpu_count": [8, 1, 0.125][i % 3], "price_hr": 1.5 * (i + 1),
         "spot_price_hr": None if i % 2 else 0.5 * (i + 1), "zone": "" if i else "z0"}
        for i in range(n)
    ])


def snapshot(source: str = "test", when: dt.datetime = DAY, n: int = 3,
             provider: str = "aws") -> Snapshot:
    return Snapshot(source=source, fetched_at=when, offers=offers(n, provider), month_hours=720,
                    provenance={"note": "unit test"})


def valid_payload() -> dict[str, Any]:
    return snapshot().to_dict()


def write_payload(path: Path, payload: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))
    return path


def assert_same_offers(a: Offers, b: Offers) -> None:
    assert set(a.columns) == set(b.columns) == set(COLUMNS)
    for name in COLUMNS:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_round_trip_keeps_every_value(tmp_path: Path) -> None:
    snap = snapshot()
    path = write_snapshot(snap, tmp_path)
    assert path == tmp_path / "test" / "2026-11-30.json" == snapshot_path(tmp_path, "test", DAY)
    back = read_snapshot(path)
    assert (back.source, back.fetched_at, back.month_hours, back.currency, back.path) == \
        ("test", DAY, 720, "USD", path)
    assert back.provenance == {"note": "unit test"}
    assert_same_offers(back.offers, snap.offers)
    assert math.isnan(back.offers["spot_price_hr"][1])  # null -> NaN: no spot offer
    assert back.offers["gpu_count"][2] == 0.125
    # Rows carry their snapshot's source, date and month convention ...
    assert set(back.offers["source"].tolist()) == {"test"}
    assert set(back.offers["fetched_at"].tolist()) == {"2026-11-30T00:00:00Z"}
    assert set(back.offers["month_hours"].tolist()) == {720.0}
    # ... yet the file stores none of that per row, nor all-default columns.
    stored = json.loads(path.read_text())["columns"]
    for implied in ("source", "fetched_at", "month_hours", "network_gbps", "reliability"):
        assert implied not in stored
    assert stored["zone"] == ["z0", "", ""]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from(["aws", "gcp", "vast"]),
    # No control characters: numpy's str arrays drop trailing NULs.
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1,
            max_size=12),
    st.floats(min_value=0.001, max_value=MAX_PRICE_HR),  # the accepted range of a price
    st.one_of(st.none(), st.floats(min_value=0.001, max_value=MAX_PRICE_HR)),
    st.sampled_from([0.125, 0.5, 1.0, 8.0]),
), max_size=20))
def test_round_trip_property(rows: list[tuple[str, str, float, float | None, float]]) -> None:
    recs = [{"provider": p, "region": "r", "instance_type": it, "gpu": "T4", "gpu_count": c,
             "price_hr": price, "spot_price_hr": spot} for p, it, price, spot, c in rows]
    snap = Snapshot(source="prop", fetched_at=DAY, offers=Offers.from_records(recs))
    back = Snapshot(source="prop", fetched_at=DAY,
                    offers=Offers.from_columns(json.loads(json.dumps(snap.to_dict()))["columns"]))
    assert_same_offers(back.offers, snap.offers)


@pytest.mark.parametrize(("damage", "message"), [
    (lambda d: d.update(version=2), "version 2 is not supported"),
    (lambda d: d.update(format="something-else"), "not a gpucost price snapshot"),
    (lambda d: d.pop("fetched_at"), "missing 'fetched_at'"),
    (lambda d: d.update(fetched_at="last tuesday"), "not an ISO 8601 timestamp"),
    (lambda d: d.update(columns=[1, 2]), "'columns' must be an object"),
    (lambda d: d["columns"].pop("price_hr"), "required column 'price_hr' is missing"),
    (lambda d: d["columns"].update(price_hr=[1.0, -2.0, 3.0]), "'price_hr' is negative in row 1"),
    (lambda d: d["columns"].update(spot_price_hr=[1.0, -0.1, None]), "'spot_price_hr' is negative"),
    (lambda d: d["columns"].update(price_hr=[1.0, None, 3.0]), "'price_hr' has no value in row 1"),
    (lambda d: d["columns"].update(price_hr=[1.0, "cheap", 3.0]), "row 1 is not a number: 'cheap'"),
    (lambda d: d["columns"].update(gpu=["T4", "", "T4"]), "column 'gpu' is empty in row 1"),
    (lambda d: d["columns"].update(region=["a", "b"]), "columns have different lengths"),
    (lambda d: d["columns"].update(colour=["red"] * 3), "unknown column"),
    (lambda d: d.update(month_hours=24), "not a plausible month"),
    (lambda d: d.update(currency="EUR"), "currency 'EUR' is not supported"),
])
def test_damaged_files_are_refused_with_the_reason(tmp_path: Path, damage: Any,
                                                   message: str) -> None:
    payload = valid_payload()
    damage(payload)
    path = write_payload(tmp_path / "s" / "2026-11-30.json", payload)
    with pytest.raises(SnapshotError, match=message.replace("(", r"\(")):
        read_snapshot(path)


def test_corrupt_truncated_and_missing_files(tmp_path: Path) -> None:
    good = write_snapshot(snapshot(), tmp_path)
    text = good.read_text()
    truncated = tmp_path / "t" / "2026-11-30.json"
    truncated.parent.mkdir()
    truncated.write_text(text[: len(text) // 2])
    with pytest.raises(SnapshotError, match="is corrupt") as err:
        read_snapshot(truncated)
    assert "re-import" in str(err.value)  # says how to fix it
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SnapshotError, match="is not UTF-8 text"):
        read_snapshot(binary)
    with pytest.raises(SnapshotError, match="does not exist"):
        read_snapshot(tmp_path / "missing.json")
    with pytest.raises(SnapshotError, match="does not exist"):
        load_snapshots([tmp_path / "no-such-dir"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SnapshotError, match="no price snapshots under"):
        load_snapshots([tmp_path / "empty"])


def test_merge_of_several_sources_takes_the_newest_file_per_source(tmp_path: Path) -> None:
    embedded, user = tmp_path / "embedded", tmp_path / "user"
    write_snapshot(snapshot("alpha", DAY - dt.timedelta(days=3), n=2), embedded)
    write_snapshot(snapshot("alpha", DAY, n=3), embedded)
    write_snapshot(snapshot("beta", DAY, n=4, provider="gcp"), embedded)
    write_snapshot(snapshot("beta", DAY + dt.timedelta(days=1), n=1, provider="gcp"), user)
    paths = latest_snapshot_paths([embedded, user])
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        "embedded/alpha/2026-11-30.json", "user/beta/2026-12-01.json"]
    merged = load_offers(paths)
    assert len(merged) == 3 + 1
    assert sorted(set(merged["source"].tolist())) == ["alpha", "beta"]
    assert merged["fetched_at"][merged["source"] == "beta"].tolist() == ["2026-12-01T00:00:00Z"]
    assert merged["provider"].tolist().count("gcp") == 1
    # Folders named explicitly each contribute their newest file per source; the machine both
    # betas price (gcp r0 t0) is kept once, from the newer one.
    both = load_offers([embedded, user])
    assert len(both) == 3 + (4 - 1) + 1
    assert both["fetched_at"][(both["provider"] == "gcp") & (both["region"] == "r0")].tolist() == [
        "2026-12-01T00:00:00Z"]


def test_merged_offers_keep_each_machine_from_its_newest_snapshot() -> None:
    def table(source: str, when: dt.datetime, rows: list[tuple[str, str, float]]) -> Snapshot:
        return Snapshot(source=source, fetched_at=when, offers=Offers.from_records([
            {"provider": "aws", "region": region, "instance_type": itype, "gpu": "A100 SXM4 40GB",
             "gpu_count": 8, "price_hr": price} for region, itype, price in rows]))

    catalog = table("skypilot-aws", DAY, [("us-east-1", "p4d.24xlarge", 32.77),
                                          ("us-east-1", "g5.xlarge", 1.01),
                                          ("us-west-2", "p4d.24xlarge", 32.77)])
    fresh = table("aws", DAY + dt.timedelta(hours=5), [("us-east-1", "p4d.24xlarge", 21.96),
                                                       ("us-east-1", "p4d.24xlarge", 22.00)])
    merged = merge_offers([fresh, catalog])  # order of the list does not matter
    got = sorted(zip(merged["region"].tolist(), merged["instance_type"].tolist(),
                     merged["price_hr"].tolist(), merged["source"].tolist(), strict=True))
    # The fresh source's two us-east-1 p4d rows (one snapshot: never merged) replace the
    # catalog's; machines only the catalog prices stay.
    assert got == [("us-east-1", "g5.xlarge", 1.01, "skypilot-aws"),
                   ("us-east-1", "p4d.24xlarge", 21.96, "aws"),
                   ("us-east-1", "p4d.24xlarge", 22.0, "aws"),
                   ("us-west-2", "p4d.24xlarge", 32.77, "skypilot-aws")]
    # Same fetch time: the later snapshot in the list wins; one snapshot alone is untouched.
    tie = table("aws", DAY, [("us-east-1", "g5.xlarge", 0.99)])
    assert merge_offers([catalog, tie])["price_hr"].tolist() == [32.77, 32.77, 0.99]
    assert len(merge_offers([catalog])) == 3 and len(merge_offers([])) == 0


def test_a_user_snapshot_overrides_the_embedded_one(_isolated_home: Path) -> None:
    embedded = {s.source: s for s in load_snapshots([embedded_snapshots_dir()])}
    if "skypilot-vast" not in embedded:
        pytest.skip("no embedded snapshots in this build")
    newer = Snapshot(source="skypilot-vast", fetched_at=DAY + dt.timedelta(days=2),
                     offers=offers(2, provider="vast"), month_hours=720)
    write_snapshot(newer, _isolated_home / "snapshots")
    loaded = {s.source: s for s in load_snapshots()}
    assert loaded["skypilot-vast"].date == "2026-12-02"
    assert len(loaded["skypilot-vast"].offers) == 2
    assert set(loaded) == set(embedded)  # the others still come from the embedded defaults


def test_atomic_write_keeps_the_old_file_when_serialisation_fails(tmp_path: Path) -> None:
    path = write_snapshot(snapshot(), tmp_path)
    before = path.read_bytes()
    broken = Snapshot(source="test", fetched_at=DAY, offers=offers(5),
                      provenance={"not json": {1, 2}})  # a set cannot be serialised
    with pytest.raises(TypeError):
        write_snapshot(broken, tmp_path)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind
    nan_provenance = Snapshot(source="test", fetched_at=DAY, offers=offers(5),
                              provenance={"bad": math.nan})  # NaN is not JSON
    with pytest.raises(ValueError, match="Out of range float"):
        write_snapshot(nan_provenance, tmp_path)
    assert path.read_bytes() == before


def test_non_usd_snapshots_are_not_written(tmp_path: Path) -> None:
    snap = Snapshot(source="eur", fetched_at=DAY, offers=offers(), currency="EUR")
    with pytest.raises(SnapshotError, match="convert to USD"):
        write_snapshot(snap, tmp_path)
    assert not (tmp_path / "eur").exists()


def test_columns_given_as_numpy_arrays_validate_the_same() -> None:
    cols = {"provider": np.array(["aws", "gcp"]), "region": np.array(["a", "b"]),
            "instance_type": np.array(["x", "y"]), "gpu": np.array(["T4", "T4"]),
            "gpu_count": np.array([1.0, 2.0]), "price_hr": np.array([1.0, np.nan])}
    with pytest.raises(SnapshotError, match="'price_hr' has no value in row 1"):
        Offers.from_columns(cols)
    cols["price_hr"] = np.array([1.0, 2.0])
    assert Offers.from_columns(cols)["provider"].tolist() == ["aws", "gcp"]


def test_embedded_defaults_load_fast() -> None:
    if not any(embedded_snapshots_dir().glob("*/*.json")):
        pytest.skip("no embedded snapshots in this build")
    load_offers([embedded_snapshots_dir()])  # warm the import and file caches
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        merged = load_offers([embedded_snapshots_dir()])
        best = min(best, time.perf_counter() - start)
    assert len(merged) > 10_000
    # A deadline a loaded machine meets, not the goal: 0.66 s was seen on 2 cores at load 10.
    # The 0.15 s goal is measured by bench/cli_latency.py.
    assert best < 4.0, f"loading the default snapshots took {best:.3f} s"
