from __future__ import annotations

import datetime as dt
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import price_table
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpucost
from gpucost.cli import main
from gpucost.errors import InputError, NoOffersError, UnknownGpuError, UnknownProviderError
from gpucost.planning.ranking import Ranking, rank
from gpucost.planning.request import Filters, Job, Request, SortKey, make_filters
from gpucost.pricing.snapshot import Offers, Snapshot, write_snapshot
from gpucost.profile import Profile, resolve_profile

FETCHED = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def rank_of(
    profile: Profile,
    job: Job,
    snapshots: list[Snapshot],
    filters: Filters | None = None,
    *,
    sort: SortKey = "cost",
    now: dt.datetime = NOW,
) -> Ranking:
    return rank(Request(profile, job, tuple(snapshots), filters or Filters(), sort=sort, now=now))


def tiny_offers() -> Offers:
    return price_table.tiny_offers("v100", "a100", "rtx4090", "a100_x8",
                                   a100_x8={"network_gbps": 400})


@pytest.fixture
def snapshot() -> Snapshot:
    return Snapshot(source="tiny", fetched_at=FETCHED, offers=tiny_offers())


@pytest.fixture
def profile() -> Profile:
    return resolve_profile("resnet50-v100-amp")


def test_job_sizes(profile: Profile) -> None:
    assert Job.from_args(profile, epochs=2, dataset_size=1000).samples == 2000
    assert Job.from_args(profile, samples=5e6).samples == 5e6
    assert Job.from_args(profile, steps=10).samples == 10 * 256
    assert Job.from_args(profile).samples == 90 * 1_281_167  # the profile's default job
    with pytest.raises(InputError, match="one job size"):
        Job.from_args(profile, samples=10, steps=10)
    with pytest.raises(InputError, match="positive"):
        Job.from_args(profile, samples=-1)
    with pytest.raises(InputError, match="positive"):
        Job.from_args(profile, epochs=0, dataset_size=10)


def test_ranks_by_cost_and_by_time(snapshot: Snapshot, profile: Profile) -> None:
    job = Job.from_args(profile, samples=1e7)
    by_cost = rank_of(profile, job, [snapshot], now=NOW)
    cost = by_cost.plans.cost_usd
    assert np.all(np.diff(cost) >= 0)
    # one on-demand plan per offer plus one spot plan per offer with a spot price
    assert len(by_cost) == 4 + 2
    by_time = rank_of(profile, job, [snapshot], sort="time", now=NOW)
    assert np.all(np.diff(by_time.plans.hours) >= 0)
    assert by_time.plans.instance_type[0] == "p4d.24xlarge"  # 8 GPUs finish first


def test_hours_follow_throughput(snapshot: Snapshot, profile: Profile) -> None:
    job = Job.from_args(profile, samples=3.6e6)
    r = rank_of(profile, job, [snapshot], now=NOW)
    c = r.plans
    np.testing.assert_allclose(c.hours, job.samples / c.throughput / 3600.0)
    assert np.all(c.cost_usd >= c.nodes * c.price_hr * c.hours - 1e-9)


def test_same_gpu_offer_reproduces_the_measurement(snapshot: Snapshot, profile: Profile) -> None:
    r = rank_of(
        profile,
        Job.from_args(profile, samples=1e6),
        [snapshot],
        make_filters(gpu="V100", market="on-demand"),
        now=NOW,
    )
    assert r.plans.throughput[0] == pytest.approx(profile.throughput, rel=1e-6)


def test_filters(snapshot: Snapshot, profile: Profile) -> None:
    job = Job.from_args(profile, samples=1e6)
    spot = rank_of(profile, job, [snapshot], make_filters(market="spot"), now=NOW)
    assert set(spot.plans.market) == {"spot"}
    cheap = rank_of(profile, job, [snapshot], make_filters(max_price_hr=1.0), now=NOW)
    assert cheap.plans.price_hr.max() <= 1.0
    mem = rank_of(profile, job, [snapshot], make_filters(min_gpu_memory_gb=30), now=NOW)
    assert set(mem.plans.gpu) == {"A100 SXM4 40GB"}
    eight = rank_of(profile, job, [snapshot], make_filters(gpu_count=8), now=NOW)
    assert set(eight.plans.instance_type) == {"p4d.24xlarge"}
    eu = rank_of(profile, job, [snapshot], make_filters(region="eu"), now=NOW)
    assert set(eu.plans.region) == {"eu-west-1", "EU-RO-1"}
    nodes = rank_of(profile, job, [snapshot], make_filters(provider="aws", max_nodes=3), now=NOW)
    assert sorted(set(nodes.plans.nodes.tolist())) == [1, 2, 3]


def test_bad_filters_say_what_to_fix(snapshot: Snapshot, profile: Profile) -> None:
    job = Job.from_args(profile, samples=1e6)
    with pytest.raises(UnknownProviderError, match="known: aws, lambda, runpod"):
        rank_of(profile, job, [snapshot], make_filters(provider="azur"), now=NOW)
    with pytest.raises(UnknownGpuError, match="did you mean"):
        make_filters(gpu="A100 SXM9")
    with pytest.raises(NoOffersError, match="no offer matches"):
        rank_of(profile, job, [snapshot], make_filters(gpu="H100", provider="aws"), now=NOW)
    with pytest.raises(InputError, match="max nodes"):
        make_filters(max_nodes=0)


def test_stale_prices_are_flagged(profile: Profile) -> None:
    old = Snapshot(
        source="old", fetched_at=dt.datetime(2025, 1, 1, tzinfo=dt.UTC), offers=tiny_offers()
    )
    r = rank_of(profile, Job.from_args(profile, samples=1e6), [old], now=NOW)
    assert r.plans.stale.all()
    assert any("gpucost prices refresh" in n for n in r.notes)
    assert r.plans.price_date[0] == "2025-01-01"


def _costs_by_plan(r: Ranking) -> dict[tuple[str, str, int, str], float]:
    c = r.plans
    return {
        (p, i, int(n), m): float(cost)
        for p, i, n, m, cost in zip(
            c.provider, c.instance_type, c.nodes, c.market, c.cost_usd, strict=True
        )
    }


@settings(max_examples=40, deadline=None)
@given(speedup=st.floats(1.0, 50.0), samples=st.floats(1e3, 1e10))
def test_a_faster_throughput_never_raises_cost(speedup: float, samples: float) -> None:
    profile = resolve_profile("resnet50-v100-amp")
    faster = profile.with_changes(step_time_s=profile.step_time_s / speedup)
    snap = Snapshot(source="tiny", fetched_at=FETCHED, offers=tiny_offers())
    filters = Filters(max_nodes=2)
    base = rank_of(profile, Job.from_args(profile, samples=samples), [snap], filters, now=NOW)
    quick = rank_of(faster, Job.from_args(faster, samples=samples), [snap], filters, now=NOW)
    before, after = _costs_by_plan(base), _costs_by_plan(quick)
    assert before.keys() == after.keys()
    for k, cost in before.items():
        assert after[k] <= cost * (1 + 1e-9), k


def test_python_api_returns_a_dataframe(tmp_path: Path, snapshot: Snapshot) -> None:
    path = write_snapshot(snapshot, tmp_path)
    frame = gpucost.compare("resnet50-v100-amp", samples=1e6, prices=[path], limit=3)
    for column in (
        "provider",
        "region",
        "instance_type",
        "gpu",
        "gpu_count",
        "nodes",
        "price_hr",
        "hours",
        "cost_usd",
        "throughput",
        "price_date",
    ):
        assert column in frame.columns
    assert len(frame) == 3
    assert frame["cost_usd"].is_monotonic_increasing
    assert frame.attrs["profile"] == "resnet50-v100-amp"


def test_cli_json_is_versioned(
    tmp_path: Path, snapshot: Snapshot, capsys: pytest.CaptureFixture[str]
) -> None:
    write_snapshot(snapshot, tmp_path)
    assert main(["compare", "--prices", str(tmp_path), "--samples", "1e6", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gpucost-compare" and doc["schema_version"] == 1
    assert doc["plans_total"] == 6
    assert doc["price_sources"][0]["date"] == "2026-11-30"
    costs = [p["cost_usd"] for p in doc["plans"]]
    assert costs == sorted(costs)
    assert all(math.isfinite(c) for c in costs)


def test_cli_csv_and_table(
    tmp_path: Path, snapshot: Snapshot, capsys: pytest.CaptureFixture[str]
) -> None:
    write_snapshot(snapshot, tmp_path)
    assert main(["compare", "--prices", str(tmp_path), "--samples", "1e6", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("provider,region,zone,instance_type,gpu")
    assert len(lines) == 1 + 6
    assert main(["compare", "--prices", str(tmp_path), "--samples", "1e6", "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 of 6 plans shown" in out and "tiny dated 2026-11-30" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gpu", "Z9000"], "unknown GPU 'Z9000'"),
        (["--provider", "nope"], "unknown provider or source 'nope'"),
        (["--samples", "-3"], "argument --samples: must be above 0"),
        (["--profile", "missing.json"], "missing.json does not exist"),
        (["--gpu", "T4", "--max-price-hr", "0.0001"], "no offer matches"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    tmp_path: Path,
    snapshot: Snapshot,
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_snapshot(snapshot, tmp_path)
    assert main(["compare", "--prices", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_corrupt_snapshot_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x" / "2026-11-30.json"
    bad.parent.mkdir()
    bad.write_text('{"format": "gpucost-price-snapshot", "version": 1, "sour')
    assert main(["compare", "--prices", str(bad)]) == 2
    assert "corrupt" in capsys.readouterr().err


def test_default_compare_runs_without_heavy_imports() -> None:
    code = (
        "import sys; from gpucost.cli import main; rc = main(['compare', '-n', '3']); "
        "heavy = [m for m in ('torch', 'textual', 'boto3', 'pandas') if m in sys.modules]; "
        "print('HEAVY', heavy); raise SystemExit(rc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout
    assert "3 of" in out.stdout


def test_node_counts_up_to_4096_keep_their_own_throughput(profile: Profile) -> None:
    """Regression: the configuration key once packed GPUs per node and nodes into one integer
    with a radix of 4,096, so 1 GPU x 4,097 nodes got the throughput of 2 GPUs x 1 node.
    Configurations are now told apart column by column, up to the stated 4,096-node cap."""
    from gpucost.model.fabrics import resolve_fabrics
    from gpucost.model.perf import predict

    offers = Offers.from_records([
        {"provider": "aws", "region": "us-east-1", "instance_type": "one", "gpu": "A100 SXM4 80GB",
         "gpu_count": 1, "price_hr": 4.0, "network_gbps": 100.0, "intra_node_link": "nvlink"},
        {"provider": "aws", "region": "us-east-1", "instance_type": "two", "gpu": "A100 SXM4 80GB",
         "gpu_count": 2, "price_hr": 8.0, "network_gbps": 100.0, "intra_node_link": "nvlink"},
    ])
    snap = Snapshot(source="tiny", fetched_at=FETCHED, offers=offers)
    r = rank_of(profile, Job.from_args(profile, samples=1e9), [snap],
                make_filters(max_nodes=4096, market="on-demand"))
    p = r.plans
    one_big = (p.instance_type == "one") & (p.nodes == 4096)
    two_one = (p.instance_type == "two") & (p.nodes == 1)
    fabric = resolve_fabrics(np.array(["aws"]), np.array(["one"]), np.array([100.0]))
    net = {"inter_node_gbps": float(fabric.gbps[0]),
           "inter_node_transport": str(fabric.transport[0]), "intra_node_link": "nvlink"}
    big = predict(profile, gpu="A100 SXM4 80GB", gpus_per_node=1, nodes=4096, **net)
    pair = predict(profile, gpu="A100 SXM4 80GB", gpus_per_node=2, nodes=1, **net)
    assert p.throughput[one_big].tolist() == pytest.approx([big.throughput])
    assert p.throughput[two_one].tolist() == pytest.approx([pair.throughput])
    with pytest.raises(InputError, match="at most 4,096"):
        rank_of(profile, Job.from_args(profile, samples=1e9), [snap],
                make_filters(max_nodes=4097))
