"""The gpucost Textual app: offers (the ranking and the job form), plan detail, runs, help.

The app holds what every screen shares (the profile, the price snapshots, the job form's
values) and the plan-writing flow; screens and widgets live in their own modules, styles in
``gpucost.tcss``. Loading happens in a worker on first use, so the window opens at once.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from gpucost.errors import GpuCostError
from gpucost.format import hours as fmt_hours
from gpucost.format import usd as fmt_usd
from gpucost.model.economics import JobParams
from gpucost.planfile import save_plan
from gpucost.pricing.snapshot import Snapshot, load_snapshots
from gpucost.profile import Profile, resolve_profile
from gpucost.tui.screens.confirm import ConfirmScreen
from gpucost.tui.screens.help import HelpScreen
from gpucost.tui.screens.offers import OffersScreen
from gpucost.tui.screens.runs import RunsScreen
from gpucost.tui.screens.write_plan import WritePlanScreen, WriteRequest
from gpucost.tui.session import DEFAULT_COMMAND, JobInputs, View, build_plan
from gpucost.tui.widgets.offers_table import gpus_label


class GpuCostApp(App[None]):
    CSS_PATH = "gpucost.tcss"
    TITLE = "gpucost"
    SUB_TITLE = "plans ranked by $/job"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("o", "offers", "Offers"),
        Binding("r", "runs", "Runs"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        profile: str | os.PathLike[str] | None = None,
        prices: Sequence[str | os.PathLike[str]] | None = None,
        *,
        snapshots: Sequence[Snapshot] | None = None,
        inputs: JobInputs | None = None,
        params: JobParams | None = None,
        now: dt.datetime | None = None,
        runs_refresh_s: float = 1.0,
    ) -> None:
        """``profile``/``prices`` as on the command line; ``snapshots`` (already loaded) and
        ``now`` (the clock for staleness and plan timestamps) make a session reproducible."""
        super().__init__()
        self.profile_ref = None if profile is None else str(profile)
        self.prices = prices
        self.inputs = inputs or JobInputs()
        self.params = params or JobParams()
        self.now = now
        self.runs_refresh_s = runs_refresh_s
        self.profile: Profile | None = None
        self.snapshots: list[Snapshot] = list(snapshots) if snapshots is not None else []
        self._given_snapshots = snapshots is not None
        self._load_lock = threading.Lock()
        self.offers = OffersScreen()
        self.plan_command = DEFAULT_COMMAND
        self.plan_path = "plan.toml"

    def load(self) -> None:
        """Read the profile and the price snapshots once (called from worker threads)."""
        with self._load_lock:
            if self.profile is None:
                self.profile = resolve_profile(self.profile_ref)
            if not self._given_snapshots:
                self.snapshots = load_snapshots(self.prices, warn=self.warn)
                self._given_snapshots = True

    def warn(self, message: str) -> None:
        """A warning the command line prints on stderr (a skipped damaged price snapshot), as a
        notification: Textual hides stderr. Callable from worker threads: ``notify`` posts a
        message, and ``post_message`` hands it to the app's loop thread-safely."""
        self.notify(message, title="price snapshots", severity="warning", timeout=12)

    def on_mount(self) -> None:
        self.push_screen(self.offers)

    # ---- navigation --------------------------------------------------------------------------
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_offers(self) -> None:
        while self.screen is not self.offers and len(self.screen_stack) > 2:
            self.pop_screen()

    def action_runs(self) -> None:
        if isinstance(self.screen, RunsScreen):
            return
        self.action_offers()
        self.push_screen(RunsScreen(refresh_s=self.runs_refresh_s))

    # ---- the plan file -----------------------------------------------------------------------
    def ask_write_plan(self, view: View, index: int) -> None:
        """Ask where to write the plan for row ``index`` (Enter accepts), then write it."""
        row = view.row(index)
        summary = (f"{gpus_label(row.gpu, row.gpu_count, row.nodes)} "
                   f"{row.provider} {row.instance_type} {row.market}: "
                   f"{fmt_usd(row.cost_usd)} in {fmt_hours(row.total_hours)}")

        def chosen(request: WriteRequest | None) -> None:
            if request is None:
                return
            self.plan_command = request.command
            target = Path(request.path).expanduser()
            if target.exists():
                def replace(yes: bool | None) -> None:
                    if yes:
                        self.write_plan(view, index, request)

                self.push_screen(ConfirmScreen(f"{target} exists. Replace it?", yes="Replace"),
                                 replace)
            else:
                self.write_plan(view, index, request)

        self.push_screen(WritePlanScreen(summary, path=self.plan_path,
                                         command=self.plan_command), chosen)

    def write_plan(self, view: View, index: int, request: WriteRequest) -> Path | None:
        try:
            plan = build_plan(view, index, command=request.command,
                              profile_ref=self.profile_ref or "", now=self.now)
            path = save_plan(plan, Path(request.path).expanduser())
        except (GpuCostError, OSError) as err:
            self.notify(f"plan not written: {err}", severity="error", timeout=8)
            return None
        self.plan_path = request.path
        self.notify(f"wrote {path}: {fmt_usd(plan.estimate.cost_usd)} expected, "
                    f"`gpucost launch {request.path}` runs it", title="plan written")
        return path

    # ---- command palette -----------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        offers = self.offers
        yield SystemCommand("Offers", "The ranked plans and the job form", self.action_offers)
        yield SystemCommand("Runs", "Runs and their live status; stop or destroy",
                            self.action_runs)
        yield SystemCommand("Help", "Every key of every screen", self.action_help)
        yield SystemCommand("Plan detail", "Breakdown, scaling curve, break-even of the "
                            "highlighted plan", offers.action_open_detail)
        yield SystemCommand("Write plan file", "Write the highlighted plan as TOML",
                            offers.action_write_plan)
        yield SystemCommand("Edit job", "Epochs or samples, deadline, budget, nodes, filters",
                            offers.action_focus_form)
        yield SystemCommand("Filter by GPU", "Type GPU names, comma-separated",
                            offers.action_filter_gpu)
        yield SystemCommand("Toggle spot", "Allow or forbid spot plans",
                            offers.action_toggle_spot)
        for key, label in (("cost_usd", "$/job"), ("total_hours", "time"),
                           ("usd_per_hour_total", "$/h"), ("risk", "spot risk"),
                           ("price_date", "price date")):
            yield SystemCommand(f"Sort by {label}", f"Order the plans by {label} (again: "
                                "reversed)", lambda key=key: offers.sort_by(key))
        yield SystemCommand("Reverse the order", "The same plans, the other way round",
                            offers.action_reverse_sort)
        if isinstance(screen, RunsScreen):
            yield SystemCommand("Stop run", "Stop the selected run", screen.action_stop)
            yield SystemCommand("Destroy run", "Destroy the selected run's resources",
                                screen.action_down)
