"""Every door into the planning core gives the same answer: `compare --format json`,
gpucost.compare(), `plan`, gpucost.plan(), `scale` and the TUI session, for one request; and no
plan any of them shows needs more memory than its GPU has."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from price_table import tiny_offers, write_prices

import gpucost
from gpucost.catalog import get_gpu
from gpucost.cli import main
from gpucost.limits import node_limit
from gpucost.model.memory import usable_gb
from gpucost.planning.advice import advise
from gpucost.planning.request import build_request
from gpucost.pricing.snapshot import Offers, load_snapshots
from gpucost.profile import Profile, resolve_profile
from gpucost.tui.session import JobInputs, rank_view

FETCHED = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
SAMPLES = 2e7
PROFILE = "resnet50-v100-amp"


def _offers() -> Offers:
    """Prices far apart: no two plans are near-ties (the advisor breaks those by time)."""
    return tiny_offers("v100", "a100", "a100_x8", "rtx3080", v100={"spot_price_hr": None},
                       every={"storage_gb_month": 0.1, "egress_gb": 0.0, "network_gbps": 25.0,
                              "intra_node_link": "nvlink"})


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    return write_prices(tmp_path / "prices", _offers())


def _key(provider: str, instance_type: str, nodes: int, market: str) -> tuple[str, str, int, str]:
    return (provider, instance_type, int(nodes), market)


def test_every_door_gives_the_same_top_plans_hours_and_cost(
    prices: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--profile", PROFILE, "--samples", f"{SAMPLES:g}", "--prices", str(prices),
              "--max-nodes", "2"]
    # compare, on-demand only (plan's default market)
    assert main(["compare", *common, "--on-demand", "-n", "0", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    plans = doc["plans"]
    cli = [(_key(p["provider"], p["instance_type"], p["nodes"], p["market"]),
            p["total_hours"], p["cost_usd"]) for p in plans]
    # the 10 GB RTX 3080 runs batch 256 as micro-batches: re-planned, not ranked as if it fit
    rtx = next(p for p in plans if p["gpu"] == "RTX 3080")
    assert rtx["grad_accum_steps"] > 1 and rtx["peak_gb"] <= usable_gb(get_gpu("RTX 3080"))

    # gpucost.compare(): the same rows, in the same order
    frame = gpucost.compare(PROFILE, samples=SAMPLES, prices=[prices], market="on-demand",
                            max_nodes=2)
    api = [(_key(r.provider, r.instance_type, r.nodes, r.market), r.total_hours, r.cost_usd)
           for r in frame.itertuples()]
    assert [k for k, _, _ in api] == [k for k, _, _ in cli]
    for (_, h1, c1), (_, h2, c2) in zip(api, cli, strict=True):
        assert h1 == pytest.approx(h2, rel=1e-9) and c1 == pytest.approx(c2, rel=1e-9)

    # plan (CLI and API): the cheapest pick is compare's first row, the fastest its fastest
    assert main(["plan", *common, "--format", "json"]) == 0
    advice_doc = json.loads(capsys.readouterr().out)
    estimate = advice_doc["plan"]["estimate"]
    offer = advice_doc["plan"]["offer"]
    top_key, top_hours, top_cost = cli[0]
    assert _key(offer["provider"], offer["instance_type"], offer["nodes"],
                offer["market"]) == top_key
    assert estimate["cost_usd"] == pytest.approx(top_cost, abs=1e-4)
    assert estimate["hours"] == pytest.approx(top_hours, abs=1e-6)
    advice = gpucost.plan(PROFILE, samples=SAMPLES, prices=[prices], market="on-demand",
                          max_nodes=2)
    assert advice.cheapest is not None and advice.fastest is not None
    row = advice.cheapest.row
    assert _key(row.provider, row.instance_type, row.nodes, row.market) == top_key
    assert row.cost_usd == pytest.approx(top_cost, rel=1e-9)
    fastest = min(cli, key=lambda r: r[1])
    assert advice.fastest.row.total_hours == pytest.approx(fastest[1], rel=0.011)

    # the TUI session, same job and market
    view = rank_view(resolve_profile(PROFILE), load_snapshots([prices]),
                     JobInputs(samples=SAMPLES, spot=False, max_nodes=2))
    tui = [(_key(r.provider, r.instance_type, r.nodes, r.market), r.total_hours, r.cost_usd)
           for r in view.plans.rows()]
    assert [k for k, _, _ in tui] == [k for k, _, _ in cli]
    assert [c for _, _, c in tui] == pytest.approx([c for _, _, c in cli], rel=1e-9)

    # scale: the cheapest offer that runs groups of nodes at 1 and 2 nodes, setup included as in
    # compare (the top plan's RunPod offer runs one node: its curve is that one point)
    top_row = next(p for p in plans if node_limit(p["provider"]) > 1)
    top_key = _key(top_row["provider"], top_row["instance_type"], 1, top_row["market"])
    assert main(["scale", "--profile", PROFILE, "--gpu", top_row["gpu"], "-k",
                 f"{top_row['gpu_count']:g}", "--max-nodes", "2", "--samples", f"{SAMPLES:g}",
                 "--prices", str(prices), "--format", "json"]) == 0
    curve = json.loads(capsys.readouterr().out)
    by_nodes = {k[2]: (h, c) for k, h, c in cli if k[:2] == top_key[:2]}
    assert [p["nodes"] for p in curve["points"]] == [1, 2]
    for point in curve["points"]:
        hours, cost = by_nodes[point["nodes"]]
        assert point["job_hours"] == pytest.approx(hours, rel=1e-9)
        assert point["job_usd"] == pytest.approx(cost, rel=1e-9)
        assert point["setup_hours"] > 0


def test_plans_that_fit_no_way_are_left_out_and_shown_on_request(
    prices: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 2e9 parameters: 32 GB of Adam states; one GPU of 40 GB holds them, a 16 or 10 GB one
    # cannot even at micro-batch 1, and a one-GPU node cannot shard them
    big = resolve_profile(PROFILE).with_changes(param_count=2e9, name="big")
    path = big.save(tmp_path / "big.json")
    argv = ["compare", "--profile", str(path), "--samples", "1e6", "--prices", str(prices),
            "--on-demand", "--format", "json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {p["gpu"] for p in doc["plans"]} == {"A100 SXM4 40GB"}
    assert doc["unfit_total"] == 2 and "unfit_plans" not in doc
    assert any("left out" in n and "--show-unfit" in n for n in doc["notes"])
    assert main([*argv, "--show-unfit"]) == 0
    shown = json.loads(capsys.readouterr().out)["unfit_plans"]
    assert {p["gpu"] for p in shown} == {"V100 SXM2 16GB", "RTX 3080"}
    assert all("even at micro-batch 1" in p["memory_note"] for p in shown)


@pytest.mark.slow  # 30 s on 2 cores; test_memory_fit checks the memory model the doors use
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    params=st.floats(1e6, 2e10),
    batch=st.integers(1, 1024),
    flops_per_param=st.floats(0.5, 5e4),
    measured=st.booleans(),
    peak_fraction=st.floats(0.05, 0.95),
    max_nodes=st.sampled_from([1, 2, 8]),
)
def test_no_plan_needs_more_memory_than_its_gpu_has(
    params: float, batch: int, flops_per_param: float, measured: bool, peak_fraction: float,
    max_nodes: int,
) -> None:
    """Random workloads on the embedded catalog: every ranked plan, both picks of the advice
    and every row the TUI shows has a predicted peak within its GPU's usable memory."""
    base = resolve_profile(PROFILE)
    peak = peak_fraction * usable_gb(get_gpu(base.gpu)) if measured else None
    states_gb = params * 16 / 1e9
    profile = Profile(gpu=base.gpu, precision=base.precision, batch_size=batch,
                      step_time_s=base.step_time_s, param_count=params,
                      flops_per_sample=flops_per_param * params * 6,
                      peak_memory_gb=peak if peak is None or peak > states_gb else None,
                      name="random")
    snapshots = load_snapshots()
    request = build_request(profile, samples=1e6, max_nodes=max_nodes, snapshots=snapshots)
    advice = advise(request)
    plans = advice.ranking.plans
    rows = [plans.row(i) for i in range(len(plans))]
    rows += [c.row for c in (advice.cheapest, advice.fastest) if c is not None]
    view = rank_view(profile, snapshots, JobInputs(samples=1e6, max_nodes=max_nodes))
    rows += view.plans.rows()
    for row in rows:
        assert not math.isnan(row.peak_gb), row.label()
        assert row.peak_gb <= usable_gb(get_gpu(row.gpu)) + 1e-9, (row.label(), row.memory_note)
        assert row.micro_batch * row.grad_accum_steps >= batch
    assert len(advice.ranking.unfit) + len(plans) > 0
    assert np.all(np.isnan(advice.ranking.unfit.peak_gb))


def test_include_local_composes_with_every_filter(
    prices: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Your own machine stays in the ranking whatever GPU, provider, region or count is asked
    for (it vanished with --gpu or --provider)."""
    local = ["--include-local", "--local-gpu", "RTX 4090", "--local-power-w", "450"]
    for filters in (["--gpu", "A100 SXM4 40GB"], ["--provider", "aws"], ["--region", "eu"],
                    ["--gpu-count", "8"], ["--provider", "aws", "--gpu", "V100"]):
        assert main(["compare", "--profile", PROFILE, "--samples", "1e6", "--prices",
                     str(prices), "-n", "0", "--format", "json", *local, *filters]) == 0
        providers = {p["provider"] for p in json.loads(capsys.readouterr().out)["plans"]}
        assert "local" in providers, filters
        assert len(providers) >= 2, filters


def test_predict_takes_a_mixed_node_and_refuses_a_silent_last_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpucost.model.perf import predict

    profile = resolve_profile(PROFILE)
    assert main(["predict", "--gpu", "A100 SXM4 80GB", "--gpu", "T4", "-n", "2",
                 "--format", "json"]) == 0
    mixed = json.loads(capsys.readouterr().out)
    expected = predict(profile, gpus_per_node=2, nodes=2, inter_node_transport="tcp",
                       member_gpus=["A100 SXM4 80GB", "T4"] * 2)  # no offer: TCP, as predict
    assert mixed["member_gpus"] == ["A100 SXM4 80GB", "T4"]
    assert mixed["throughput"] == pytest.approx(expected.throughput)
    # straggler-bound: slower than four A100s, no faster than four T4s' pace allows
    fast = predict(profile, gpu="A100 SXM4 80GB", gpus_per_node=2, nodes=2,
                   inter_node_transport="tcp")
    slow = predict(profile, gpu="T4", gpus_per_node=2, nodes=2, inter_node_transport="tcp")
    assert slow.throughput <= mixed["throughput"] < fast.throughput
    assert main(["predict", "--gpu", "A100 SXM4 80GB", "--gpu", "T4", "-k", "4"]) == 2
    assert "2 --gpu options name a node of 2 GPUs" in capsys.readouterr().err
    # scale prices a mixed node only from --price-hr: an offer has one GPU type
    assert main(["scale", "--gpu", "A100 SXM4 80GB", "--gpu", "T4"]) == 2
    err = capsys.readouterr().err
    assert "mixed node" in err and "--price-hr" in err and err.count("\n") <= 2


def test_scale_prices_a_mixed_node_at_the_slowest_members_pace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`scale --gpu A --gpu B --price-hr P`: the curve is the planning core's, each node count
    paced by predict's straggler-bound mixed group, the batch fitted to the smallest member."""
    from gpucost.model.perf import predict

    profile = resolve_profile("bert-large-a100-fp16")
    node = ["A100 SXM4 80GB", "T4"]
    assert main(["scale", "--profile", profile.name, "--gpu", node[0], "--gpu", node[1],
                 "--price-hr", "3", "--max-nodes", "3", "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["member_gpus"] == node and body["gpus_per_node"] == 2
    assert body["gpu"] == "T4" and body["price_source"] == "--price-hr"
    for point in body["points"]:
        n = point["nodes"]
        # a bare offer's fabric, as the point says: TCP at the default 50 Gbit/s
        assert n == 1 or point["inter_node_fabric"].startswith("unknown 50 Gbit/s (tcp)")
        alone = predict(profile, gpus_per_node=2, nodes=n, member_gpus=node * n,
                        inter_node_gbps=50, inter_node_transport="tcp")
        fast = predict(profile, gpu=node[0], gpus_per_node=2, nodes=n)
        assert point["throughput"] == pytest.approx(alone.throughput, rel=1e-6)
        assert point["throughput"] < fast.throughput
        # the 16 GB T4 sets the memory rule (an 80 GB A100 holds bert-large's batch whole)
        assert point["memory_note"] and point["peak_gb"] < 16
    assert main(["scale", "--profile", profile.name, "--gpu", node[0], "--gpu", node[1],
                 "--price-hr", "3", "--max-nodes", "3"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"{profile.name} on A100 SXM4 80GB + T4 per node")


def test_every_plan_compare_ranks_is_one_its_engine_can_launch(
    prices: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """SkyPilot launches no multi-node cluster on RunPod (or Vast, Shadeform, Verda): compare
    plans groups of nodes on the clouds where it can and one node there (it planned RunPod groups
    of up to 16 that `gpucost launch` then refused)."""
    assert main(["compare", "--profile", PROFILE, "--samples", "1e6", "--prices", str(prices),
                 "--max-nodes", "8", "-n", "0", "--format", "json"]) == 0
    nodes: dict[str, set[int]] = {}
    for p in json.loads(capsys.readouterr().out)["plans"]:
        nodes.setdefault(p["provider"], set()).add(p["nodes"])
    assert nodes["runpod"] == {1}
    assert max(nodes["aws"]) == 8 and max(nodes["lambda"]) == 8
    # A plan file from before (or edited by hand) is refused by launch, in one line.
    path = tmp_path / "plan.toml"
    assert main(["plan", "--profile", PROFILE, "--samples", "1e6", "--prices", str(prices),
                 "--provider", "runpod", "--command", "python train.py", "-o", str(path)]) == 0
    assert main(["scale", "--profile", PROFILE, "--gpu", "RTX 3080", "--max-nodes", "4",
                 "--samples", "1e6", "--prices", str(prices)]) == 0
    out = capsys.readouterr().out
    assert "one node only: gpucost launches no group of nodes on runpod" in out
    path.write_text(path.read_text().replace("nodes = 1", "nodes = 2"))
    capsys.readouterr()
    assert main(["launch", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "SkyPilot launches no multi-node cluster on runpod" in err
    assert len(err.strip().splitlines()) == 1
