"""Economics: stop vs destroy (the measured case exactly), Young/Daly, spot, disk, full $/job."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from price_table import tiny_offers, write_prices

from gpucost.cli import main
from gpucost.errors import InputError
from gpucost.model.economics import (
    SYSTEM_DISK_GB,
    CostInputs,
    JobParams,
    breakeven,
    breakeven_idle_hours,
    disk_size_gb,
    expected_segment_hours,
    idle_costs,
    job_costs,
    spot_run,
    stopped_usd_per_hour,
    young_daly_interval_hours,
)
from gpucost.model.interruptions import band_rate_per_hr, interruption_rates, rules

# The measured case: rented 8x RTX 4090, 250 GB disk, $3.4828/h running, $0.20/GB-month,
# 15 minutes of setup and 43 GB pulled in at $0.003/GB.
RUNNING, DISK_GB, GB_MONTH, SETUP_MIN, INGRESS_GB, INGRESS_GB_USD = (
    3.4828,
    250.0,
    0.20,
    15.0,
    43.0,
    0.003,
)


def test_measured_stop_vs_destroy_case() -> None:
    b = breakeven(
        RUNNING,
        DISK_GB,
        GB_MONTH,
        month_hours=720,
        setup_minutes=SETUP_MIN,
        ingress_gb=INGRESS_GB,
        ingress_usd_gb=INGRESS_GB_USD,
    )
    assert round(b.stopped_usd_hr, 4) == 0.0694
    assert b.stopped_usd_hr == pytest.approx(250 * 0.20 / 720)
    assert round(stopped_usd_per_hour(DISK_GB, GB_MONTH, 730.0), 4) == 0.0685
    assert b.setup_usd == pytest.approx(0.25 * 3.4828)
    assert b.ingress_usd == pytest.approx(43 * 0.003)
    assert round(b.rebuild_usd, 2) == 1.00
    assert round(b.breakeven_hours, 1) == 14.4
    assert b.policy(10.0) == "stop" and b.policy(20.0) == "destroy"
    assert "within 14.4 h" in b.advice()


def test_breakeven_cli_reproduces_the_measured_case(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "breakeven",
            "--running-hr",
            "3.4828",
            "--disk-gb",
            "250",
            "--gb-month",
            "0.20",
            "--month-hours",
            "720",
            "--setup-min",
            "15",
            "--ingress-gb",
            "43",
            "--ingress-per-gb",
            "0.003",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "$0.0694/h" in out and "$1.00" in out and "14.4 h" in out


def test_losing_the_gpus_moves_the_breakeven_down() -> None:
    b = breakeven(
        RUNNING,
        DISK_GB,
        GB_MONTH,
        month_hours=720,
        setup_minutes=SETUP_MIN,
        ingress_gb=INGRESS_GB,
        ingress_usd_gb=INGRESS_GB_USD,
        p_no_gpus=0.1,
    )
    # stopping now risks paying the rebuild anyway with 10 % probability
    assert b.breakeven_hours == pytest.approx(0.9 * 0.9997 / (250 * 0.2 / 720))
    assert b.expected_loss_usd == pytest.approx(0.09997)
    assert "10% chance" in b.advice()
    costly = breakeven(
        RUNNING,
        DISK_GB,
        GB_MONTH,
        month_hours=720,
        setup_minutes=SETUP_MIN,
        p_no_gpus=0.5,
        lost_gpus_usd=50.0,
    )
    assert costly.breakeven_hours == 0.0 and costly.policy(0.1) == "destroy"


def test_breakeven_rejects_bad_input() -> None:
    with pytest.raises(InputError, match=r"must be in 0\.\.1"):
        breakeven(1.0, 100, 0.1, p_no_gpus=1.5)
    with pytest.raises(InputError, match="hours per month"):
        breakeven(1.0, 100, 0.1, month_hours=0)
    with pytest.raises(InputError, match="disk GB"):
        breakeven(1.0, -1, 0.1)


def test_young_daly_against_a_hand_calculation() -> None:
    # a 2-minute checkpoint, one interruption per 10 hours:
    # sqrt(2 x (2/60) h / 0.1 /h) = sqrt(0.6667) = 0.8165 h
    assert young_daly_interval_hours(2 / 60, 0.1) == pytest.approx(0.816496580927726)
    assert young_daly_interval_hours(2 / 60, 0.0) == math.inf


def test_restart_from_scratch_expectation() -> None:
    # no interruptions: exactly the work
    assert expected_segment_hours(5.0, 0.0, 1.0) == pytest.approx(5.0)
    # hand calculation: (1/0.1 + 0.5) x (e^(0.1 x 5) - 1) = 10.5 x 0.648721 = 6.811573
    assert expected_segment_hours(5.0, 0.1, 0.5) == pytest.approx(6.8115729, rel=1e-6)


def test_checkpoints_beat_restarting_from_scratch() -> None:
    without = spot_run(100.0, 0.05, restart_hours=0.25, checkpoints=False)
    with_ckpt = spot_run(100.0, 0.05, restart_hours=0.25, checkpoint_hours=0.01)
    assert np.isinf(without.interval_hours)
    assert float(with_ckpt.interval_hours) == pytest.approx(math.sqrt(2 * 0.01 / 0.05))
    assert float(with_ckpt.hours) < float(without.hours)
    assert float(with_ckpt.checkpoint_hours) == pytest.approx(100 / math.sqrt(0.4) * 0.01)
    # an 80 %-done interruption is lost without checkpoints: expected time far above the work
    assert float(without.hours) > 10 * 100.0


def test_disk_size() -> None:
    assert disk_size_gb(150.0, 0.2, checkpoints_kept=2) == math.ceil(150.4 * 1.3) + 50.0
    assert disk_size_gb(0.0) == 50.0  # the OS and image alone: a 1 GB disk cannot boot
    assert disk_size_gb(10.0, system_gb=0.0) == 13.0


def test_interruption_table() -> None:
    assert band_rate_per_hr("<5%") == pytest.approx(-math.log(1 - 0.025) / 730)
    with pytest.raises(InputError, match="unknown interruption band"):
        band_rate_per_hr("30%")
    assert all(r.source for r in rules())
    rate, source = interruption_rates(
        np.array(["aws", "aws", "vast", "vast", "lambda"]),
        np.array(["p4d.24xlarge", "p4d.24xlarge", "x", "x", "gpu_1x_a100"]),
        np.array(["spot", "on-demand", "on-demand", "spot", "on-demand"]),
        np.array([np.nan, np.nan, 0.99, 0.99, np.nan]),
    )
    assert rate[0] == pytest.approx(band_rate_per_hr(">20%"))
    assert rate[1] == 0.0 and rate[4] == 0.0
    assert rate[2] == pytest.approx(0.01)  # 1 % downtime, 1 h outages
    assert rate[3] == pytest.approx(0.06)
    assert "Spot Instance Advisor" in source[0] and "reliability" in source[2]
    over, _ = interruption_rates(
        np.array(["aws", "aws"]),
        np.array(["p3.2xlarge"] * 2),
        np.array(["spot", "on-demand"]),
        np.array([np.nan, np.nan]),
        override=0.2,
    )
    assert over.tolist() == [0.2, 0.0]


def _cols(n: int = 1, **over: object) -> CostInputs:
    base: dict[str, object] = {
        "nodes": 1.0,
        "price_hr": 2.0,
        "on_demand_hr": 4.0,
        "market": "spot",
        "storage_gb_month": 0.1,
        "egress_gb": 0.09,
        "ingress_gb": 0.0,
        "month_hours": 730.0,
        "network_gbps": 10.0,
        "provider": "aws",
        "instance_type": "p3.2xlarge",
        "reliability": np.nan,
    }
    base.update(over)
    return CostInputs(**{k: np.full(n, v) for k, v in base.items()})


def test_job_cost_terms_add_up_by_hand() -> None:
    params = JobParams(data_gb=45.0, checkpoint_gb=1.0, results_gb=4.0, setup_minutes=12.0)
    cols = _cols(market="on-demand", nodes=2.0, ingress_gb=0.01)
    c = job_costs(cols, np.array([10.0]), params)
    setup_h = 12 / 60 + 45 * 8 / 10 / 3600  # 0.2 h + 36 s download at 10 Gbit/s
    assert c.setup_hours[0] == pytest.approx(setup_h)
    assert c.compute_usd[0] == pytest.approx(2 * 2.0 * 10)
    assert c.setup_usd[0] == pytest.approx(2 * 2.0 * setup_h)
    disk = math.ceil((45 + 2 * 1 + 4) * 1.3) + SYSTEM_DISK_GB
    assert c.disk_gb[0] == disk
    assert c.storage_usd[0] == pytest.approx(2 * disk * 0.1 / 730 * (10 + setup_h))
    assert c.egress_usd[0] == pytest.approx(5 * 0.09)
    assert c.ingress_usd[0] == pytest.approx(2 * 45 * 0.01)
    assert c.spot_rework_usd[0] == 0.0 and c.risk[0] == 0.0
    terms = (
        "compute_usd",
        "setup_usd",
        "storage_usd",
        "egress_usd",
        "ingress_usd",
        "checkpoint_usd",
        "spot_rework_usd",
    )
    assert c.cost_usd[0] == pytest.approx(sum(getattr(c, t)[0] for t in terms))
    assert c.worst_usd[0] == c.cost_usd[0]


def test_spot_rows_carry_expected_not_best_case_cost() -> None:
    params = JobParams(data_gb=10.0, checkpoint_gb=2.0, interruption_rate_per_hr=0.05,
                       object_store_checkpoints=True)  # spot resumes only from an object store
    c = job_costs(_cols(), np.array([50.0]), params)
    assert c.spot_rework_usd[0] > 0 and c.checkpoint_usd[0] > 0
    assert c.interruptions[0] == pytest.approx(
        0.05 * (c.total_hours[0] - c.setup_hours[0])
    )
    assert 0 < c.risk[0] < 1
    assert c.worst_usd[0] > c.cost_usd[0]
    assert np.isfinite(c.checkpoint_interval_hours[0])


@settings(max_examples=60, deadline=None)
@given(
    st.floats(0.0, 0.5),
    st.floats(0.0, 0.5),
    st.floats(0.1, 500.0),
    st.floats(0.0, 50.0),
    st.integers(1, 8),
    st.booleans(),
)
def test_higher_interruption_rate_never_lowers_expected_cost(
    r1: float, r2: float, hours: float, ckpt_gb: float, nodes: int, ckpt: bool
) -> None:
    lo, hi = sorted((r1, r2))
    costs = [
        job_costs(
            _cols(nodes=float(nodes)),
            np.array([hours]),
            JobParams(
                data_gb=20.0, checkpoint_gb=ckpt_gb, checkpoints=ckpt, interruption_rate_per_hr=r
            ),
        ).cost_usd[0]
        for r in (lo, hi)
    ]
    assert costs[1] >= costs[0] * (1 - 1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(0.01, 10.0),
    st.floats(1.0, 5000.0),
    st.floats(0.01, 0.5),
    st.floats(0.0, 60.0),
    st.floats(0.0, 1.0),
    st.floats(0.0, 2000.0),
    st.floats(0.0, 1000.0),
)
def test_longer_idle_never_favours_stopping_past_breakeven(
    running: float,
    disk: float,
    gb_month: float,
    setup_min: float,
    p: float,
    idle: float,
    extra: float,
) -> None:
    b = breakeven(running, disk, gb_month, setup_minutes=setup_min, p_no_gpus=p)
    for gap in (idle, idle + extra):
        if gap > b.breakeven_hours * (1 + 1e-9):
            assert b.policy(gap) == "destroy"
    if b.policy(idle) == "destroy":
        assert b.policy(idle + extra) == "destroy"
    stop, destroy = idle_costs(b.breakeven_hours, b.stopped_usd_hr, b.rebuild_usd, p)
    if 0 < b.breakeven_hours < math.inf:
        assert stop == pytest.approx(destroy)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(1.0, 2000.0),
    st.floats(0.0, 2000.0),
    st.floats(0.1, 200.0),
    st.sampled_from(["spot", "on-demand"]),
)
def test_bigger_disk_never_lowers_cost(disk: float, more: float, hours: float, market: str) -> None:
    cols = _cols(market=market)
    small = job_costs(cols, np.array([hours]), JobParams(disk_gb=disk))
    big = job_costs(cols, np.array([hours]), JobParams(disk_gb=disk + more))
    assert big.cost_usd[0] >= small.cost_usd[0]
    assert big.storage_usd[0] >= small.storage_usd[0]
    assert disk_size_gb(disk + more) >= disk_size_gb(disk)


def test_breakeven_vectorised_matches_scalar() -> None:
    stopped = np.array([0.0694, 0.0, 0.5])
    hours = breakeven_idle_hours(stopped, np.array([1.0, 1.0, 1.0]))
    assert hours[0] == pytest.approx(1 / 0.0694) and np.isinf(hours[1])
    assert hours[2] == pytest.approx(2.0)


# ---- your own machine as an offer -----------------------------------------------------------


class _FakeNvml:
    """The pynvml calls detection makes, answering like a 2x RTX 4090 box (no GPU here)."""

    class _Memory:
        total = 25_757_220_864  # bytes, as NVML reports a 24 GiB card

    def __init__(self) -> None:
        self.shutdown = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA GeForce RTX 4090"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _Memory:
        return self._Memory()

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return 450_000  # milliwatts


def test_local_machine_detected_through_nvml() -> None:
    from gpucost.local import HOST_POWER_W, detect, local_price_hr, local_snapshot

    nvml = _FakeNvml()
    machine = detect(nvml)
    assert nvml.shutdown
    assert (machine.gpu, machine.gpu_count, machine.detected_by) == ("RTX 4090", 2, "nvml")
    assert machine.power_w == 2 * 450 + HOST_POWER_W
    assert local_price_hr(machine.power_w, 0.30, 0.25) == pytest.approx(1.0 * 0.30 + 0.25)
    snap = local_snapshot(machine, electricity_usd_kwh=0.30)
    row = snap.offers.to_records()[0]
    assert row["provider"] == "local" and row["price_hr"] == pytest.approx(0.30)
    assert row["storage_gb_month"] == 0.0 and math.isnan(row["spot_price_hr"])
    assert "1000 W x $0.3/kWh" in snap.provenance["price"]
    with pytest.raises(InputError, match="electricity"):
        local_price_hr(100.0, -1.0)


def test_local_without_gpu_is_a_cpu_and_ranks_a_cpu_profile() -> None:
    from gpucost.local import CPU_POWER_W, detect, given_machine, local_snapshot
    from gpucost.planning.ranking import rank
    from gpucost.planning.request import Job, Request
    from gpucost.profile import Profile, resolve_profile

    class NoDriver:
        def nvmlInit(self) -> None:
            raise OSError("NVML Shared Library Not Found")

    cpu = detect(NoDriver())
    assert cpu.gpu == "CPU" and cpu.power_w == CPU_POWER_W
    profile = Profile(
        gpu="CPU",
        precision="fp32",
        batch_size=32,
        step_time_s=0.5,
        param_count=1e6,
        flops_per_sample=6e6,
        name="tiny-cpu",
    )
    job = Job.from_args(profile, samples=64_000)
    snaps = [
        local_snapshot(cpu, electricity_usd_kwh=0.20),
        local_snapshot(given_machine("RTX 4090", 1), electricity_usd_kwh=0.20),
    ]
    ranking = rank(Request(profile, job, tuple(snaps), economics=JobParams(data_gb=5.0)))
    c = ranking.plans
    cpu_row = int(np.flatnonzero(c.gpu == "CPU")[0])
    assert c.throughput[cpu_row] == pytest.approx(64.0)  # 32 samples per 0.5 s
    hours = 64_000 / 64.0 / 3600
    assert c.total_hours[cpu_row] == pytest.approx(hours)  # nothing to set up locally
    assert c.cost_usd[cpu_row] == pytest.approx(hours * 0.065 * 0.20)
    # a GPU-measured profile cannot be predicted on the CPU: the CPU row drops out
    gpu_rank = rank(Request(resolve_profile("resnet50-v100-amp"), job, tuple(snaps)))
    assert gpu_rank.plans.gpu.tolist() == ["RTX 4090"]


def test_spot_fallback_to_on_demand_when_capacity_stays_away() -> None:
    base = JobParams(checkpoint_gb=1.0, interruption_rate_per_hr=0.05)
    risky = JobParams(
        checkpoint_gb=1.0,
        interruption_rate_per_hr=0.05,
        p_no_capacity=0.3,
        max_wait_capacity_hours=2.0,
    )
    a = job_costs(_cols(), np.array([40.0]), base)
    b = job_costs(_cols(), np.array([40.0]), risky)
    n = a.interruptions[0]
    p_fallback = 1 - (1 - 0.3) ** n
    # half the work moves from $2/h spot to $4/h on-demand, after a 2 h wait
    assert b.spot_rework_usd[0] - a.spot_rework_usd[0] == pytest.approx(
        p_fallback * (4.0 - 2.0) * 0.5 * 40.0
    )
    assert b.total_hours[0] - a.total_hours[0] == pytest.approx(p_fallback * 2.0)
    on_demand = job_costs(_cols(market="on-demand"), np.array([40.0]), risky)
    plain = job_costs(_cols(market="on-demand"), np.array([40.0]), base)
    assert on_demand.cost_usd[0] == plain.cost_usd[0]
    with pytest.raises(InputError, match="no spot capacity"):
        JobParams(p_no_capacity=2.0)


def test_breakeven_from_an_offer_in_the_snapshots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import datetime as dt

    from gpucost.pricing.snapshot import Offers, Snapshot, write_snapshot

    offers = Offers.from_records(
        [
            {
                "provider": "vast",
                "region": "SE",
                "instance_type": "vast-8x4090",
                "gpu": "RTX 4090",
                "gpu_count": 8,
                "price_hr": 3.4828,
                "storage_gb_month": 0.20,
                "month_hours": 720,
                "ingress_gb": 0.003,
            },
            {
                "provider": "vast",
                "region": "US",
                "instance_type": "vast-8x4090",
                "gpu": "RTX 4090",
                "gpu_count": 8,
                "price_hr": 4.10,
                "storage_gb_month": 0.10,
                "month_hours": 720,
            },
        ]
    )
    path = write_snapshot(
        Snapshot(source="vast", fetched_at=dt.datetime.now(dt.UTC), offers=offers), tmp_path
    )
    argv = [
        "breakeven",
        "--offer",
        "vast-8x4090",
        "--prices",
        str(path),
        "--disk-gb",
        "250",
        "--setup-min",
        "15",
        "--ingress-gb",
        "43",
        "--format",
        "json",
    ]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["running_usd_hr"] == 3.4828  # the cheaper of the two
    assert round(doc["stopped_usd_hr"], 4) == 0.0694 and round(doc["breakeven_hours"], 1) == 14.4
    assert (
        main(["breakeven", "--offer", "p5.48xlarge", "--prices", str(path), "--disk-gb", "1"]) == 2
    )
    assert "no offer of instance type 'p5.48xlarge'" in capsys.readouterr().err


def test_compare_json_shows_every_term_and_spot_risk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_prices(tmp_path, tiny_offers(
        "v100", every={"storage_gb_month": 0.08, "egress_gb": 0.09, "network_gbps": 10.0}))
    assert (
        main(
            [
                "compare",
                "--prices",
                str(path),
                "--samples",
                "1e7",
                "--data-gb",
                "40",
                "--checkpoint-gb",
                "1",
                "--results-gb",
                "2",
                "--interruption-rate",
                "0.1",
                "--format",
                "json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    terms = (
        "compute_usd",
        "setup_usd",
        "storage_usd",
        "egress_usd",
        "ingress_usd",
        "checkpoint_usd",
        "spot_rework_usd",
    )
    for name in (*terms, "total_hours", "risk", "worst_usd", "checkpoint_interval_hours"):
        assert name in doc["units"], name
    by_market = {p["market"]: p for p in doc["plans"]}
    spot, od = by_market["spot"], by_market["on-demand"]
    for plan in (spot, od):
        assert plan["cost_usd"] == pytest.approx(sum(plan[t] for t in terms))
        assert plan["egress_usd"] == pytest.approx(3 * 0.09)
    # spot carries its expected rework, not the best case, and says how risky it is
    assert spot["spot_rework_usd"] > 0 and 0 < spot["risk"] < 1
    assert spot["cost_usd"] > spot["hours"] * 0.92
    assert od["risk"] == 0 and od["checkpoint_interval_hours"] is None
    # no object-store checkpoint target: a reclaimed spot instance takes its checkpoints along,
    # so the spot row is priced as restart-from-zero (no interval), as `gpucost plan` prices it
    assert spot["checkpoint_interval_hours"] is None


def test_python_api_compare_takes_the_job_economics(tmp_path: Path) -> None:
    import gpucost

    path = write_prices(tmp_path, tiny_offers("a100", every={"storage_gb_month": 0.2}))
    bare = gpucost.compare("resnet50-v100-amp", samples=1e7, prices=[path])
    heavy = gpucost.compare(
        "resnet50-v100-amp", samples=1e7, prices=[path], data_gb=500.0, setup_minutes=30.0
    )
    assert heavy["compute_usd"].iloc[0] == pytest.approx(bare["compute_usd"].iloc[0])
    assert heavy["setup_usd"].iloc[0] > bare["setup_usd"].iloc[0]
    assert heavy["storage_usd"].iloc[0] > bare["storage_usd"].iloc[0]
    assert heavy["disk_gb"].iloc[0] == math.ceil(500 * 1.3) + SYSTEM_DISK_GB


def test_compare_ranks_a_named_local_machine_beside_the_cloud(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_prices(tmp_path, tiny_offers("a100"))
    assert (
        main(
            [
                "compare",
                "--prices",
                str(path),
                "--samples",
                "1e7",
                "--include-local",
                "--local-gpu",
                "RTX 4090",
                "--local-gpus",
                "2",
                "--local-power-w",
                "1000",
                "--electricity-kwh",
                "0.3",
                "--amortisation-hr",
                "0.1",
                "--format",
                "json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    local = next(p for p in doc["plans"] if p["provider"] == "local")
    assert local["gpu"] == "RTX 4090" and local["gpu_count"] == 2
    assert local["price_hr"] == pytest.approx(1.0 * 0.3 + 0.1)
    assert local["setup_usd"] == 0 and local["storage_usd"] == 0
    assert local["cost_usd"] == pytest.approx(local["hours"] * 0.4)
    assert {s["source"] for s in doc["price_sources"]} == {"tiny", "local"}
