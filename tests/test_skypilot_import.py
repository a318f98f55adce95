"""The SkyPilot catalog importer on tiny fixtures (rows copied from the public catalog), the real
shared catalog, and the `gpucost prices import|show` commands."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import math
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from goldens import updating
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucost import providers
from gpucost.catalog import get_gpu
from gpucost.cli import main
from gpucost.errors import InputError, SnapshotError
from gpucost.pricing.rates import rates_for
from gpucost.pricing.registry import is_stale
from gpucost.pricing.snapshot import Offers, Snapshot, read_snapshot, write_snapshot
from gpucost.pricing.sources.skypilot_catalog import (
    gpu_candidate,
    import_skypilot_catalog,
    load_provenance_file,
)
from gpucost.providers.gcp import host_types as gcp_host_types

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "skypilot"
FLAT = FIXTURES / "flat"
UPSTREAM = FIXTURES / "upstream"
REPO_ROOT = Path(__file__).resolve().parents[1]
AS_OF = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def by_source(snapshots: Sequence[Snapshot]) -> dict[str, Snapshot]:
    return {s.source: s for s in snapshots}


def rows(snapshot: Snapshot, **where: str) -> list[dict[str, Any]]:
    return [r for r in snapshot.offers.to_records()
            if all(r[k] == v for k, v in where.items())]


def one(snapshot: Snapshot, **where: str) -> dict[str, Any]:
    found = rows(snapshot, **where)
    assert len(found) == 1, found
    return found[0]


def csv_rows(path: Path) -> int:
    with path.open(newline="", encoding="utf-8") as f:
        return sum(1 for _ in csv.DictReader(f))


@pytest.fixture(scope="module")
def flat() -> dict[str, Snapshot]:
    return by_source(import_skypilot_catalog(FLAT))


def test_one_snapshot_per_cloud_dated_from_the_readme(flat: dict[str, Snapshot]) -> None:
    assert sorted(flat) == ["skypilot-aws", "skypilot-gcp", "skypilot-runpod"]
    for snap in flat.values():
        assert snap.fetched_at == AS_OF
        assert set(snap.offers["provider"].tolist()) == {snap.source.removeprefix("skypilot-")}


def test_provenance_names_files_commits_hashes_and_every_row(flat: dict[str, Snapshot]) -> None:
    gcp = flat["skypilot-gcp"].provenance
    assert gcp["repository"] == "skypilot-org/skypilot-catalog"
    files = {f["file"]: f for f in gcp["files"]}
    # "same" in the README's commit column repeats the row above.
    assert files["gcp_vms_host.csv"]["commit"] == files["gcp_vms_gpu.csv"]["commit"] == \
        "006059e0f18acb1341e22a27751e9f80df6ba92f"
    assert files["gcp_vms_gpu.csv"]["path"] == "catalogs/v8/gcp/vms.csv"
    for snap in flat.values():
        prov = snap.provenance
        for f in prov["files"]:
            path = FLAT / f["file"]
            assert f["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
            assert f["rows"] == csv_rows(path)
        assert prov["rows_read"] == prov["rows_kept"] + sum(prov["rows_skipped"].values())
        assert prov["offers"] == len(snap.offers)
        assert prov["importer_version"] == "1"
        assert prov["prices_as_of"] == "2026-11-30"


def test_gcp_machine_price_is_host_plus_accelerators(flat: dict[str, Snapshot]) -> None:
    gcp = flat["skypilot-gcp"]
    a2 = one(gcp, instance_type="a2-highgpu-1g")
    assert a2["price_hr"] == pytest.approx(0.73948 + 2.93391, abs=1e-9)
    assert a2["price_hr"] == pytest.approx(3.67339, abs=1e-9)
    assert a2["spot_price_hr"] == pytest.approx(0.36975 + 1.4341, abs=1e-9)
    assert (a2["gpu"], a2["gpu_count"], a2["vcpus"], a2["ram_gb"]) == ("A100 SXM4 40GB", 1, 12, 85)
    assert a2["zone"] == "us-central1-a" and a2["intra_node_link"] == "nvlink"
    t4 = one(gcp, instance_type="n1-standard-8")
    assert (t4["gpu"], t4["price_hr"]) == ("T4", pytest.approx(0.38 + 0.35))
    # One L4 fits every g2 size with one L4: one source row, an offer per host in the zone.
    assert sorted(r["instance_type"] for r in rows(gcp, gpu="L4")) == ["g2-standard-4",
                                                                      "g2-standard-8"]
    prov = gcp.provenance
    assert prov["rows_read"] == 4 and prov["rows_kept"] == 3
    assert prov["rows_skipped"] == {"TPU": 1}
    assert prov["rows_skipped_by_name"]["TPU"] == {"tpu-v5litepod-1": 1}
    assert prov["host_rows_read"] == 4


def test_gcp_host_rule_follows_machine_naming() -> None:
    assert gcp_host_types("A100", 2) == ("a2-highgpu-2g",)
    assert gcp_host_types("A100", 16) == ("a2-megagpu-16g",)
    assert gcp_host_types("A100-80GB", 8) == ("a2-ultragpu-8g",)
    assert gcp_host_types("H100-MEGA", 8) == ("a3-megagpu-8g",)
    assert gcp_host_types("B200", 8) == ("a4-highgpu-8g",)
    assert gcp_host_types("L4", 2) == ("g2-standard-24",)
    assert gcp_host_types("V100", 8) == ("n1-standard-64",)
    assert gcp_host_types("tpu-v6e-8", 8) == ()


@pytest.mark.parametrize(("cloud", "accelerator", "instance_type", "memory_gb", "expected"), [
    # Vast's accelerator column drops the variant; its instance type keeps it.
    ("vast", "RTX4070", "2x-RTX_4070S_Ti-32-65536", 16.0, "RTX 4070S Ti"),
    ("vast", "H100", "1x-H100_NVL-32-65536", 93.6, "H100 NVL 94GB"),
    ("vast", "A100", "1x-A100_PCIE-32-65536", 80.0, "A100 PCIe 80GB"),
    ("vast", "A100", "2x-A100_SXM4-32-65536", 40.0, "A100 SXM4 40GB"),
    ("verda", "H100", "1H100.80S.32V", 80.0, "H100 SXM5 80GB"),  # Verda rents SXM only
    ("aws", "V100-32GB", "p3dn.24xlarge", 32.0, "V100 SXM2 32GB"),
    ("lambda", "A100", "gpu_8x_a100", 40.0, "A100 SXM4 40GB"),
    ("lambda", "GH200", "gpu_1x_gh200", 96.0, "GH200 96GB"),
    ("shadeform", "V100", "paperspace_V100", None, "V100 PCIe 16GB"),  # no hint: PCIe
    ("runpod", "RTX6000-Ada", "1x_RTX6000-Ada_SECURE", None, "RTX 6000 Ada"),
    ("runpod", "RTXPRO6000-WK", "1x_RTXPRO6000-WK_SECURE", None, "RTX PRO 6000 WK"),
    ("verda", "RTX-PRO-6000", "1RTXPRO6000.30V", 96.0, "RTX PRO 6000"),
    ("runpod", "RTXA4000", "1x_RTXA4000_SECURE", None, "RTX A4000"),
])
def test_gpu_candidate_reads_form_factor_and_memory(cloud: str, accelerator: str,
                                                     instance_type: str, memory_gb: float | None,
                                                     expected: str) -> None:
    assert gpu_candidate(cloud, accelerator, instance_type, "", memory_gb) == expected


def test_aws_non_gpus_fractional_gpus_and_missing_spot(flat: dict[str, Snapshot]) -> None:
    aws = flat["skypilot-aws"]
    prov = aws.provenance
    assert prov["rows_skipped"] == {"not a GPU": 1}
    assert prov["rows_skipped_by_name"]["not a GPU"] == {"Gaudi HL-205": 1}
    p4d = one(aws, instance_type="p4d.24xlarge")
    assert (p4d["gpu"], p4d["gpu_count"], p4d["network_gbps"], p4d["intra_node_link"]) == \
        ("A100 SXM4 40GB", 8, 400, "nvlink")
    assert (p4d["price_hr"], p4d["spot_price_hr"]) == (21.957642, 8.1915)
    eighth = one(aws, instance_type="g6f.large")
    assert eighth["gpu_count"] == 0.125
    assert eighth["gpu_memory_gb"] == pytest.approx(get_gpu("L4").memory_gb / 8)
    quarter = one(aws, instance_type="g6f.2xlarge")
    assert quarter["gpu_count"] == 0.25
    assert math.isnan(float(quarter["spot_price_hr"]))  # empty SpotPrice: no spot market
    assert math.isnan(float(quarter["network_gbps"]))  # not in the table: unknown, not zero


def test_runpod_memory_comes_from_the_catalog(flat: dict[str, Snapshot]) -> None:
    runpod = flat["skypilot-runpod"]
    sxm = one(runpod, instance_type="1x_A100-80GB-SXM_SECURE")
    assert sxm["gpu"] == "A100 SXM4 80GB"
    assert sxm["gpu_memory_gb"] == get_gpu("A100 SXM4 80GB").memory_gb == 80  # not "80 MiB"
    assert one(runpod, instance_type="1x_A100-80GB_SECURE")["gpu"] == "A100 PCIe 80GB"
    rtx = one(runpod, instance_type="2x_RTX4090_SECURE")
    assert (rtx["gpu"], rtx["gpu_count"], rtx["intra_node_link"]) == ("RTX 4090", 2, "pcie")


def test_storage_transfer_and_month_convention_per_provider(flat: dict[str, Snapshot]) -> None:
    expect = {"skypilot-aws": (0.08, 0.09, 730), "skypilot-gcp": (0.10, 0.12, 730),
              "skypilot-runpod": (0.10, 0.0, 720)}
    for source, (storage, egress, month) in expect.items():
        snap = flat[source]
        assert snap.month_hours == month
        assert set(snap.offers["storage_gb_month"].tolist()) == {storage}
        assert set(snap.offers["egress_gb"].tolist()) == {egress}
        assert set(snap.offers["month_hours"].tolist()) == {month}


def test_upstream_layout_needs_a_date_and_reads_hosts_from_the_same_file() -> None:
    with pytest.raises(InputError, match="--fetched-at"):
        import_skypilot_catalog(UPSTREAM)
    snaps = by_source(import_skypilot_catalog(UPSTREAM, fetched_at="2026-11-30"))
    gcp = snaps["skypilot-gcp"]
    assert gcp.provenance["files"][0]["path"] == "catalogs/v8/gcp/vms.csv"
    assert gcp.provenance["files"][0]["commit"] is None  # nothing stated it
    assert one(gcp, instance_type="a2-highgpu-1g")["price_hr"] == pytest.approx(3.67339)
    assert gcp.provenance["rows_skipped"] == {"GCP: host machine not offered in the zone": 1}
    assert gcp.provenance["host_rows_read"] == 2  # a2 host and an e2 VM with no GPU
    lam = snaps["skypilot-lambda"]
    assert one(lam, instance_type="gpu_1x_a100_sxm4")["gpu"] == "A100 SXM4 40GB"
    assert one(lam, instance_type="gpu_1x_a100")["gpu"] == "A100 PCIe 40GB"
    assert one(lam, instance_type="gpu_8x_h100_sxm5")["gpu"] == "H100 SXM5 80GB"
    assert lam.fetched_at == AS_OF


def test_provenance_file_json_and_toml(tmp_path: Path) -> None:
    commit = "a" * 40
    (tmp_path / "p.json").write_text(json.dumps({"fetched_at": "2026-10-01", "commit": commit}))
    (tmp_path / "p.toml").write_text(f'fetched_at = 2026-10-02\n[commits]\n"gcp/vms.csv" = '
                                     f'"{"b" * 40}"\n')
    cases = (("p.json", "2026-10-01", commit), ("p.toml", "2026-10-02", "b" * 40))
    for name, date, expected in cases:
        snaps = by_source(import_skypilot_catalog(
            UPSTREAM, provenance=load_provenance_file(tmp_path / name)))
        assert snaps["skypilot-gcp"].date == date
        assert snaps["skypilot-gcp"].provenance["files"][0]["commit"] == expected
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="is not valid JSON"):
        load_provenance_file(tmp_path / "bad.json")
    with pytest.raises(InputError, match="does not exist"):
        load_provenance_file(tmp_path / "missing.json")


def test_bad_folders_and_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a folder"):
        import_skypilot_catalog(tmp_path / "nope")
    with pytest.raises(InputError, match="no SkyPilot catalog files"):
        import_skypilot_catalog(tmp_path)
    (tmp_path / "aws_vms_gpu.csv").write_text("InstanceType,Price\np4d.24xlarge,1.0\n")
    with pytest.raises(SnapshotError, match=r"not a SkyPilot catalog.*AcceleratorName"):
        import_skypilot_catalog(tmp_path, fetched_at="2026-11-30")
    with pytest.raises(InputError, match=r"catalog import: fetched_at 'yesterday' is not an ISO"):
        import_skypilot_catalog(FLAT, fetched_at="yesterday")


def test_written_snapshot_reads_back_identical(flat: dict[str, Snapshot], tmp_path: Path) -> None:
    for snap in flat.values():
        back = read_snapshot(write_snapshot(snap, tmp_path))
        assert back.provenance == json.loads(json.dumps(snap.provenance))
        for name, column in snap.offers.columns.items():
            np.testing.assert_array_equal(back.offers[name], column)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=0, max_size=12))
def test_every_row_is_kept_or_counted(picks: list[int]) -> None:
    lines = (FLAT / "aws_vms_gpu.csv").read_text().splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        body = "\n".join([lines[0], *(lines[1 + i] for i in picks)])
        (Path(tmp) / "aws_vms_gpu.csv").write_text(body)
        (snap,) = import_skypilot_catalog(tmp, fetched_at="2026-11-30")
    prov = snap.provenance
    assert prov["rows_read"] == len(picks)
    assert prov["rows_read"] == prov["rows_kept"] + sum(prov["rows_skipped"].values())
    # Exact duplicate rows collapse into one offer.
    assert len(snap.offers) == len({i for i in picks if i != 1})  # row 1 is the Gaudi machine


def test_real_catalog_counts_match_provenance(shared_data: Path) -> None:
    folder = shared_data / "skypilot-catalog-v8"
    readme = (folder / "README.md").read_text()
    table_row = re.compile(r"^\| (\w+\.csv) \|[^|]+\|[^|]+\| ([\d,]+) \|", re.M)
    stated_rows = {m[1]: int(m[2].replace(",", "")) for m in table_row.finditer(readme)}
    stated_sha = dict(re.findall(r"(\w+) ([0-9a-f]{16})\b", readme))
    snaps = import_skypilot_catalog(folder)
    assert len(snaps) == 8
    for snap in snaps:
        prov = snap.provenance
        total = 0
        for f in prov["files"]:
            assert f["rows"] == stated_rows[f["file"]] == csv_rows(folder / f["file"])
            stem = f["file"].removesuffix(".csv").replace("_vms", "")  # README: aws, gcp_gpu, ...
            key = stem if stem.startswith("gcp") else stem.removesuffix("_gpu")
            assert f["sha256"].startswith(stated_sha[key])
            assert re.fullmatch(r"[0-9a-f]{40}", f["commit"])
            total += f["rows"]
        hosts = prov.get("host_rows_read", prov.get("rows_without_accelerator"))
        assert prov["rows_read"] + hosts == total
        assert prov["rows_read"] == prov["rows_kept"] + sum(prov["rows_skipped"].values())
        assert prov["offers"] == len(snap.offers) > 0
        assert snap.date == "2026-11-30"
        # Every offer names a GPU the catalog knows, with its catalog memory.
        for gpu in set(snap.offers["gpu"].tolist()):
            assert get_gpu(gpu).name == gpu
    aws = by_source(snaps)["skypilot-aws"]
    assert aws.provenance["rows_skipped_by_name"]["not a GPU"]["Inferentia"] == 201
    # Graviton hosts (g5g) are left out: plans assume an x86-64 host for the torch wheel.
    assert aws.provenance["rows_skipped"]["not an x86-64 host"] == 91
    assert not np.char.startswith(aws.offers["instance_type"], "g5g.").any()
    fractional = aws.offers["gpu_count"][np.char.startswith(aws.offers["instance_type"], "g6f.")]
    assert set(fractional.tolist()) == {0.125, 0.25, 0.5}
    gcp = by_source(snaps)["skypilot-gcp"].offers
    a4 = gcp["price_hr"][gcp["instance_type"] == "a4-highgpu-8g"]  # host rows are 0.0
    assert len(a4) > 0 and (a4 > 50).all()  # 8 B200s: the accelerator row carries the price


def test_committed_default_snapshots_are_this_importers_output(shared_data: Path) -> None:
    # Fails when the importer or the GPU catalog changes what the catalog imports to; the
    # embedded snapshots are golden files too (GPUCOST_UPDATE_GOLDENS=1 rewrites them).
    regenerate = ("regenerate: gpucost prices import skypilot-catalog "
                  "../shared/data/skypilot-catalog-v8 --out pricing_snapshots, "
                  "or run the tests with GPUCOST_UPDATE_GOLDENS=1")
    committed = REPO_ROOT / "pricing_snapshots"
    for snap in import_skypilot_catalog(shared_data / "skypilot-catalog-v8"):
        if updating():
            write_snapshot(snap, committed)
        back = read_snapshot(committed / snap.source / f"{snap.date}.json")
        assert back.provenance["files"] == json.loads(json.dumps(snap.provenance["files"]))
        assert len(back.offers) == len(snap.offers), regenerate
        for name, column in snap.offers.columns.items():
            np.testing.assert_array_equal(back.offers[name], column,
                                          err_msg=f"{snap.source} {name}; {regenerate}")


def test_is_stale_by_age() -> None:
    snap = Snapshot(source="x", fetched_at=AS_OF, offers=Offers.empty())
    assert not is_stale(snap, 30, now=AS_OF + dt.timedelta(days=30))
    assert is_stale(snap, 30, now=AS_OF + dt.timedelta(days=30, seconds=1))
    assert is_stale(snap, 0, now=AS_OF + dt.timedelta(hours=1))


# ------------------------------------------------------------------------------- command line

def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_import_writes_to_the_user_snapshot_dir(capsys: pytest.CaptureFixture[str],
                                                    _isolated_home: Path) -> None:
    code, out, _ = run(["prices", "import", "skypilot-catalog", str(FLAT)], capsys)
    assert code == 0
    assert "skypilot-aws: 3 offers (4 rows read, 1 skipped: 1 not a GPU)" in out
    written = sorted(p.relative_to(_isolated_home).as_posix()
                     for p in (_isolated_home / "snapshots").rglob("*.json"))
    assert written == [f"snapshots/skypilot-{c}/2026-11-30.json" for c in ("aws", "gcp", "runpod")]


def test_cli_show_ages_stale_flag_and_cheapest(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    today = dt.datetime.now(dt.UTC).date()
    old = (today - dt.timedelta(days=40)).isoformat()
    new = (today - dt.timedelta(days=1)).isoformat()
    assert run(["prices", "import", "skypilot-catalog", str(FLAT), "--out", str(tmp_path / "old"),
                "--fetched-at", old], capsys)[0] == 0
    assert run(["prices", "import", "skypilot-catalog", str(UPSTREAM), "--out",
                str(tmp_path / "new"), "--fetched-at", new], capsys)[0] == 0
    code, out, _ = run(["prices", "show", "--prices", str(tmp_path / "old"), "--prices",
                        str(tmp_path / "new"), "--gpu", "a100", "--limit", "2"], capsys)
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("skypilot-")}
    assert lines["skypilot-aws"].endswith("STALE")
    assert not lines["skypilot-lambda"].endswith("STALE")
    assert ("STALE: prices older than 30 days from skypilot-aws, skypilot-gcp, skypilot-runpod"
            in out)
    assert "cheapest A100 SXM4 40GB offers" in out

    code, out, _ = run(["prices", "show", "--prices", str(tmp_path / "old"), "--prices",
                        str(tmp_path / "new"), "--gpu", "A100 SXM4 40GB", "--json"], capsys)
    payload = json.loads(out)
    per_gpu = [o["usd_per_gpu_hr"] for o in payload["offers"]]
    # Lambda's 1x SXM4 ($1.99), p4d ($21.96 / 8 GPUs), a2-highgpu-1g ($3.67339; the same type
    # in the same region from both folders is listed once).
    assert per_gpu == pytest.approx([1.99, 21.957642 / 8, 3.67339])
    assert [o["instance_type"] for o in payload["offers"]] == [
        "gpu_1x_a100_sxm4", "p4d.24xlarge", "a2-highgpu-1g"]
    stale = {s["source"]: (s["stale"], s["age_days"]) for s in payload["sources"]}
    assert stale["skypilot-aws"][0] is True and stale["skypilot-aws"][1] >= 40
    # fetched yesterday at 00:00: between 1 and 2 days old, depending on the hour
    assert stale["skypilot-lambda"][0] is False and stale["skypilot-lambda"][1] <= 2

    code, out, _ = run(["prices", "show", "--prices", str(tmp_path / "new"), "--source",
                        "skypilot-lambda", "--max-age-days", "0.5"], capsys)
    assert code == 0 and "skypilot-gcp" not in out and "STALE" in out


def test_cli_errors_are_one_line_with_exit_2(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    code, _, err = run(["prices", "import", "skypilot-catalog", str(tmp_path / "none")], capsys)
    assert code == 2 and err.count("\n") == 1 and "is not a folder" in err
    code, _, err = run(["prices", "show", "--source", "nope"], capsys)
    assert code == 2 and "known: skypilot-aws" in err
    code, _, err = run(["prices", "show", "--gpu", "Z9000"], capsys)
    assert code == 2 and "unknown GPU 'Z9000'" in err
    code, _, err = run(["prices", "show", "--max-age-days", "-1"], capsys)
    assert code == 2 and "--max-age-days" in err
    assert run(["prices"], capsys)[0] == 2
    assert main(["prices", "import", "not-a-kind", str(FLAT)]) == 2


def test_default_snapshots_show_without_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["prices", "show", "--json"], capsys)
    assert code == 0
    sources = {s["source"]: s for s in json.loads(out)["sources"]}
    assert {"skypilot-aws", "skypilot-gcp", "skypilot-runpod"} <= set(sources)
    assert all(s["date"] == "2026-11-30" for s in sources.values())


def test_rates_table_is_sourced_and_shown(capsys: pytest.CaptureFixture[str]) -> None:
    for provider in providers.all():
        assert provider.month_hours in (720.0, 730.0)
        rate = provider.rates
        assert rate is None or ("https://" in rate.source
                                and re.fullmatch(r"\d{4}-\d{2}", rate.as_of))
    runpod, aws = rates_for("runpod"), rates_for("aws")
    assert runpod and aws
    assert runpod.stopped_gb_month == 0.20  # RunPod bills stopped volumes double
    assert aws.stopped_gb_month == aws.storage_gb_month
    code, out, _ = run(["prices", "show", "--rates", "--json", "--source", "skypilot-aws",
                        "--source", "skypilot-nebius"], capsys)
    assert code == 0
    rates = {r["provider"]: r for r in json.loads(out)["rates"]}
    assert (rates["aws"]["storage_gb_month"], rates["aws"]["egress_usd_per_gb"]) == (0.08, 0.09)
    assert rates["nebius"]["storage_gb_month"] is None  # unknown stays unknown
