"""Damaged and hostile price data (issue 16): every pricing reader refuses bad values with one line
naming the file, the field and what was expected (exit 2), and a damaged newest snapshot of one
source is skipped so that compare, plan and prices show keep working on the older one."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpucost.cli import main
from gpucost.errors import InputError, SnapshotError
from gpucost.model.interruptions import TABLE_PATH, read_rate_table, rules
from gpucost.paths import embedded_snapshots_dir, user_snapshots_dir
from gpucost.pricing.snapshot import (
    Offers,
    Snapshot,
    load_snapshots,
    read_snapshot,
    write_snapshot,
)

DAY = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def good_payload() -> dict[str, Any]:
    offers = Offers.from_records([
        {"provider": "aws", "region": "us-east-1", "instance_type": f"g{i}.xlarge", "gpu": "T4",
         "gpu_count": 1, "price_hr": 0.5 + i, "spot_price_hr": 0.2} for i in range(3)])
    return Snapshot(source="test", fetched_at=DAY, offers=offers).to_dict()


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def column_text(column: str, cells: str) -> str:
    """A snapshot whose ``column`` is the raw JSON ``cells`` (3 rows): values json.dumps refuses
    to write (Infinity, NaN, 1e999) are spelled as a damaged or hostile file holds them."""
    payload = good_payload()
    payload["columns"][column] = "@CELLS@"
    return json.dumps(payload).replace('"@CELLS@"', cells)


BAD_CELLS = [
    ("price_hr", "[1.0, Infinity, 2.0]", "'price_hr' row 1 is not a number: Infinity"),
    ("price_hr", "[1.0, -Infinity, 2.0]", "'price_hr' row 1 is not a number: -Infinity"),
    ("price_hr", "[1.0, NaN, 2.0]", "'price_hr' row 1 is not a number: NaN"),
    ("spot_price_hr", "[NaN, 1.0, 2.0]", "'spot_price_hr' row 0 is not a number: NaN"),
    ("price_hr", "[1.0, 2.0, -0.0]", "'price_hr' is negative in row 2: -0"),
    ("price_hr", "[1.0, 2.0, 0]", "'price_hr' is out of range in row 2: 0"),
    ("price_hr", "[1e308, 1.0, 2.0]", "'price_hr' is out of range in row 0: 1e\\+308"),
    ("price_hr", "[1.0, 1e999, 2.0]", "'price_hr' is out of range in row 1: inf"),
    ("price_hr", "[1.0, 2.0, 1" + "0" * 400 + "]", "'price_hr' row 2 is out of range"),
    ("price_hr", '[1.0, "2.5", 2.0]', "'price_hr' row 1 is not a number: '2.5'"),
    ("price_hr", "[1.0, true, 2.0]", "'price_hr' row 1 is not a number: True"),
    ("gpu_count", "[1, 1e23, 1]", "'gpu_count' is out of range in row 1: 1e\\+23"),
    ("gpu_count", "[1, 1e308, 1]", "'gpu_count' is out of range in row 1"),
    ("storage_gb_month", "[0.1, -0.0, 0.1]", "'storage_gb_month' is negative in row 1: -0"),
    ("reliability", "[0.5, 1.5, 0.9]", "'reliability' is out of range in row 1: 1.5"),
    ("gpu", '["T4", ["T4"], "T4"]', "'gpu' row 1 is \\['T4'\\], expected text"),
    ("region", '["a", "b\\u0000c", "d"]', "'region' row 1 is .*expected printable text"),
    ("region", '["a", "\\ud800", "d"]', "'region' row 1 is .*expected printable text"),
    ("instance_type", json.dumps(["a", "x" * 5000, "c"]),
     "'instance_type' row 1 is 5,000 characters long, expected at most 200"),
    ("price_hr", '{"0": 1.0}', "column 'price_hr' is not a list"),
]


@pytest.mark.parametrize(("column", "cells", "message"), BAD_CELLS,
                         ids=[message for _, _, message in BAD_CELLS])
def test_a_bad_cell_names_the_file_the_column_and_what_was_expected(
        tmp_path: Path, column: str, cells: str, message: str) -> None:
    path = write_text(tmp_path / "test" / "2026-11-30.json", column_text(column, cells))
    with pytest.raises(SnapshotError, match=message) as err:
        read_snapshot(path)
    text = str(err.value)
    assert str(path) in text and "\n" not in text


@pytest.mark.parametrize(("damage", "message"), [
    (lambda d: d.update(fetched_at="+99999-01-01"), "fetched_at .* is not an ISO 8601"),
    (lambda d: d.update(fetched_at="9999-12-31T23:00:00-05:00"), "fetched_at .* is not an ISO"),
    (lambda d: d.update(fetched_at="1970-01-01T00:00:00Z"), "not a date from 2000 to 2099"),
    (lambda d: d.update(fetched_at=20261130), "fetched_at 20261130 is not an ISO 8601"),
    (lambda d: d.update(source="../../etc"), "source '../../etc' is not a source name"),
    (lambda d: d.update(source=["x"]), "source \\['x'\\] is not a source name"),
    (lambda d: d.update(month_hours=True), "month_hours True is not a plausible month"),
    (lambda d: d["columns"].update({"a\nb": [1, 2, 3]}), r"unknown column\(s\) 'a\\nb'"),
    (lambda d: d.update(provenance=[1]), "'provenance' must be an object"),
    (lambda d: d.update(provenance={"x": json.loads("[" * 40 + "]" * 40)}),
     "'provenance' is nested deeper than 32 levels"),
])
def test_bad_header_fields_are_refused(tmp_path: Path, damage: Any, message: str) -> None:
    payload = good_payload()
    damage(payload)
    path = write_text(tmp_path / "test" / "2026-11-30.json", json.dumps(payload))
    with pytest.raises(SnapshotError, match=message) as err:
        read_snapshot(path)
    assert "\n" not in str(err.value)


def test_non_json_numbers_deep_nesting_and_folders_are_refused_not_crashed(
        tmp_path: Path) -> None:
    payload = good_payload()
    text = json.dumps(payload).replace('"provenance": {}', '"provenance": {"x": NaN}')
    with pytest.raises(SnapshotError, match="'provenance' holds NaN or Infinity"):
        read_snapshot(write_text(tmp_path / "a.json", text))
    deep = '{"format": "gpucost-price-snapshot", "provenance": ' + "[" * 100_000 + "]" * 100_000
    with pytest.raises(SnapshotError, match="is corrupt \\(nested too deeply\\)"):
        read_snapshot(write_text(tmp_path / "b.json", deep + "}"))
    folder = tmp_path / "test" / "2026-12-01.json"
    folder.mkdir(parents=True)
    with pytest.raises(SnapshotError, match="is a folder, not a file"):
        read_snapshot(folder)


def test_a_snapshot_with_infinity_prices_on_the_command_line_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_text(tmp_path / "bad.json", column_text("price_hr", "[1.0, Infinity, 2.0]"))
    for argv in (["prices", "show", "--prices", str(path)],
                 ["compare", "--prices", str(path)],
                 ["plan", "--prices", str(path), "--samples", "2e7"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert str(path) in err and "'price_hr'" in err and "expected" in err


def test_more_offers_than_a_ranking_holds_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1,000,000-offer snapshot took compare to 3.3 GB (bench/large_snapshot.py): past the
    offers cap one file, or several together, is refused before ranking (cap lowered to 2 here:
    the fixture's files hold 3 rows each)."""
    monkeypatch.setattr("gpucost.pricing.snapshot.MAX_SNAPSHOT_OFFERS", 2)
    one = write_text(tmp_path / "one.json", json.dumps(good_payload()))
    assert main(["compare", "--prices", str(one)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{one}: 3 offers, more than the 2" in err, err
    monkeypatch.setattr("gpucost.pricing.snapshot.MAX_SNAPSHOT_OFFERS", 5)
    other = good_payload()
    other["columns"]["region"] = ["eu-west-1"] * 3  # other machines: nothing merged away
    two = write_text(tmp_path / "two.json", json.dumps(other))
    assert main(["compare", "--prices", str(one), "--prices", str(two)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 price snapshots hold 6 offers together" in err, err
    assert main(["compare", "--prices", str(one)]) == 0


# ------------------------------------------------------------------ fallback to an intact one

LAMBDA = "skypilot-lambda"


def user_lambda_snapshot(date: str) -> Path:
    """A copy of the embedded Lambda snapshot in the user folder, dated ``date``."""
    embedded = next((embedded_snapshots_dir() / LAMBDA).glob("*.json"))
    data = json.loads(embedded.read_text())
    data["fetched_at"] = f"{date}T00:00:00Z"
    target = user_snapshots_dir() / LAMBDA / f"{date}.json"
    return write_text(target, json.dumps(data))


DAMAGES = {
    "corrupt": lambda text: text.replace('"columns"', '"columns" ::', 1),
    "truncated": lambda text: text[: len(text) // 2],
    "empty": lambda text: "",
    "infinity": lambda text: text.replace('"price_hr": [', '"price_hr": [Infinity, ', 1),
    "not utf-8": lambda text: "\udcff" + text,
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_newest_snapshot_is_skipped_for_the_newest_intact_one(
        damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    user_lambda_snapshot("2026-12-01")
    newest = user_lambda_snapshot("2026-12-02")
    newest.write_bytes(DAMAGES[damage](newest.read_text()).encode("utf-8", "surrogateescape"))

    assert main(["prices", "show", "--json"]) == 0
    captured = capsys.readouterr()
    shown = {s["source"]: s for s in json.loads(captured.out)["sources"]}
    assert shown[LAMBDA]["date"] == "2026-12-01"  # the older intact one, not the embedded one
    assert len(shown) > 1  # every other source still there
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("gpucost: warning: skipped a damaged price snapshot: ")
    assert str(newest) in captured.err

    assert main(["compare", "--format", "json", "--limit", "3"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["plan", "--samples", "2e7", "--format", "json"]) == 0
    assert str(newest) in capsys.readouterr().err


def test_a_folder_named_like_a_snapshot_file_is_not_a_snapshot(
        capsys: pytest.CaptureFixture[str]) -> None:
    user_lambda_snapshot("2026-12-01")
    (user_snapshots_dir() / LAMBDA / "2026-12-09.json").mkdir()
    assert main(["prices", "show", "--json"]) == 0
    shown = {s["source"]: s for s in json.loads(capsys.readouterr().out)["sources"]}
    assert shown[LAMBDA]["date"] == "2026-12-01"


def test_every_snapshot_of_a_source_damaged_leaves_that_source_out(tmp_path: Path) -> None:
    folder = tmp_path / "prices"
    for source in ("alpha", "beta"):
        snap = read_snapshot(write_text(tmp_path / "x.json", json.dumps(good_payload())))
        write_snapshot(Snapshot(source=source, fetched_at=DAY, offers=snap.offers), folder)
    write_text(folder / "beta" / "2026-11-30.json", "{")
    warned: list[str] = []
    loaded = load_snapshots([folder], warn=warned.append)
    assert [s.source for s in loaded] == ["alpha"]
    assert len(warned) == 2 and "beta" in warned[1] and "left out" in warned[1]
    shutil.rmtree(folder / "alpha")
    with pytest.raises(SnapshotError, match="no price snapshots found \\(or only damaged"):
        load_snapshots([folder], warn=warned.append)


# ------------------------------------------------------------------ `gpucost prices import`

CATALOG_HEADER = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,"
                  "SpotPrice,Region,AvailabilityZone,Arch")


def catalog(tmp_path: Path, *rows: str, header: str = CATALOG_HEADER) -> Path:
    """A one-file SkyPilot catalog folder (aws_vms_gpu.csv) holding ``rows``."""
    folder = tmp_path / "catalog"
    write_text(folder / "aws_vms_gpu.csv", "\n".join([header, *rows]) + "\n")
    return folder


def row(price: str = "3.06", spot: str = "0.9", count: str = "1.0", info: str = "") -> str:
    return f"p3.2xlarge,V100,{count},8.0,61.0,{info},{price},{spot},us-east-1,use1-az1,x86_64"


def import_catalog(folder: Path, tmp_path: Path) -> int:
    return main(["prices", "import", "skypilot-catalog", str(folder), "--fetched-at",
                 "2026-11-30", "--out", str(tmp_path / "out")])


@pytest.mark.parametrize(("bad_row", "message"), [
    (row(price="inf"), "line 3: Price 'inf' is not a finite, non-negative number"),
    (row(price="1e999"), "line 3: Price '1e999' is not a finite, non-negative number"),
    (row(price="nan"), "line 3: Price 'nan' is not a finite"),
    (row(price="-0"), "line 3: Price '-0' is not a finite, non-negative number"),
    (row(spot="-1.5"), "line 3: SpotPrice '-1.5' is not a finite, non-negative number"),
    (row(price="cheap"), "line 3: Price 'cheap' is not a finite"),
    (row(price="1e308"), "line 3: Price 1e\\+308 for V100 p3.2xlarge is above 1000"),
    (row(count="1e23"), "line 3: AcceleratorCount 1e\\+23 for V100 p3.2xlarge is above 64"),
])
def test_a_catalog_with_impossible_prices_is_refused_naming_file_line_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], bad_row: str, message: str) -> None:
    folder = catalog(tmp_path, row(), bad_row)
    assert import_catalog(folder, tmp_path) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert re.search("aws_vms_gpu.csv " + message, err), err
    assert not (tmp_path / "out").exists()  # nothing written


def test_damaged_catalog_files_are_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = catalog(tmp_path, row())
    csv_file = folder / "aws_vms_gpu.csv"
    for content, message in (
            (b"\xff\xfe" + csv_file.read_bytes(), "is not UTF-8 text"),
            (csv_file.read_bytes() + b'x,"' + b"y" * 200_000 + b'"\n', "not CSV"),
    ):
        csv_file.write_bytes(content)
        assert import_catalog(folder, tmp_path) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


def test_a_hostile_gpu_info_cell_is_ignored_not_a_crash(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    deep = '"' + "[" * 5000 + "]" * 5000 + '"'
    folder = catalog(tmp_path, row(info=deep), row(info='"{""Gpus"": ' + "[" * 3000 + '"'))
    assert import_catalog(folder, tmp_path) == 0, capsys.readouterr().err
    assert "skypilot-aws: 1 offers" in capsys.readouterr().out  # same machine twice: kept once


def test_damaged_provenance_and_readme_are_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = catalog(tmp_path, row())
    deep = write_text(tmp_path / "prov.json", '{"fetched_at": ' + "[" * 100_000 + "]" * 100_000
                      + "}")
    nan = write_text(tmp_path / "nan.json", '{"fetched_at": "2026-11-30", "commit": NaN}')
    for argv, message in (
            (["--provenance", str(deep)], "nested deeper than"),
            (["--provenance", str(nan)], "NaN is not a finite number"),
            (["--fetched-at", "9999-12-31T23:00:00-05:00"], "is not an ISO 8601 timestamp"),
    ):
        assert main(["prices", "import", "skypilot-catalog", str(folder), "--out",
                     str(tmp_path / "out"), *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    (folder / "README.md").write_bytes(b"# prices as of 2026-11-30 \xff\n")
    assert main(["prices", "import", "skypilot-catalog", str(folder), "--out",
                 str(tmp_path / "out")]) == 2
    assert "README" in capsys.readouterr().err


# ------------------------------------------------------------------ the interruption-rate table

def rate_table(tmp_path: Path, *lines: str) -> Path:
    original = TABLE_PATH.read_text(encoding="utf-8").splitlines()
    return write_text(tmp_path / "rates.csv", "\n".join([*original, *lines]) + "\n")


@pytest.mark.parametrize(("line", "message"), [
    ("x,spot,*,,inf,,low,src", "rate_per_hr 'inf', expected a number from 0 to 1 per hour"),
    ("x,spot,*,,1e999,,low,src", "rate_per_hr '1e999', expected a number from 0"),
    ("x,spot,*,,nan,,low,src", "rate_per_hr 'nan', expected"),
    ("x,spot,*,,-0,,low,src", "rate_per_hr '-0', expected"),
    ("x,spot,*,,2,,low,src", "rate_per_hr '2', expected"),
    ("x,spot,*,,,,low,src", "rate_per_hr '', expected"),
    ("x,reserved,*,,0.1,,low,src", "market 'reserved', expected one of on-demand, spot"),
    ("x,spot,*,30%,,,low,src", "band '30%', expected one of"),
    ("x,spot,*,,0.1,always,low,src", "reliability 'always'"),
    ("x,spot,*,,0.1", "5 cells, expected 8"),
])
def test_a_bad_interruption_rate_row_names_file_line_and_column(
        tmp_path: Path, line: str, message: str) -> None:
    path = rate_table(tmp_path, line)
    last = len(path.read_text().splitlines())
    with pytest.raises(InputError, match=re.escape(f"{path} line {last}: ") + message):
        read_rate_table(path)


def test_the_shipped_rate_table_reads_cleanly_and_a_damaged_one_is_one_line(
        tmp_path: Path) -> None:
    assert read_rate_table(TABLE_PATH) == rules()
    bad = write_text(tmp_path / "r.csv", "provider,market\naws,spot\n")
    with pytest.raises(InputError, match="the header must be provider,market,instance"):
        read_rate_table(bad)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="is not UTF-8 text"):
        read_rate_table(bad)
