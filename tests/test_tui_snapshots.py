"""Screenshots of every TUI screen at 80x24 and 120x40, compared with the SVGs stored under
tests/__snapshots__/ (regenerate after a deliberate change: ``pytest tests/test_tui_snapshots.py
--snapshot-update``, then look at them).

The data is fixed: the tiny snapshot of test_tui, a fixed "now", fixed run status files, and
stand-ins for the performance and memory models, so that recalibrating the models (which
test_tui and the models' own tests follow) does not redraw these pictures. Layout is what they
check.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("pytest_textual_snapshot")

from test_tui import FETCHED, NOW, PROFILE, settle, tiny_offers
from textual.pilot import Pilot

from gpucost import paths
from gpucost.catalog import get_gpu
from gpucost.model.bands import NO_BAND
from gpucost.planning.fit import MemoryPlan
from gpucost.pricing.snapshot import Snapshot
from gpucost.profile import Profile
from gpucost.tui.app import GpuCostApp
from gpucost.tui.session import JobInputs

SIZES = [(80, 24), (120, 40)]
Compare = Callable[..., bool]


def fixed_predict(profile: Profile, gpu: str, gpus_per_node: int = 1, nodes: int = 1,
                  **_: Any) -> SimpleNamespace:
    """Throughput in proportion to bf16 TFLOPS, 12 % lost per extra node: simple and fixed."""
    per_gpu = profile.throughput * get_gpu(gpu).tflops("bf16") / get_gpu(profile.gpu).tflops(
        "bf16")
    efficiency = 1.0 / (1.0 + 0.12 * (nodes - 1))
    return SimpleNamespace(throughput=per_gpu * gpus_per_node * nodes * efficiency,
                           efficiency=efficiency, band=NO_BAND)


def fixed_memory(profile: Profile, spec: Any, group_gpus: int, **_: Any) -> MemoryPlan:
    """Peak memory: the profile's own, which fits any GPU with at least as much memory."""
    peak = profile.peak_memory_gb or 10.0
    return MemoryPlan(peak <= spec.memory_gb, peak, spec.memory_gb, profile.batch_size, 1, "",
                      "" if peak <= spec.memory_gb else "does not fit")


@pytest.fixture(autouse=True)
def _fixed_model(monkeypatch: pytest.MonkeyPatch) -> None:
    # where the planning core calls it (the modules import it at their top)
    monkeypatch.setattr("gpucost.planning.ranking.predict", fixed_predict)
    monkeypatch.setattr("gpucost.planning.scaling.predict", fixed_predict)
    monkeypatch.setattr("gpucost.planning.ranking.plan_memory", fixed_memory)


def app(**kwargs: Any) -> GpuCostApp:
    snap = Snapshot(source="tiny", fetched_at=FETCHED, offers=tiny_offers())
    return GpuCostApp(profile=PROFILE, snapshots=[snap], now=NOW, runs_refresh_s=3600.0,
                      **kwargs)


def keys(*pressed: str) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key in pressed:
            await pilot.press(key)
            await settle(pilot)
        await asyncio.sleep(0.05)
        await pilot.pause()

    return run_before


def write_runs() -> None:
    for run_id, state, epoch, final in (("resnet50-20261201-0001", "running", 2, False),
                                        ("bert-20261130-0002", "succeeded", 3, True),
                                        ("tiny-20261130-0003", "budget-exceeded", 1, True)):
        folder = paths.runs_dir() / run_id
        folder.mkdir(parents=True)
        (folder / "status.json").write_text(json.dumps({
            "run_id": run_id, "state": state, "epoch": epoch, "epochs": 3.0,
            "eta_s": None if final else 2700.0, "elapsed_s": 5400.0 * epoch,
            "cost_usd": 4.2 * epoch, "budget_cap_usd": 20.0, "throughput": 2400.0,
            "metrics": {"loss": 1.0 / (epoch + 1), "acc": 0.25 * epoch}, "final": final,
            "updated_at": 1_800_000_000.0 - len(run_id)}))


@pytest.mark.parametrize("size", SIZES)
def test_offers(snap_compare: Compare, size: tuple[int, int]) -> None:
    assert snap_compare(app(), terminal_size=size, run_before=keys())


def test_offers_with_a_deadline_nothing_meets(snap_compare: Compare) -> None:
    assert snap_compare(app(inputs=JobInputs(deadline_hours=0.05, spot=False)),
                        terminal_size=(80, 24), run_before=keys())


@pytest.mark.parametrize("size", SIZES)
def test_plan_detail(snap_compare: Compare, size: tuple[int, int]) -> None:
    assert snap_compare(app(inputs=JobInputs(max_nodes=2)), terminal_size=size,
                        run_before=keys("enter"))


def test_plan_detail_of_a_spot_plan(snap_compare: Compare) -> None:
    # sorted by spot risk, reversed: the riskiest spot plan first
    assert snap_compare(app(), terminal_size=(120, 40),
                        run_before=keys(*"sssss", "S", "enter"))


def test_write_plan_dialog(snap_compare: Compare) -> None:
    assert snap_compare(app(), terminal_size=(80, 24), run_before=keys("w"))


@pytest.mark.parametrize("size", SIZES)
def test_runs(snap_compare: Compare, size: tuple[int, int]) -> None:
    write_runs()
    assert snap_compare(app(), terminal_size=size, run_before=keys("r"))


def test_runs_stop_confirmation(snap_compare: Compare) -> None:
    write_runs()
    assert snap_compare(app(), terminal_size=(80, 24), run_before=keys("r", "s"))


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare: Compare, size: tuple[int, int]) -> None:
    assert snap_compare(app(), terminal_size=size, run_before=keys("question_mark"))
