"""One plan, one answer (#21): what `gpucost plan` writes, `gpucost preflight`, `gpucost explain`
and the executor read the same way: the memory plan the planner re-planned the batch to, the
spot run's restart rule, and the budget cap the user gave."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from run_helpers import write_plan

from gpucost.cli import main
from gpucost.model.economics import spot_run
from gpucost.planfile import BUDGET_WARN_SHARE, load_plan

TODAY = "2026-11-30"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # plans and reports land here; no train.py to check


def _plan(capsys: pytest.CaptureFixture[str], out: Path, *args: str) -> str:
    assert main(["plan", *args, "-o", str(out)]) == 0
    return capsys.readouterr().out


def _preflight(capsys: pytest.CaptureFixture[str], plan: Path) -> tuple[int, dict[str, Any]]:
    code = main(["preflight", str(plan), "--today", TODAY, "--format", "json"])
    return code, {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}


# -- the memory plan ---------------------------------------------------------------------------


def test_preflight_checks_the_micro_batch_the_plan_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # BERT-large's batch 112 does not fit a 16 GB T4: plan re-plans it to micro-batch 38 x 3,
    # and preflight must check that, not the batch as profiled (it said "use micro-batch 38 x
    # 3" of a plan that held it, and exited 1).
    out = tmp_path / "t4.toml"
    _plan(capsys, out, "-p", "bert-large-a100-fp16", "--gpu", "T4", "--provider", "aws")
    workload = load_plan(out).workload
    assert workload.micro_batch is not None and workload.micro_batch < workload.batch_size
    assert workload.grad_accum_steps > 1
    code, checks = _preflight(capsys, out)
    assert checks["memory-fit"]["status"] == "pass", checks["memory-fit"]
    assert checks["memory-fit"]["details"]["peak_gb"] <= checks["memory-fit"]["details"][
        "usable_gb"]
    assert code == 0


def test_a_fractional_gpu_plan_is_checked_against_its_slice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # AWS g6f.large: an eighth of an L4, 3 GB. plan splits ResNet-50's batch 256 to fit it and
    # preflight passes that; the batch whole needs 11.6 GB, which the slice does not hold
    # (preflight checked the whole L4's 24 GB and passed it).
    import datetime as dt

    from gpucost.pricing.snapshot import Offers, Snapshot, write_snapshot

    rows = [{"provider": "aws", "region": "us-east-1", "instance_type": "g6f.large",
             "gpu": "L4", "gpu_count": 0.125, "gpu_memory_gb": 3.0, "price_hr": 0.12,
             "storage_gb_month": 0.1, "egress_gb": 0.09}]
    prices = write_snapshot(Snapshot(source="slices", offers=Offers.from_records(rows),
                                     fetched_at=dt.datetime(2026, 11, 29, tzinfo=dt.UTC)),
                            tmp_path / "prices")
    out = tmp_path / "g6f.toml"
    _plan(capsys, out, "-p", "resnet50-v100-amp", "--prices", str(prices))
    workload = load_plan(out).workload
    assert workload.micro_batch is not None and workload.micro_batch < 256
    code, checks = _preflight(capsys, out)
    assert code == 0 and checks["memory-fit"]["status"] == "pass", checks["memory-fit"]
    assert checks["memory-fit"]["details"]["usable_gb"] < 3.0
    whole = out.read_text().replace(f"micro_batch = {workload.micro_batch}\n",
                                    "micro_batch = 256\n").replace(
        f"grad_accum_steps = {workload.grad_accum_steps}\n", "grad_accum_steps = 1\n")
    out.write_text(whole)
    code, checks = _preflight(capsys, out)
    assert code == 1 and checks["memory-fit"]["status"] == "fail", checks["memory-fit"]

def test_a_plan_sharded_by_the_planner_passes_and_unsharded_it_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 2.5 B parameters: 40 GB of Adam states, on 24 GB L4s only sharded (ZeRO-2/FSDP).
    from dataclasses import replace

    from gpucost.profile import resolve_profile

    big = replace(resolve_profile("bert-large-a100-fp16"), name="big", param_count=2.5e9,
                  param_bytes=None, grad_bytes=None, batch_size=1)
    big.save(tmp_path / "big.json")
    out = tmp_path / "sharded.toml"
    _plan(capsys, out, "-p", str(tmp_path / "big.json"), "--samples", "1e5", "--gpu", "L4",
          "--provider", "gcp")
    plan = load_plan(out)
    assert plan.workload.sharding in ("ZeRO-2", "FSDP"), plan.workload
    _, checks = _preflight(capsys, out)
    assert checks["memory-fit"]["status"] == "pass", checks["memory-fit"]
    # the same plan with its sharding taken away needs every state on every GPU
    text = out.read_text().replace(f'sharding = "{plan.workload.sharding}"', 'sharding = ""')
    (tmp_path / "unsharded.toml").write_text(text)
    _, checks = _preflight(capsys, tmp_path / "unsharded.toml")
    assert checks["memory-fit"]["status"] == "fail"
    assert "sharding = " in checks["memory-fit"]["fix"]  # the planner's own re-plan


# -- spot without an object store --------------------------------------------------------------

SPOT = ("--provider", "gcp", "--gpu", "L4", "--spot", "--checkpoint-gb", "0.2", "--data-gb",
        "150", "--budget", "30")


def test_a_spot_plan_without_an_object_store_is_priced_as_restarting_from_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.toml"
    text = _plan(capsys, out, *SPOT)
    plan = load_plan(out)
    assert plan.offer.market == "spot"
    # no checkpoints that a reclaimed instance would take along, and no interval priced
    assert not plan.checkpoint.enabled and plan.checkpoint.interval_minutes is None
    assert plan.estimate.checkpoint_usd == 0.0
    # the rework is what restarts from zero cost: an interruption at f of the work loses f
    hourly = plan.offer.price_hr * plan.offer.nodes
    restart = spot_run(plan.estimate.compute_usd / hourly,
                       plan.spot.interruption_rate_per_hr * plan.offer.nodes,
                       restart_hours=plan.estimate.setup_usd / hourly, checkpoints=False)
    assert plan.estimate.spot_rework_usd >= 0.99 * float(restart.rework_hours) * hourly
    assert [line for line in text.splitlines() if "restart-from-zero" in line]
    assert any("restart-from-zero" in n for n in plan.assumptions.notes)
    code, checks = _preflight(capsys, out)
    assert checks["spot-checkpoint"]["status"] == "fail"
    assert checks["spot-checkpoint"]["severity"] == "warning"  # priced so: said, not failed
    assert "s3://" in checks["spot-checkpoint"]["fix"]
    assert code == 0


def test_a_spot_plan_with_an_object_store_resumes_and_passes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s3.toml"
    _plan(capsys, out, *SPOT, "--checkpoint-target", "s3://bucket/run")
    plan = load_plan(out)
    assert plan.checkpoint.enabled and plan.checkpoint.resume
    assert plan.checkpoint.interval_minutes is not None  # Young/Daly, priced as resuming
    code, checks = _preflight(capsys, out)
    assert checks["spot-checkpoint"]["status"] == "pass"
    assert code == 0
    # cheaper than restarting from zero: the resume is worth something
    _plan(capsys, tmp_path / "local.toml", *SPOT)
    assert plan.estimate.spot_rework_usd < load_plan(tmp_path / "local.toml").estimate.\
        spot_rework_usd


def test_preflight_fails_a_spot_plan_priced_as_resuming_from_a_local_disk(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an older plan (or a hand edit): local checkpoints, but the estimate assumes a resume
    out = tmp_path / "s3.toml"
    _plan(capsys, out, *SPOT, "--checkpoint-target", "s3://bucket/run")
    (tmp_path / "old.toml").write_text(
        out.read_text().replace('target = "s3://bucket/run"', 'target = "local:checkpoints"'))
    code, checks = _preflight(capsys, tmp_path / "old.toml")
    assert checks["spot-checkpoint"]["status"] == "fail"
    assert checks["spot-checkpoint"]["severity"] == "error" and code == 1
    assert "restarts from zero cost" in checks["spot-checkpoint"]["message"]


# -- the budget cap ----------------------------------------------------------------------------


def test_the_users_budget_is_the_runs_cap_and_plan_and_explain_say_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.toml"
    text = _plan(capsys, out, "--epochs", "10", "--deadline-hours", "24", "--budget", "300",
                 "--spot", "--max-nodes", "4")
    plan = load_plan(out)
    assert plan.safety.budget_cap_usd == 300.0  # was 1.25x the estimate
    assert "budget cap $300.00 (your budget), warned at 80 % ($240.00)" in text
    assert main(["explain", str(out)]) == 0
    assert "budget cap $300.00 (your budget)" in capsys.readouterr().out
    # without a budget: the estimate x the margin, and said so
    _plan(capsys, tmp_path / "free.toml", "--epochs", "10")
    free = load_plan(tmp_path / "free.toml")
    assert free.job.budget_usd is None
    assert free.safety.budget_cap_usd == pytest.approx(
        max(free.estimate.cost_usd * 1.25, free.safety.budget_cap_usd), abs=0.01)
    assert main(["explain", str(tmp_path / "free.toml")]) == 0
    assert "x the expected" in capsys.readouterr().out


@pytest.mark.slow
def test_the_run_warns_at_80_percent_of_the_cap_before_the_cap_ends_it(tmp_path: Path) -> None:
    from gpucost.executor.rundir import RunDir
    from gpucost.executor.runner import Runner

    # 3600 USD/h is 1 USD/s: the warning at 1.6 USD comes a second or so before the 2 USD cap
    path = write_plan(tmp_path, price_hr=3600.0, budget=2.0, est_cost=1.0,
                      command=[sys.executable, "-c", "import time; time.sleep(120)"])
    runner = Runner(load_plan(path), path, poll_s=0.1)
    result = runner.launch()
    assert result.state == "budget-exceeded"
    warned = [i for i, m in enumerate(result.messages) if m.startswith("budget warning")]
    capped = [i for i, m in enumerate(result.messages) if m.startswith("budget cap")]
    assert len(warned) == 1 and capped and warned[0] < capped[0], result.messages
    rd = RunDir.for_run(result.run_id)
    status = json.loads(rd.status_path.read_text())
    assert status["budget_warning"].startswith("budget warning")
    assert f"of the {2.0:.2f} USD cap" in status["budget_warning"]
    assert "budget warning" in rd.log_path.with_name("launcher.log").read_text()


def test_budget_warning_comes_at_the_share_and_not_before() -> None:
    from gpucost.executor.watchdog import budget_warning

    share = BUDGET_WARN_SHARE * 100.0
    assert budget_warning(share - 0.1, 100.0) is None
    said = budget_warning(share, 100.0)
    assert said is not None and f"{share:.0f} % of the 100.00 USD cap" in said


# -- the grid: every plan `plan` writes passes preflight, or fails it for a reason it states ---


def _grid_snapshot(tmp_path: Path) -> Path:
    """Three providers, three GPUs (a T4 too small for BERT's batch), spot at 0.3x on-demand."""
    import datetime as dt

    from gpucost.pricing.snapshot import Offers, Snapshot, write_snapshot

    rows = []
    for provider, region, scale in (("aws", "us-east-1", 1.0), ("gcp", "us-central1", 0.9),
                                    ("azure", "eastus", 1.1)):
        for gpu, mem, count, price in (("T4", 16, 1, 0.53), ("A10G", 24, 1, 1.0),
                                       ("L4", 24, 4, 2.4)):
            rows.append({
                "provider": provider, "region": region,
                "instance_type": f"{gpu.lower()}-{count}x-{provider}", "gpu": gpu,
                "gpu_count": count, "gpu_memory_gb": mem, "price_hr": round(price * scale, 4),
                "spot_price_hr": round(price * scale * 0.3, 4), "storage_gb_month": 0.1,
                "egress_gb": 0.09, "network_gbps": 25.0})
    snap = Snapshot(source="grid", fetched_at=dt.datetime(2026, 11, 29, tzinfo=dt.UTC),
                    offers=Offers.from_records(rows))
    return write_snapshot(snap, tmp_path / "prices")


# profile x GPU x market x node count; a 2-node request writes its fastest plan (a group of
# nodes), a 1-node one its cheapest; 2-node spot plans keep checkpoints in an object store
GRID = [(profile, gpu, market, nodes)
        for profile in ("resnet50-v100-amp", "bert-large-a100-fp16")
        for gpu in ("T4", "L4")
        for market in ("on-demand", "spot")
        for nodes in (1, 2)]


def test_every_plan_in_a_grid_passes_preflight_or_fails_for_a_reason_it_states(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = _grid_snapshot(tmp_path)
    seen: set[tuple[str, int, bool, bool]] = set()
    for provider in ("aws", "gcp", "azure"):
        for profile, gpu, market, nodes in GRID:
            out = tmp_path / f"{provider}-{profile}-{gpu}-{market}-{nodes}.toml"
            args = ["plan", "-p", profile, "--samples", "2e6", "--prices", str(prices),
                    "--provider", provider, "--gpu", gpu, "--max-nodes", str(nodes),
                    "--checkpoint-gb", "0.5", "--pick", "fastest" if nodes > 1 else "cheapest",
                    "-o", str(out)]
            if market == "spot":
                args += ["--spot"] + (["--checkpoint-target", "s3://b/ck"] if nodes > 1 else [])
            assert main(args) == 0, out.name
            capsys.readouterr()
            plan = load_plan(out)
            stated = " ".join(plan.assumptions.notes)
            _, checks = _preflight(capsys, out)
            memory, spot = checks["memory-fit"], checks["spot-checkpoint"]
            assert memory["status"] == "pass", (out.name, memory)
            replanned = plan.workload.grad_accum_steps > 1 or bool(plan.workload.sharding)
            if replanned:
                assert "memory:" in stated  # the re-plan is in the plan's own words
            if spot["status"] == "fail":
                assert spot["severity"] == "warning", (out.name, spot)
                assert "restart-from-zero" in stated, out.name
            seen.add((plan.offer.market, plan.offer.nodes, replanned, spot["status"] == "fail"))
    # the grid reaches what it is for: spot and on-demand, groups of nodes, re-planned batches,
    # spot plans that resume and ones priced as restarting from zero
    assert {m for m, *_ in seen} == {"spot", "on-demand"}
    assert {n for _, n, *_ in seen} == {1, 2}
    assert any(r for *_, r, _ in seen) and any(f for *_, f in seen)
    assert ("spot", 2, False, False) in seen or ("spot", 2, True, False) in seen


def test_next_fastest_is_never_faster_than_the_fastest_pick() -> None:
    """Was: "next fastest ... (-0.00 h)": the pick gives a near-tie in time to the cheaper plan,
    and the quickest of the others could be a hair faster than the pick itself."""
    import re

    from gpucost.planning.api import plan

    advice = plan(epochs=10, market="any")
    assert advice.fastest is not None
    lines = [r for r in advice.fastest.reasons if r.startswith("next fastest")]
    assert lines, advice.fastest.reasons
    assert re.search(r"\(\+", lines[0]) and "(-" not in lines[0]


def test_the_disk_line_adds_up(capsys: pytest.CaptureFixture[str]) -> None:
    """Was: "disk 113 GB per node = data 43 GB + 2 checkpoints x 2 GB + results 1 GB, plus 30 %
    headroom", which is not 113: the OS and image's 50 GB were left out."""
    import math
    import re

    from gpucost.model.economics import DISK_HEADROOM, SYSTEM_DISK_GB

    _plan(capsys, Path("d.toml"), "--data-gb", "43", "--checkpoint-gb", "2")
    assert main(["explain", "d.toml"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "GB per node =" in ln)
    numbers = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) GB", line)]
    disk, system, data, checkpoint, results = numbers[:5]
    kept = int(re.search(r"(\d+) checkpoints", line).group(1))  # type: ignore[union-attr]
    assert system == SYSTEM_DISK_GB
    # the headroom is on what the job writes; the OS and image are a fixed size
    assert disk == math.ceil(system + (data + kept * checkpoint + results) * (1 + DISK_HEADROOM))
