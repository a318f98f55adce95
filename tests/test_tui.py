"""The TUI driven through Textual's Pilot at 80x24, on a tiny fixed price snapshot: filter, sort,
select, change the job and see the ranking change, write the plan file with the keyboard alone,
watch runs, stop one behind a confirmation. Expected rows are computed independently with
:func:`gpucost.planning.ranking.rank`, so the tests follow the model rather than hard-coding
numbers."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import math
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import price_table
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("textual")

from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from gpucost import paths
from gpucost.cli import main
from gpucost.limits import node_limit
from gpucost.planfile import load_plan
from gpucost.planning.plans import Plans
from gpucost.planning.ranking import rank
from gpucost.planning.request import Job, Request, make_filters
from gpucost.planning.scaling import knee_nodes
from gpucost.pricing.snapshot import Offers, Snapshot
from gpucost.profile import resolve_profile
from gpucost.tui.app import GpuCostApp
from gpucost.tui.screens.confirm import ConfirmScreen
from gpucost.tui.screens.help import HelpScreen
from gpucost.tui.screens.plan_detail import PlanDetailScreen
from gpucost.tui.screens.runs import RunsScreen
from gpucost.tui.screens.write_plan import WritePlanScreen
from gpucost.tui.session import JobInputs, rank_view
from gpucost.tui.widgets.offers_table import OffersTable
from gpucost.tui.widgets.scaling_chart import bar

FETCHED = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
PROFILE = "resnet50-v100-amp"
SIZE = (80, 24)


def tiny_offers() -> Offers:
    return price_table.tiny_offers(
        "v100", "a100_x8", "a100", "h100_x8", "rtx4090", "rtx4090_x4",
        a100_x8={"spot_price_hr": 9.83, "network_gbps": 400}, h100_x8={"network_gbps": 800},
        every={"storage_gb_month": 0.08, "egress_gb": 0.09})


@pytest.fixture
def snapshot() -> Snapshot:
    return Snapshot(source="tiny", fetched_at=FETCHED, offers=tiny_offers())


def make_app(snapshot: Snapshot, **kwargs: Any) -> GpuCostApp:
    return GpuCostApp(profile=PROFILE, snapshots=[snapshot], now=NOW, **kwargs)


async def settle(pilot: Pilot[None]) -> None:
    """Let every worker (loading, ranking, the scaling curve) finish and the UI catch up."""
    for _ in range(3):
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:  # superseded by a newer request: wait for that one
            continue
        await pilot.pause()


async def wait_until(pilot: Pilot[None], done: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Pause until ``done()`` (timers and file polls run on the app's clock, not the test's)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.05)
    await settle(pilot)


def drive(app: GpuCostApp, scenario: Callable[[Pilot[None]], Awaitable[None]]) -> None:
    async def run() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await scenario(pilot)

    asyncio.run(run())


def shown(app: GpuCostApp) -> Plans:
    view = app.offers.view
    assert view is not None
    return view.plans


def expected(snapshot: Snapshot, *, spot: bool = True, max_nodes: int = 1,
             gpu: str | None = None) -> Plans:
    """All plans as the ranking module computes them, independently of the TUI."""
    profile = resolve_profile(PROFILE)
    filters = make_filters(market="any" if spot else "on-demand", max_nodes=max_nodes, gpu=gpu)
    return rank(Request(profile, Job.from_args(profile), (snapshot,), filters, now=NOW)).plans


def key_of(cols: Plans, i: int) -> tuple[str, str, str, int]:
    return (str(cols.instance_type[i]), str(cols.region[i]), str(cols.market[i]),
            int(cols.nodes[i]))


def plain(widget: Any, width: int = 100) -> str:
    """A Static's content as plain text (rich renderables included)."""
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def type_in(pilot: Pilot[None], text: str) -> None:
    await pilot.press(*text)


async def set_field(pilot: Pilot[None], field: str, text: str) -> None:
    """Focus a form field, replace its value, press Enter (re-ranks at once)."""
    app = pilot.app
    app.screen.query_one(f"#job-{field}").focus()
    await pilot.press("end")
    for _ in range(12):
        await pilot.press("backspace")
    await type_in(pilot, text)
    await pilot.press("enter")
    await settle(pilot)


# ---- the offers screen ---------------------------------------------------------------------------

def test_opens_on_the_default_job_ranked_by_cost(snapshot: Snapshot) -> None:
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        cols = shown(app)
        want = expected(snapshot)
        assert len(cols.cost_usd) == len(want.cost_usd)
        assert np.all(np.diff(cols.cost_usd) >= 0)
        assert key_of(cols, 0) == key_of(want, int(np.argmin(want.cost_usd)))
        table = app.screen.query_one(OffersTable)
        assert table.has_focus and table.row_count == len(cols.cost_usd)
        # a star on exactly the plans no other plan beats on both time and cost
        h, c = cols.total_hours, cols.cost_usd
        for i, row in enumerate(table.ordered_rows):
            dominated = bool(np.any((h <= h[i]) & (c <= c[i]) & ((h < h[i]) | (c < c[i]))))
            assert (str(row.label) == "★") == (not dominated)
        status = plain(app.screen.query_one("#offers-status"))
        assert "90 epochs" in status and "prices 2026-11-30" in status

    drive(app, scenario)


def test_a_deadline_reranks_and_the_first_row_is_the_cheapest_that_meets_it(
        snapshot: Snapshot) -> None:
    want = expected(snapshot)
    # a deadline between the fastest and the cheapest plan's time, so that it bites
    cheapest = int(np.argmin(want.cost_usd))
    deadline = float(np.median([want.total_hours.min(), want.total_hours[cheapest]]))
    assert want.total_hours.min() < deadline < want.total_hours[cheapest]
    meets = np.flatnonzero(want.total_hours <= deadline)
    best = int(meets[np.argmin(want.cost_usd[meets])])
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        before = key_of(shown(app), 0)
        await set_field(pilot, "deadline", f"{deadline:.4f}")
        cols = shown(app)
        assert np.all(cols.total_hours <= deadline)
        assert len(cols.cost_usd) == len(meets)
        assert key_of(cols, 0) == key_of(want, best) != before
        assert app.screen.query_one(OffersTable).has_focus  # Enter went back to the table

    drive(app, scenario)


def test_a_damaged_newest_snapshot_is_a_notification_and_the_older_one_loads(
        snapshot: Snapshot) -> None:
    """The TUI loads snapshots in a worker, where the skipped-file warning on stderr would be
    lost under Textual: it is a notification naming the file, and the intact older prices
    still rank."""
    from gpucost.pricing.snapshot import snapshot_path, write_snapshot

    write_snapshot(snapshot, paths.user_snapshots_dir())
    damaged = snapshot_path(paths.user_snapshots_dir(), snapshot.source, NOW)
    damaged.write_text('{"source": "tiny", "fetched_at": "2026-12-01T00:00:00Z", "offers": [')
    app = GpuCostApp(profile=PROFILE, now=NOW)

    async def scenario(pilot: Pilot[None]) -> None:
        warnings = [n for n in app._notifications if "damaged price snapshot" in n.message]
        assert len(warnings) == 1 and str(damaged) in warnings[0].message
        assert warnings[0].severity == "warning"
        assert "tiny" in set(shown(app).source.tolist())
        assert app.screen.query_one(OffersTable).row_count == len(shown(app).cost_usd) > 0

    drive(app, scenario)


def test_gpu_filter_and_spot_toggle(snapshot: Snapshot) -> None:
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("slash")
        await type_in(pilot, "a100")
        await pilot.press("enter")
        await settle(pilot)
        cols = shown(app)
        assert set(cols.gpu.tolist()) == {"A100 SXM4 40GB"}
        assert len(cols.gpu) == len(expected(snapshot, gpu="a100").gpu)
        assert "spot" in set(cols.market.tolist())
        await pilot.press("x")  # forbid spot
        await settle(pilot)
        cols = shown(app)
        assert set(cols.market.tolist()) == {"on-demand"}
        assert app.inputs.spot is False

    drive(app, scenario)


def test_fewer_epochs_or_given_samples_shorten_every_plan(snapshot: Snapshot) -> None:
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        def compute_hours() -> dict[tuple[str, str, str, int], float]:
            cols = shown(app)
            return {key_of(cols, i): float(cols.hours[i]) for i in range(len(cols.hours))}

        full = compute_hours()  # the profile's default job: 90 epochs
        await set_field(pilot, "epochs", "45")
        half = compute_hours()
        assert half.keys() == full.keys()
        for key, hours in half.items():
            assert hours == pytest.approx(full[key] / 2, rel=1e-9)
        samples = 1_281_167 * 9  # 9 epochs' worth, given as samples
        await set_field(pilot, "samples", str(samples))
        assert "11,530,503 images" in plain(app.screen.query_one("#offers-status"))
        for key, hours in compute_hours().items():
            assert hours == pytest.approx(full[key] / 10, rel=1e-9)

    drive(app, scenario)


def test_typing_reranks_after_a_pause_without_enter(snapshot: Snapshot) -> None:
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        app.screen.query_one("#job-max-nodes").focus()
        await pilot.press("backspace", "4")
        # no Enter: the form re-ranks once typing pauses
        await wait_until(pilot, lambda: app.inputs.max_nodes == 4)
        await wait_until(pilot, lambda: app.offers.view is not None
                         and app.offers.view.inputs.max_nodes == 4)
        assert int(shown(app).nodes.max()) > 1

    drive(app, scenario)


def test_sorting_by_keys_and_by_header_clicks(snapshot: Snapshot,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import gpucost.tui.screens.offers as offers

    rankings: list[JobInputs] = []

    def counting_rank_view(*args: Any, **kwargs: Any) -> Any:
        rankings.append(args[2])
        return rank_view(*args, **kwargs)

    monkeypatch.setattr(offers, "rank_view", counting_rank_view)
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("s")  # next column: time
        await settle(pilot)
        assert app.offers.sort == "total_hours"
        assert np.all(np.diff(shown(app).total_hours) >= 0)
        await pilot.press("S")  # reversed
        await settle(pilot)
        assert np.all(np.diff(shown(app).total_hours) <= 0)
        # a click on the "$/h" header sorts by it; a second click reverses
        table = app.screen.query_one(OffersTable)
        star = 1 + 2 * table.cell_padding  # the row-label column of Pareto stars
        x = star + sum(c.get_render_width(table) for c in list(table.columns.values())[:2]) + 2
        await pilot.click(OffersTable, offset=(x, 0))
        await settle(pilot)
        assert app.offers.sort == "usd_per_hour_total"
        assert np.all(np.diff(shown(app).usd_per_hour_total) >= 0)
        await pilot.click(OffersTable, offset=(x, 0))
        await settle(pilot)
        assert np.all(np.diff(shown(app).usd_per_hour_total) <= 0)
        assert len(rankings) == 1  # re-sorting the same plans ranks nothing again

    drive(app, scenario)


@pytest.mark.slow
def test_bad_values_say_what_to_fix_and_keep_the_app_alive(snapshot: Snapshot) -> None:
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        await set_field(pilot, "max-nodes", "0")
        assert "max nodes must be a whole number >= 1" in plain(
            app.screen.query_one("#offers-status"))
        await set_field(pilot, "max-nodes", "1")
        await set_field(pilot, "gpu", "Z9000")
        status = plain(app.screen.query_one("#offers-status"))
        assert "error" in status and "Z9000" in status
        await set_field(pilot, "gpu", "")
        await set_field(pilot, "deadline", "0.001")
        status = plain(app.screen.query_one("#offers-status"))
        assert "no plan meets" in status and "deadline" in status
        assert len(shown(app).cost_usd) == 0
        await pilot.press("enter")  # nothing to open: a warning, no crash
        await settle(pilot)
        assert app.screen is app.offers

    drive(app, scenario)


# ---- plan detail and the plan file ---------------------------------------------------------

def test_keyboard_alone_finds_the_cheapest_plan_meeting_a_deadline_and_writes_it(
        snapshot: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The done-when flow: f, tab to the deadline, type it, Enter, Enter (detail), w, Enter."""
    monkeypatch.chdir(tmp_path)
    want = expected(snapshot)
    deadline = float(np.quantile(want.total_hours, 0.3))
    meets = np.flatnonzero(want.total_hours <= deadline)
    best = int(meets[np.argmin(want.cost_usd[meets])])
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("f", "tab", "tab")  # epochs -> samples -> deadline
        await type_in(pilot, f"{deadline:.3f}")
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("enter")  # open the first (cheapest) row
        await settle(pilot)
        assert isinstance(app.screen, PlanDetailScreen)
        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, WritePlanScreen)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, PlanDetailScreen)

    drive(app, scenario)
    plan = load_plan(tmp_path / "plan.toml")
    assert (plan.offer.instance_type, plan.offer.region, plan.offer.market,
            plan.offer.nodes) == key_of(want, best)
    assert plan.estimate.hours <= deadline + 1e-6
    assert plan.estimate.cost_usd == pytest.approx(float(want.cost_usd[best]), rel=1e-3)
    assert plan.job.deadline_hours == pytest.approx(round(deadline, 3))
    assert plan.offer.price_date == "2026-11-30"
    assert plan.created_at == "2026-12-01T00:00:00Z"
    assert plan.safety.timeout_hours >= plan.estimate.hours
    assert any("cheapest" in note for note in plan.assumptions.notes)


def test_writing_over_an_existing_file_asks_first(
        snapshot: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.toml").write_text("mine\n")
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("w")
        await settle(pilot)
        command = app.screen.query_one("#plan-command")
        command.focus()
        await pilot.press("end", *" --epochs 3")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(pilot)
        assert (tmp_path / "plan.toml").read_text() == "mine\n"
        await pilot.press("w", "enter")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)

    drive(app, scenario)
    plan = load_plan(tmp_path / "plan.toml")
    assert plan.job.command == ["python", "train.py", "--epochs", "3"]


def test_plan_detail_shows_breakdown_scaling_breakeven_and_spot(snapshot: Snapshot) -> None:
    app = make_app(snapshot, inputs=JobInputs(max_nodes=4))

    async def scenario(pilot: Pilot[None]) -> None:
        cols = shown(app)
        scales = np.array([node_limit(str(p)) > 1 for p in cols.provider])
        spot_rows = np.flatnonzero((cols.market == "spot") & scales)
        table = app.screen.query_one(OffersTable)
        table.move_cursor(row=int(spot_rows[0]))
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PlanDetailScreen)
        assert screen.row.market == "spot"
        text = {name: plain(screen.query_one(f"#detail-{name}"))
                for name in ("summary", "breakdown", "scaling", "breakeven", "spot")}
        assert "compute" in text["breakdown"] and "total, expected" in text["breakdown"]
        assert "knee" in text["scaling"] and "chosen" in text["scaling"]
        assert text["scaling"].count("\n") >= 16  # 16 node counts, a header and a note
        assert "stop if you will be back within" in text["breakeven"] or \
            "destroy" in text["breakeven"]
        assert "interruptions per node-hour" in text["spot"]
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is app.offers
        # a plan on a provider where gpucost launches one node: its curve says so
        table.move_cursor(row=int(np.flatnonzero(~scales)[0]))
        await pilot.press("enter")
        await settle(pilot)
        assert "one node only" in plain(app.screen.query_one("#detail-scaling"))

    drive(app, scenario)


# ---- runs -------------------------------------------------------------------------------------

def write_status(run_id: str, **fields: Any) -> Path:
    folder = paths.runs_dir() / run_id
    folder.mkdir(parents=True, exist_ok=True)
    status = {"run_id": run_id, "state": "running", "epoch": 1, "epochs": 3.0, "eta_s": 5400.0,
              "elapsed_s": 1800.0, "cost_usd": 1.25, "budget_cap_usd": 10.0,
              "throughput": 812.0, "metrics": {"loss": 0.4321}, "final": False,
              "updated_at": 1_800_000_000.0, **fields}
    (folder / "status.json").write_text(json.dumps(status))
    return folder


@pytest.mark.slow
def test_runs_screen_refreshes_live_and_stops_only_after_yes(
        snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    write_status("resnet-20261201-a")
    write_status("tiny-20261130-b", state="succeeded", final=True, updated_at=1.0)
    stopped: list[str] = []

    def fake_stop(run_id: str) -> list[str]:
        stopped.append(run_id)
        return [f"{run_id}: stopped by its launcher"]

    # where the screen looks it up (imported at its module top)
    monkeypatch.setattr("gpucost.tui.screens.runs.request_stop", fake_stop)
    app = make_app(snapshot, runs_refresh_s=0.05)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("r")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        assert [r.run_id for r in screen.runs] == ["resnet-20261201-a", "tiny-20261130-b"]
        assert "2 run(s), 1 live" in plain(screen.query_one("#runs-status"))
        write_status("resnet-20261201-a", epoch=2, cost_usd=2.5)
        await wait_until(pilot, lambda: screen.runs[0].status.epoch == 2)
        table = screen.query_one("#runs-table")
        row = [str(c) for c in table.get_row_at(0)]  # type: ignore[attr-defined]
        assert row[2] == "2/3" and row[5] == "$2.50" and "loss=0.4321" in row[8]
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(pilot)
        assert stopped == []
        await pilot.press("s", "y")
        await settle(pilot)
        assert stopped == ["resnet-20261201-a"]
        await pilot.press("o")
        await settle(pilot)
        assert app.screen_stack[-1] is app.offers

    drive(app, scenario)


def test_a_run_whose_throughput_left_its_band_shows_the_warning(snapshot: Snapshot) -> None:
    """status.json's throughput_warning (the launcher's band check): the speed is marked and the
    selected run's warning spelled out under the table, escape sequences left out; a run
    without one shows neither."""
    warning = ("throughput: measured 406.0 samples/s vs predicted 812.0 (-50%), outside the "
               "prediction's band 641.5-1137.1; re-estimated $/job $4.10 over 3.1 h")
    write_status("slow-20261201-a", throughput=406.0, throughput_warning=warning + "\x1b[2J")
    write_status("fine-20261130-b", updated_at=1.0)
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("r")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        assert [r.run_id for r in screen.runs] == ["slow-20261201-a", "fine-20261130-b"]
        table = screen.query_one("#runs-table")
        speeds = [str(table.get_row_at(i)[7]) for i in (0, 1)]  # type: ignore[attr-defined]
        assert speeds == ["406/s !", "812/s"]
        box = screen.query_one("#runs-warning")
        text = plain(box, width=400)
        assert box.display and text.startswith(f"slow-20261201-a: {warning}")
        assert "\x1b" not in text  # the escape sequence is shown as text, not sent
        await pilot.press("down")
        await settle(pilot)
        assert not box.display

    drive(app, scenario)


def test_destroying_a_run_the_ledger_does_not_know_reports_the_error(
        snapshot: Snapshot) -> None:
    write_status("ghost-run")
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("r")
        await settle(pilot)
        await pilot.press("d", "y")
        await settle(pilot)
        messages = [n.message for n in app._notifications]
        assert any("no run 'ghost-run' in the ledger" in m for m in messages)
        assert isinstance(app.screen, RunsScreen)

    drive(app, scenario)


# ---- help, command palette -----------------------------------------------------------------

def test_help_and_a_palette_command_per_action(snapshot: Snapshot) -> None:
    app = make_app(snapshot)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await settle(pilot)
        titles = {c.title: c for c in app.get_system_commands(app.screen)}
        for title in ("Offers", "Runs", "Help", "Plan detail", "Write plan file", "Edit job",
                      "Filter by GPU", "Toggle spot", "Sort by $/job", "Sort by time",
                      "Reverse the order"):
            assert title in titles, title
        titles["Sort by time"].callback()
        await settle(pilot)
        assert app.offers.sort == "total_hours"
        assert np.all(np.diff(shown(app).total_hours) >= 0)
        titles["Plan detail"].callback()
        await settle(pilot)
        assert isinstance(app.screen, PlanDetailScreen)

    drive(app, scenario)


# ---- the pure parts ----------------------------------------------------------------------------

@given(st.lists(st.floats(0.01, 1e4), min_size=2, max_size=40))
def test_knee_is_where_doubling_the_nodes_stops_paying(hours: list[float]) -> None:
    knee = knee_nodes(dict(enumerate(hours, 1)))
    judged = len(hours) // 2
    before = knee - 1 if knee is not None else judged
    for n in range(1, before + 1):  # every count before the knee still scales
        assert hours[2 * n - 1] <= 0.75 * hours[n - 1]
    if knee is not None:
        assert 1 <= knee <= judged
        assert hours[2 * knee - 1] > 0.75 * hours[knee - 1]


def test_knee_of_linear_flat_and_bending_curves() -> None:
    assert knee_nodes({n: 10.0 / n for n in range(1, 17)}) is None  # linear: never
    assert knee_nodes(dict.fromkeys(range(1, 17), 10.0)) == 1  # flat: at once
    # 10 h on one node, then communication bounds it near 2.5 h
    hours = {n: 10.0 / n + 0.15 * n for n in range(1, 17)}
    knee = knee_nodes(hours)
    assert knee is not None and 2 <= knee <= 8


@given(st.floats(0.0, 1.0), st.integers(1, 40))
def test_bar_has_the_width_and_grows_with_the_fraction(fraction: float, width: int) -> None:
    drawn = bar(fraction, width)
    assert len(drawn) == width
    filled = drawn.rstrip(" ")
    assert len(filled) == math.ceil(round(fraction * width * 8) / 8)


@settings(deadline=None, max_examples=30)  # an infeasible job also asks the advisor what to relax
@given(deadline=st.floats(0.5, 200.0), budget=st.floats(1.0, 500.0), spot=st.booleans())
def test_view_rows_meet_the_constraints(deadline: float, budget: float, spot: bool) -> None:
    snap = Snapshot(source="tiny", fetched_at=FETCHED, offers=tiny_offers())
    view = rank_view(resolve_profile(PROFILE), [snap],
                     JobInputs(deadline_hours=deadline, budget_usd=budget, spot=spot), now=NOW)
    cols = view.plans
    assert np.all(cols.total_hours <= deadline) and np.all(cols.cost_usd <= budget)
    assert np.all(np.diff(cols.cost_usd) >= 0)
    assert len(cols.cost_usd) == view.meeting
    assert (view.message == "") == (view.meeting > 0)


# ---- the command ------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, named", [(["--profile", "no-such-profile"], "no-such-profile"),
                                          (["--prices", "/no/such/prices"], "/no/such/prices")])
def test_cli_bad_input_is_one_line_exit_2(argv: list[str], named: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err


def test_cli_without_textual_says_how_to_install(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in list(sys.modules):
        if name == "textual" or name.startswith(("textual.", "gpucost.tui")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "textual", None)
    assert main(["tui"]) == 2
    err = capsys.readouterr().err
    assert 'pip install "gpucost[tui]"' in err and err.count("\n") == 1


def test_registering_the_command_imports_no_textual() -> None:
    code = ("import sys; from gpucost.cli import build_parser; build_parser(); "
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


@pytest.mark.slow
def test_runs_screen_follows_and_stops_a_real_local_run(
        snapshot: Snapshot, tmp_path: Path) -> None:
    """A real run of examples/train_tiny.py launched in the background by the executor: the runs
    screen shows its live status.json, and s, y stops it through the executor."""
    import dataclasses
    import os
    import shutil

    from gpucost.executor.control import down
    from gpucost.planfile import save_plan

    pytest.importorskip("torch")
    example = Path(__file__).resolve().parents[1] / "examples"
    shutil.copy(example / "train_tiny.py", tmp_path / "train_tiny.py")
    plan = load_plan(example / "plan.toml")
    epochs = 500  # long enough to be stopped, not finished
    plan = dataclasses.replace(plan, job=dataclasses.replace(
        plan.job, command=["python", "train_tiny.py", "--epochs", str(epochs)], epochs=epochs,
        samples=epochs * (plan.job.dataset_size or 4096.0)))
    plan_path = save_plan(plan, tmp_path / "plan.toml")
    launched = subprocess.run([sys.executable, "-m", "gpucost", "launch", str(plan_path),
                               "--detach"], capture_output=True, text=True, check=True,
                              env=os.environ.copy(), timeout=60)
    run_id = launched.stdout.strip()
    status_path = paths.runs_dir() / run_id / "status.json"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            status = json.loads(status_path.read_text()) if status_path.exists() else {}
            if status.get("epoch"):
                break
            time.sleep(0.2)
        assert status.get("epoch"), f"the run did not report an epoch: {status}"
        app = make_app(snapshot, runs_refresh_s=0.1)

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("r")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, RunsScreen)
            assert [r.run_id for r in screen.runs] == [run_id]
            assert screen.runs[0].state == "running" and not screen.runs[0].final
            await pilot.press("s", "y")
            await settle(pilot)  # request_stop returns once the launcher has exited
            await wait_until(pilot, lambda: screen.runs[0].final)
            assert screen.runs[0].state == "stopped"
            messages = [n.message for n in app._notifications]
            assert any(f"{run_id}: stopped by its launcher" in m for m in messages)

        drive(app, scenario)
    finally:
        down(run_id, wait_s=30)
