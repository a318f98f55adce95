"""`gpucost prices refresh` and `gpucost prices diff` end to end, against a loopback replay server.

The done-when of issue 3: one command refreshes all seven sources from the replay server, and
the merged catalog is what `gpucost compare` reads.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_replay import ReplayServer, Reply, install_all
from goldens import assert_golden

from gpucost.cli import main
from gpucost.pricing.diff import diff_offers, format_diff
from gpucost.pricing.refresh import refresh
from gpucost.pricing.snapshot import Offers, Snapshot, load_offers, load_snapshots, write_snapshot
from gpucost.pricing.sources.registry import sources

ALL = ["aws", "azure", "gcp", "lambda", "runpod", "skypilot-hosted", "vast"]
CREDENTIAL_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                   "AWS_PROFILE", "GOOGLE_API_KEY", "VAST_API_KEY", "RUNPOD_API_KEY",
                   "LAMBDA_API_KEY")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No credentials or URL overrides from the machine running the tests; no IMDS lookups."""
    for var in CREDENTIAL_VARS:
        monkeypatch.delenv(var, raising=False)
    for source in sources().values():
        monkeypatch.delenv(source.url_env_var, raising=False)
    monkeypatch.delenv("GPUCOST_AWS_EC2_URL", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr("gpucost.http.default_sleep", lambda _: None)
    return monkeypatch


@pytest.fixture
def replay(clean_env: pytest.MonkeyPatch) -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        for key, value in install_all(server).items():
            clean_env.setenv(key, value)
        yield server


def snapshot_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_refresh_all_seven_sources_then_compare_reads_them(
        replay: ReplayServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prices"
    assert main(["prices", "refresh", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert printed.count(": updated: ") == 7, printed
    assert sorted(p.name for p in out.iterdir()) == ALL
    offers = load_offers([out])
    assert sorted(set(offers["source"].tolist())) == ALL
    assert set(offers["provider"].tolist()) >= {"aws", "azure", "gcp", "lambda", "runpod", "vast"}
    assert len(offers) > 50
    # the secrets went out as each provider expects and were never printed
    sent = {r.path: r for r in replay.requests}
    assert sent["/api/v1/instance-types"].headers["authorization"] == "Bearer lambda-test-key-000"
    assert sent["/v1/services/6F81-5844-456A/skus"].query["key"] == ["gcp-test-key-123"]
    assert "test-key" not in printed

    assert main(["compare", "--prices", str(out), "--format", "json", "--limit", "5"]) == 0
    ranked = json.loads(capsys.readouterr().out)
    assert ranked, "compare found no plan in the refreshed catalog"


def test_a_failing_refresh_leaves_every_previous_snapshot_intact(
        replay: ReplayServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prices"
    assert main(["prices", "refresh", "--out", str(out), "--quiet"]) == 0
    before = snapshot_bytes(out)
    # Now every API misbehaves: 5xx storms, garbage, missing files, a GraphQL error.
    replay.routes.clear()
    replay.add("GET", "/api/retail/prices", Reply(503, b"down"))
    replay.add("POST", "/api/v0/bundles/", Reply(200, b'{"offers": [{"id": 1, "num_g'))
    replay.add("POST", "/graphql", Reply(200, b'{"errors": [{"message": "internal"}]}'))
    replay.add("GET", "/api/v1/instance-types", Reply(429, b"", {"Retry-After": "1"}))
    capsys.readouterr()
    assert main(["prices", "refresh", "--out", str(out), "--quiet"]) == 3
    report = capsys.readouterr().out
    assert report.count(": failed: ") == 7, report
    assert "azure: failed: azure: GET" in report and "(HTTP 503: " in report
    assert "runpod: failed: runpod: GraphQL error: internal" in report
    assert "kept " in report
    assert snapshot_bytes(out) == before  # byte for byte, and no stray temporary files


def test_missing_credentials_skip_with_how_to_set_them(
        replay: ReplayServer, clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("VAST_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        clean_env.delenv(var)
    console_text = io.StringIO()
    from rich.console import Console

    results = refresh(["vast", "aws", "azure"], out_dir=tmp_path / "p",
                      console=Console(file=console_text, width=120))
    by_name = {r.source: r for r in results}
    assert [r.source for r in results] == ["vast", "aws", "azure"]
    assert by_name["vast"].status == "skipped" and "VAST_API_KEY" in by_name["vast"].message
    assert by_name["aws"].status == "skipped" and "aws configure" in by_name["aws"].message
    assert by_name["azure"].status == "updated" and by_name["azure"].offers == 3
    shown = console_text.getvalue()
    assert "vast" in shown and "skipped" in shown and "updated 3 offers" in shown
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["azure"]


def test_refresh_exit_codes(clean_env: pytest.MonkeyPatch, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prices", "refresh", "--source", "vast", "--out", str(tmp_path), "--quiet"]) == 2
    assert "VAST_API_KEY" in capsys.readouterr().out
    assert main(["prices", "refresh", "--source", "nosuch"]) == 2
    assert "unknown provider or source 'nosuch'" in capsys.readouterr().err
    assert main(["prices", "refresh", "--list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in ALL) and "GPUCOST_SKYPILOT_HOSTED_URL" in listing


def _offers(prices: dict[str, tuple[float, float | None]]) -> Offers:
    return Offers.from_records([
        {"provider": "aws", "region": "us-east-1", "instance_type": name, "gpu": "A10G",
         "gpu_count": 1.0, "price_hr": od, "spot_price_hr": spot, "source": "aws"}
        for name, (od, spot) in prices.items()])


def test_diff_reports_added_removed_and_changed_beyond_threshold() -> None:
    old = _offers({"a": (1.0, 0.5), "b": (2.0, None), "c": (3.0, 1.0), "gone": (4.0, None)})
    new = _offers({"a": (1.04, 0.5), "b": (2.0, 0.9), "c": (3.3, 1.0), "new": (5.0, 2.0)})
    diff = diff_offers(old, new, threshold_pct=5)
    assert [r["instance_type"] for r in diff.added] == ["new"]
    assert [r["instance_type"] for r in diff.removed] == ["gone"]
    assert {c.key[4]: round(c.price_change_pct, 6) for c in diff.changed} == {"b": 0.0,
                                                                                "c": 10.0}
    assert diff.unchanged == 1  # "a" moved 4% < 5%
    assert diff_offers(old, new, threshold_pct=3).unchanged == 0


def test_prices_diff_cli_matches_golden(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    day1 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    old = Snapshot("aws", day1, _offers({"g5.xlarge": (1.006, 0.45), "g5.2xlarge": (1.212, None),
                                         "p4d.24xlarge": (32.7726, 9.8)}))
    new = Snapshot("aws", day1 + dt.timedelta(days=1),
                   _offers({"g5.xlarge": (1.006, 0.61), "g5.2xlarge": (1.1, 0.5),
                            "p5.48xlarge": (55.04, 20.6)}))
    old_path = write_snapshot(old, tmp_path / "old")
    new_path = write_snapshot(new, tmp_path / "new")
    assert main(["prices", "diff", str(old_path), str(new_path)]) == 0
    text = capsys.readouterr().out
    assert_golden("prices_diff.txt", text)
    assert main(["prices", "diff", str(tmp_path / "old"), str(tmp_path / "new"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [c["key"][4] for c in payload["changed"]] == ["g5.2xlarge", "g5.xlarge"]
    assert main(["prices", "diff", str(old_path), str(tmp_path / "missing.json")]) == 2


def test_diff_text_lists_everything_with_limit() -> None:
    old = _offers({f"t{i}": (1.0, None) for i in range(5)})
    diff = diff_offers(old, _offers({}), threshold_pct=5)
    lines = format_diff(diff, limit=2)
    assert lines[0].startswith("0 added, 5 removed")
    assert lines[-1] == "... 3 more (use --limit 0 to show all)"


def test_snapshots_written_by_refresh_carry_provenance(replay: ReplayServer,
                                                       tmp_path: Path) -> None:
    refresh(["gcp", "runpod"], out_dir=tmp_path)
    snaps = {s.source: s for s in load_snapshots([tmp_path])}
    assert snaps["gcp"].provenance["pages"] == 2
    assert snaps["gcp"].month_hours == 730 and snaps["runpod"].month_hours == 720
    assert "per-GPU price x gpu_count" in snaps["runpod"].provenance["units"]


def test_refresh_writes_the_user_snapshot_folder_that_compare_reads_by_default(
        replay: ReplayServer, capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.paths import user_snapshots_dir

    assert main(["prices", "refresh", "--source", "lambda", "--quiet"]) == 0
    assert [p.parent.name for p in user_snapshots_dir().glob("*/*.json")] == ["lambda"]
    assert "lambda" in {s.source for s in load_snapshots()}
    capsys.readouterr()
    assert main(["compare", "--provider", "lambda", "--format", "json", "--limit", "500"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert "lambda" in {s["source"] for s in answer["price_sources"]}  # beside the embedded ones
    assert "lambda" in {p["source"] for p in answer["plans"]}


def test_sources_are_fetched_concurrently(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import threading

    from api_replay import file_reply

    # Each answer waits until both sources have asked: a sequential refresh would deadlock
    # here and fail both sources after the barrier's timeout.
    barrier = threading.Barrier(2, timeout=30)

    def together(_: object) -> bool:
        barrier.wait()
        return True

    with ReplayServer() as server:
        server.add("GET", "/api/v1/instance-types", file_reply("lambda_instance_types.json"),
                   when=together)
        server.add("GET", "/api/retail/prices", file_reply("azure_page2.json"), when=together)
        clean_env.setenv("GPUCOST_LAMBDA_URL", server.url)
        clean_env.setenv("GPUCOST_AZURE_URL", server.url)
        clean_env.setenv("LAMBDA_API_KEY", "k")
        results = refresh(["lambda", "azure"], out_dir=tmp_path)
    assert [r.status for r in results] == ["updated", "updated"], results


def test_aws_without_boto3_is_skipped_with_the_extra_to_install(
        replay: ReplayServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "boto3" else real(name, *a))
    (result,) = refresh(["aws"], out_dir=tmp_path)
    assert result.status == "skipped" and 'pip install "gpucost[aws]"' in result.message


def test_diff_keeps_one_machine_type_with_different_gpus_apart() -> None:
    def n1(gpu: str, price: float) -> dict[str, object]:
        return {"provider": "gcp", "region": "us-central1", "instance_type": "n1-standard-8",
                "gpu": gpu, "gpu_count": 1.0, "price_hr": price, "source": "gcp"}

    old = Offers.from_records([n1("T4", 0.73), n1("V100 SXM2 16GB", 2.86)])
    new = Offers.from_records([n1("T4", 0.73), n1("V100 SXM2 16GB", 3.10)])
    diff = diff_offers(old, new, threshold_pct=5)
    assert [c.gpu for c in diff.changed] == ["V100 SXM2 16GB"] and diff.unchanged == 1
