"""The advisor: Pareto front, the two recommendations, what to relax, and the plan it writes."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from price_table import tiny_offers, write_prices

from gpucost.cli import main
from gpucost.errors import InputError, NoOffersError
from gpucost.model.economics import SYSTEM_DISK_GB, JobParams
from gpucost.planfile import load_plan
from gpucost.planning.advice import Advice, advise, pareto_front, pick
from gpucost.planning.planbuild import to_plan
from gpucost.planning.request import Constraints, Job, Request, make_filters
from gpucost.pricing.snapshot import Offers, Snapshot
from gpucost.profile import Profile, resolve_profile

FETCHED = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Limits:
    """What these tests vary: constraints, and the filters `gpucost plan` exposes."""

    deadline_hours: float | None = None
    budget_usd: float | None = None
    min_gpu_memory_gb: float | None = None
    spot_allowed: bool = False
    max_nodes: int = 1


def advise_under(
    profile: Profile,
    job: Job,
    snapshots: list[Snapshot],
    limits: Limits = Limits(),
    params: JobParams | None = None,
    *,
    now: dt.datetime = NOW,
) -> Advice:
    filters = make_filters(
        market="any" if limits.spot_allowed else "on-demand",
        max_nodes=limits.max_nodes,
        min_gpu_memory_gb=limits.min_gpu_memory_gb,
    )
    constraints = Constraints(limits.deadline_hours, limits.budget_usd)
    return advise(
        Request(profile, job, tuple(snapshots), filters, params or JobParams(), constraints,
                now=now)
    )


def _offers() -> Offers:
    return tiny_offers("v100", "a100", "a100_x8", a100_x8={"spot_price_hr": 12.0},
                       every={"storage_gb_month": 0.1, "egress_gb": 0.0, "network_gbps": 10.0})


@pytest.fixture
def snapshot() -> Snapshot:
    return Snapshot(source="tiny", fetched_at=FETCHED, offers=_offers())


@pytest.fixture
def profile() -> Profile:
    return resolve_profile("resnet50-v100-amp")


@pytest.fixture
def job(profile: Profile) -> Job:
    return Job.from_args(profile, samples=2e7)


def test_pareto_front_on_a_four_row_table() -> None:
    hours = [1.0, 2.0, 3.0, 4.0]
    cost = [10.0, 5.0, 7.0, 2.0]  # (3 h, $7) is beaten by (2 h, $5)
    assert pareto_front(hours, cost).tolist() == [0, 1, 3]
    # equal time, dearer: dominated; identical plans: the first stays
    assert pareto_front([1.0, 1.0, 2.0, 2.0], [5.0, 6.0, 1.0, 1.0]).tolist() == [0, 2]


def test_near_ties_go_to_the_other_criterion() -> None:
    hours = np.array([1.000, 1.005, 3.0, 4.0, 3.98])
    cost = np.array([100.0, 20.0, 7.0, 2.0, 2.01])
    every = np.arange(5)
    # 0.5 % slower for a fifth of the price: fastest; $0.01 dearer but 0.02 h faster: cheapest
    assert pick(hours, cost, every) == (4, 1)
    assert pick(hours, cost, np.array([0, 2])) == (2, 0)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.integers(1, 20)), min_size=1, max_size=30))
def test_pareto_front_is_exactly_the_undominated_plans(points: list[tuple[int, int]]) -> None:
    h = np.array([p[0] for p in points], dtype=float)
    c = np.array([p[1] for p in points], dtype=float)
    front = set(pareto_front(h, c).tolist())

    def dominated(i: int) -> bool:
        return any(
            h[j] <= h[i] and c[j] <= c[i] and (h[j] < h[i] or c[j] < c[i]) for j in range(len(h))
        )

    for i in range(len(h)):
        if dominated(i):
            assert i not in front
        elif i in front:
            continue
        else:  # undominated but left out: only as a duplicate of a kept plan
            assert any(h[j] == h[i] and c[j] == c[i] for j in front)


def test_recommends_cheapest_on_time_and_fastest_within_budget(
    snapshot: Snapshot, profile: Profile, job: Job
) -> None:
    free = advise_under(profile, job, [snapshot], Limits(spot_allowed=True), now=NOW)
    cols = free.ranking.plans
    assert free.cheapest is not None and free.fastest is not None
    assert free.cheapest.row.cost_usd == cols.cost_usd.min()
    # the fastest, or a plan within 1 % of its time that costs less
    h_min = cols.total_hours.min()
    near = cols.total_hours <= h_min * 1.01
    assert free.fastest.row.cost_usd == cols.cost_usd[near].min()
    assert free.fastest.row.total_hours <= h_min * 1.01
    # a deadline between the fastest and the cheapest plan's hours moves the cheapest choice
    deadline = (free.fastest.row.total_hours + free.cheapest.row.total_hours) / 2
    timed = advise_under(
        profile, job, [snapshot], Limits(deadline_hours=deadline, spot_allowed=True), now=NOW
    )
    assert timed.cheapest is not None
    on_time = cols.total_hours <= deadline
    assert timed.cheapest.row.cost_usd == cols.cost_usd[on_time].min()
    assert timed.cheapest.row.total_hours <= deadline
    text = " ".join(timed.cheapest.reasons)
    assert f"within the {deadline:g} h deadline" in text and "$/job = compute $" in text
    # a budget below the fastest plan's cost makes the fastest choice a slower, cheaper one
    budget = (free.fastest.row.cost_usd + free.cheapest.row.cost_usd) / 2
    capped = advise_under(
        profile, job, [snapshot], Limits(budget_usd=budget, spot_allowed=True), now=NOW
    )
    assert capped.fastest is not None
    assert capped.fastest.row.cost_usd <= budget
    within = cols.total_hours[cols.cost_usd <= budget].min()
    assert within <= capped.fastest.row.total_hours <= within * 1.01
    assert set(capped.pareto.tolist()) <= set(np.flatnonzero(capped.feasible).tolist())


def test_infeasible_says_what_to_relax_and_by_how_much(
    snapshot: Snapshot, profile: Profile, job: Job
) -> None:
    loose = advise_under(profile, job, [snapshot], Limits(max_nodes=2), now=NOW)
    fastest_h = float(loose.ranking.plans.total_hours.min())
    cheapest = float(loose.ranking.plans.cost_usd.min())
    tight = advise_under(
        profile, job, [snapshot], Limits(deadline_hours=fastest_h / 2, max_nodes=2), now=NOW
    )
    assert not tight.ok and tight.cheapest is None
    assert tight.relax[0] == (
        f"extend the deadline to {math.ceil(fastest_h * 10) / 10:g} h "
        f"(+{fastest_h / 2:.1f} h): the fastest plan takes {fastest_h:.1f} h"
    )
    # more nodes are suggested with the plan they would allow
    more = [r for r in tight.relax if r.startswith("or allow ")]
    assert more, tight.relax
    found = re.match(r"or allow (\d+) nodes \(--max-nodes \1\): .* in ([\d.]+) h$", more[0])
    assert found, more[0]
    assert int(found[1]) > 2 and float(found[2]) <= fastest_h / 2 + 0.05
    broke = advise_under(profile, job, [snapshot], Limits(budget_usd=cheapest * 0.5), now=NOW)
    assert not broke.ok
    assert f"raise the budget to ${math.ceil(cheapest * 100) / 100:,.2f}" in broke.relax[0]
    assert f"(+${cheapest * 0.5:,.2f})" in broke.relax[0]


def test_infeasible_on_demand_suggests_spot(profile: Profile, job: Job) -> None:
    offers = Offers.from_records(
        [
            {
                "provider": "aws",
                "region": "us-east-1",
                "instance_type": "p3.2xlarge",
                "gpu": "V100 SXM2 16GB",
                "gpu_count": 1,
                "price_hr": 3.06,
                "spot_price_hr": 0.31,
            }
        ]
    )
    snap = Snapshot(source="tiny", fetched_at=FETCHED, offers=offers)
    spot = advise_under(profile, job, [snap], Limits(spot_allowed=True), now=NOW)
    assert spot.cheapest is not None and spot.cheapest.row.market == "spot"
    budget = spot.cheapest.row.cost_usd * 1.1
    broke = advise_under(profile, job, [snap], Limits(budget_usd=budget), now=NOW)
    assert not broke.ok
    assert broke.relax[-1] == (
        f"or allow spot capacity (--spot): aws p3.2xlarge (us-east-1), 1x V100 SXM2 16GB, spot "
        f"meets all constraints at ${spot.cheapest.row.cost_usd:,.2f} in "
        f"{spot.cheapest.row.total_hours:.1f} h"
    )


@pytest.mark.parametrize(
    ("spot_allowed", "max_nodes", "deadline_factor", "budget_factor"),
    [(False, 1, 0.6, None), (True, 1, 0.6, None), (True, 2, 0.5, None), (False, 1, 1.2, 0.5)],
)
def test_relax_names_the_plan_a_full_rerank_would_pick(
    snapshot: Snapshot,
    profile: Profile,
    job: Job,
    spot_allowed: bool,
    max_nodes: int,
    deadline_factor: float | None,
    budget_factor: float | None,
) -> None:
    """The advisor ranks only the rows a relaxation adds; its suggestion must be the plan that
    advising again under the relaxed constraints picks, tried in the same order (spot, then
    2x, 4x, 8x the nodes, at most 16)."""
    loose = advise_under(
        profile,
        job,
        [snapshot],
        Limits(spot_allowed=spot_allowed, max_nodes=max_nodes),
        now=NOW,
    )
    cols = loose.ranking.plans
    fastest = int(np.argmin(cols.total_hours))
    c = Limits(
        deadline_hours=None
        if deadline_factor is None
        else float(cols.total_hours[fastest]) * deadline_factor,
        budget_usd=None
        if budget_factor is None
        else float(cols.cost_usd[fastest]) * budget_factor,
        spot_allowed=spot_allowed,
        max_nodes=max_nodes,
    )
    tight = advise_under(profile, job, [snapshot], c, now=NOW)
    assert not tight.ok
    tries = (
        [] if spot_allowed else [("allow spot capacity (--spot)", replace(c, spot_allowed=True))]
    )
    if c.deadline_hours is not None:
        tries += [
            ("", replace(c, max_nodes=n))
            for n in sorted({min(16, max_nodes * k) for k in (2, 4, 8)})
        ]
    expected = None
    for text, relaxed in tries:
        full = advise_under(profile, job, [snapshot], relaxed, now=NOW)
        if full.cheapest is not None:
            row = full.cheapest.row
            text = text or f"allow {row.nodes} nodes (--max-nodes {row.nodes})"
            expected = (
                f"or {text}: {row.label()} meets all constraints at "
                f"${row.cost_usd:,.2f} in {row.total_hours:.1f} h"
            )
            break
    assert expected is not None  # each case is one a relaxation fixes
    assert tight.relax[-1] == expected
    assert sum(r.startswith("or ") for r in tight.relax) == 1


def test_filters_that_leave_nothing_name_the_filter(
    snapshot: Snapshot, profile: Profile, job: Job
) -> None:
    with pytest.raises(NoOffersError, match=r"lower the GPU memory minimum to 40 GB"):
        advise_under(profile, job, [snapshot], Limits(min_gpu_memory_gb=80), now=NOW)
    with pytest.raises(InputError, match="deadline hours must be a positive number"):
        Constraints(deadline_hours=-1)


def test_plan_round_trips_and_carries_its_assumptions(
    snapshot: Snapshot, profile: Profile, job: Job, tmp_path: Path
) -> None:
    params = JobParams(data_gb=20.0, checkpoint_gb=0.5, results_gb=1.0)
    advice = advise_under(profile, job, [snapshot], Limits(spot_allowed=True), params, now=NOW)
    assert advice.cheapest is not None
    plan = to_plan(
        advice.cheapest,
        advice,
        profile_ref="resnet50-v100-amp",
        command="python train.py --fast",
        expected_return_hours=100.0,
        now=NOW,
    )
    from gpucost.planfile import save_plan

    loaded = load_plan(save_plan(plan, tmp_path / "plan.toml"))
    assert loaded == plan
    row = advice.cheapest.row
    assert loaded.offer.instance_type == row.instance_type
    assert loaded.estimate.cost_usd == pytest.approx(row.cost_usd, abs=1e-3)
    assert loaded.job.command == ["python", "train.py", "--fast"]
    assert loaded.job.entry_script == "train.py"
    assert loaded.safety.budget_cap_usd >= loaded.estimate.cost_usd
    assert loaded.safety.timeout_hours >= loaded.estimate.hours
    assert loaded.disk.size_gb == math.ceil((20 + 2 * 0.5 + 1) * 1.3) + SYSTEM_DISK_GB
    assert loaded.idle.policy == "destroy"  # 100 h away is past any break-even here
    notes = " ".join(loaded.assumptions.notes)
    assert "prices from tiny dated 2026-11-30" in notes and "interruptions" in notes


def _write_prices(tmp_path: Path) -> Path:
    return write_prices(tmp_path / "prices", _offers())


def test_plan_and_explain_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = str(_write_prices(tmp_path))
    out_file = tmp_path / "plan.toml"
    code = main(
        [
            "plan",
            "--prices",
            prices,
            "--samples",
            "2e7",
            "--data-gb",
            "20",
            "--checkpoint-gb",
            "0.5",
            "--spot",
            "--max-nodes",
            "2",
            "-o",
            str(out_file),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "cheapest meeting the deadline:" in out and "Pareto front" in out
    plan = load_plan(out_file)
    assert main(["explain", str(out_file)]) == 0
    text = capsys.readouterr().out
    for term in (
        "compute",
        "setup",
        "storage",
        "egress",
        "ingress",
        "checkpoints",
        "spot rework",
        "total",
    ):
        assert re.search(rf"^{term}\s+\$", text, re.M), term
    assert f"${plan.estimate.cost_usd:,.2f}" in text
    assert "dated " in text and plan.offer.price_date in text
    # explain without a file plans on the spot: same pick, same numbers
    assert (
        main(
            [
                "explain",
                "--prices",
                prices,
                "--samples",
                "2e7",
                "--data-gb",
                "20",
                "--checkpoint-gb",
                "0.5",
                "--spot",
                "--max-nodes",
                "2",
            ]
        )
        == 0
    )
    again = capsys.readouterr().out
    assert f"${plan.estimate.cost_usd:,.2f}" in again


def test_plan_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = str(_write_prices(tmp_path))
    code = main(["plan", "--prices", prices, "--samples", "2e7", "--budget", "0.01"])
    err = capsys.readouterr().err
    assert code == 1
    assert "no plan meets the constraints" in err and "raise the budget to $" in err
    assert "\n" not in err.strip()
    assert main(["plan", "--prices", prices, "--samples", "2e7", "--data-gb", "-3"]) == 2
    assert "argument --data-gb: must be at least 0" in capsys.readouterr().err
    assert main(["explain", str(tmp_path / "missing.toml")]) == 2


def test_plan_json_lists_the_front(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = str(_write_prices(tmp_path))
    assert main(["plan", "--prices", prices, "--samples", "2e7", "--spot", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    costs = [p["cost_usd"] for p in doc["pareto_front"]]
    hours = [p["total_hours"] for p in doc["pareto_front"]]
    assert hours == sorted(hours) and costs == sorted(costs, reverse=True)
    assert doc["plan"]["schema"] == "gpucost-plan"


def test_plan_on_your_own_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.profile import Profile

    profile = Profile(
        gpu="CPU",
        precision="fp32",
        batch_size=64,
        step_time_s=0.02,
        param_count=1e6,
        flops_per_sample=6e6,
        name="tiny-cpu",
    )
    profile_path = profile.save(tmp_path / "tiny.json")
    prices = str(_write_prices(tmp_path))
    out_file = tmp_path / "local.toml"
    code = main(
        [
            "plan",
            "--profile",
            str(profile_path),
            "--samples",
            "64000",
            "--prices",
            prices,
            "--include-local",
            "--local-power-w",
            "100",
            "--electricity-kwh",
            "0.30",
            "--command",
            "python train_tiny.py",
            "-o",
            str(out_file),
        ]
    )
    assert code == 0, capsys.readouterr().err
    plan = load_plan(out_file)
    # 64,000 samples at 3,200/s on a 100 W box at $0.30/kWh: 20 s for $0.000167
    assert plan.offer.provider == "local" and plan.offer.gpu == "CPU"
    assert plan.offer.price_hr == pytest.approx(0.03)
    assert plan.estimate.hours == pytest.approx(20 / 3600, rel=1e-4)
    assert plan.estimate.cost_usd == pytest.approx(20 / 3600 * 0.03, abs=1e-4)
    assert plan.idle.policy == "stop" and plan.spot.fallback == "none"


def test_plans_whose_batch_does_not_fit_are_replanned_or_left_out() -> None:
    """BERT-large at batch 112 does not fit a 16 GB T4 as is: it is re-planned with a smaller
    micro-batch and gradient accumulation (slower than the unchanged batch would be). A model
    whose states alone exceed the T4 is left out, and the advice says so."""
    bert = resolve_profile("bert-large-a100-fp16")
    job = Job.from_args(bert, samples=1e5)
    small = {
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "g4dn.xlarge",
        "gpu": "T4",
        "gpu_count": 1,
        "price_hr": 0.526,
    }
    big = {
        "provider": "lambda",
        "region": "us-west-1",
        "instance_type": "gpu_1x_a100_sxm4",
        "gpu": "A100 SXM4 40GB",
        "gpu_count": 1,
        "price_hr": 1.29,
    }
    both = Snapshot(source="tiny", fetched_at=FETCHED, offers=Offers.from_records([small, big]))
    advice = advise_under(bert, job, [both])
    plans = advice.ranking.plans
    assert len(advice.ranking.unfit) == 0
    t4 = int(np.flatnonzero(plans.gpu == "T4")[0])
    row = plans.row(t4)
    assert row.micro_batch < bert.batch_size and row.grad_accum_steps > 1
    assert row.micro_batch * row.grad_accum_steps >= bert.batch_size
    assert row.peak_gb <= 16 * 0.95 - 1.0  # the T4's usable memory
    assert "accumulation" in row.memory_note
    from gpucost.model.perf import predict

    unchanged = predict(bert, gpu="T4", fit_batch="keep")  # the batch as profiled
    assert row.throughput < unchanged.throughput  # each micro-step pays a step's fixed costs
    # predict() itself runs the same largest batch that fits by default
    assert predict(bert, gpu="T4").throughput == pytest.approx(row.throughput)
    assert advice.cheapest is not None
    plan = to_plan(advice.cheapest, advice, profile_ref="bert-large-a100-fp16", now=NOW)
    assert plan.workload.peak_memory_gb is not None
    assert plan.workload.peak_memory_gb <= (
        40 * 0.95 - 1.0 if plan.offer.gpu.startswith("A100") else 16 * 0.95 - 1.0)
    assert plan.workload.micro_batch == advice.cheapest.row.micro_batch
    huge = bert.with_changes(param_count=1.5e9)  # 24 GB of Adam states: no T4 holds them
    only_small = Snapshot(source="tiny", fetched_at=FETCHED, offers=Offers.from_records([small]))
    none = advise_under(huge, Job.from_args(huge, samples=1e5), [only_small])
    assert not none.ok and len(none.ranking.unfit) == 1
    assert none.relax[0].startswith(f"the per-device batch of {huge.batch_size} fits none")
