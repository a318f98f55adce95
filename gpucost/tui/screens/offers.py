"""Offers: the ranked plans for the current profile and job, re-ranked as the side form changes.

Loading the snapshots and ranking run in a thread worker (exclusive: a newer request supersedes
an older one, whose result is dropped), so typing in the form never freezes the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from gpucost.errors import GpuCostError
from gpucost.format import hours as fmt_hours
from gpucost.format import usd as fmt_usd
from gpucost.tui.screens.plan_detail import PlanDetailScreen
from gpucost.tui.session import (
    BEST_FIRST_DESCENDING,
    SORTABLE,
    JobInputs,
    View,
    rank_view,
    resort,
)
from gpucost.tui.widgets.job_form import JobForm
from gpucost.tui.widgets.offers_table import COLUMNS, OffersTable

if TYPE_CHECKING:
    from gpucost.tui.app import GpuCostApp

SORT_LABELS = dict(COLUMNS)


class OffersScreen(Screen[None]):
    AUTO_FOCUS = "#offers-table"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("w", "write_plan", "Write plan"),
        Binding("f", "focus_form", "Job"),
        Binding("s", "next_sort", "Sort"),
        Binding("S", "reverse_sort", "Reverse", show=False),
        Binding("x", "toggle_spot", "Spot", show=False),
        Binding("slash", "filter_gpu", "GPU filter", show=False),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.view: View | None = None
        self.sort = "cost_usd"
        self.descending = False
        self._generation = 0  # the newest ranking request; older results are dropped

    @property
    def gpucost(self) -> GpuCostApp:
        return cast("GpuCostApp", self.app)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield JobForm(self.gpucost.inputs, id="job-form")
            with Vertical(id="offers-main"):
                yield OffersTable(id="offers-table")
                yield Static("loading prices and the profile…", id="offers-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(OffersTable).loading = True
        self.request_ranking()

    # ---- ranking ---------------------------------------------------------------------------
    def request_ranking(self) -> None:
        self._generation += 1
        self.sub_title = "ranking…"  # cleared when the newest result arrives
        self._rank(self.gpucost.inputs, self.sort, self.descending, self._generation)

    @work(thread=True, exclusive=True, group="rank")
    def _rank(self, inputs: JobInputs, sort: str, descending: bool, generation: int) -> None:
        app = self.gpucost
        try:
            app.load()
            assert app.profile is not None
            view = rank_view(app.profile, app.snapshots, inputs, sort=sort,
                             descending=descending, now=app.now, params=app.params)
        except GpuCostError as err:
            app.call_from_thread(self._failed, str(err), generation)
            return
        app.call_from_thread(self._show, view, generation)

    def _show(self, view: View, generation: int) -> None:
        if generation != self._generation:
            return
        self.sub_title = "plans ranked by $/job"
        self.view = view
        table = self.query_one(OffersTable)
        table.loading = False
        table.show(view)
        self._set_epochs_placeholder()
        self.query_one("#offers-status", Static).update(self._status(view))

    def _failed(self, error: str, generation: int) -> None:
        if generation != self._generation:
            return
        self.sub_title = "plans ranked by $/job"
        self.query_one(OffersTable).loading = False
        self.query_one("#offers-status", Static).update(f"[b red]error:[/] {error}")

    def _set_epochs_placeholder(self) -> None:
        profile = self.gpucost.profile
        if profile is not None and profile.epochs:
            self.query_one("#job-epochs", Input).placeholder = f"{profile.epochs:g}"

    def _status(self, view: View) -> str:
        r = view.advice.ranking
        arrow = "▼" if view.descending else "▲"
        dates = ", ".join(sorted({s.date for s in r.sources}))
        constraints = []
        if view.inputs.deadline_hours is not None:
            constraints.append(f"≤ {fmt_hours(view.inputs.deadline_hours)}")
        if view.inputs.budget_usd is not None:
            constraints.append(f"≤ {fmt_usd(view.inputs.budget_usd)}")
        meets = f" meet {' and '.join(constraints)}" if constraints else ""
        if view.too_small:
            meets += f" ({view.too_small:,} left out: the batch does not fit their GPU memory)"
        first = f" (first {len(view.plans)} shown)" if len(view.plans) < view.meeting else ""
        lines = [f"[b]{r.profile.name}[/] · {r.job.description}",
                 f"{view.meeting:,} of {view.total_plans:,} plans{meets}{first} · by "
                 f"{SORT_LABELS[view.sort]} {arrow} · prices {dates}"]
        # what to relax comes first: it is the only thing to read when the table is empty
        warnings = ([f"[b yellow]{view.message}[/]"] if view.message else []) + \
            [f"[yellow]{note}[/]" for note in r.notes]
        return "\n".join(warnings + lines)

    # ---- form and table events -------------------------------------------------------------
    @on(JobForm.Changed)
    def _inputs_changed(self, event: JobForm.Changed) -> None:
        self.gpucost.inputs = event.inputs
        self.request_ranking()

    @on(JobForm.Invalid)
    def _inputs_invalid(self, event: JobForm.Invalid) -> None:
        self._generation += 1  # a result for the previous values would mislead
        self.sub_title = "plans ranked by $/job"
        self.query_one("#offers-status", Static).update(f"[b red]{event.error}[/]")

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.query_one(OffersTable).focus()

    @on(OffersTable.SortRequested)
    def _sort_requested(self, event: OffersTable.SortRequested) -> None:
        self.sort_by(event.column)

    @on(OffersTable.RowSelected)
    def _row_selected(self, event: OffersTable.RowSelected) -> None:
        self.action_open_detail()

    # ---- actions (keys and the command palette) --------------------------------------------
    def sort_by(self, column: str) -> None:
        """Sort by ``column``; the same column again reverses the order."""
        if column not in SORTABLE:
            self.notify(f"cannot sort by {SORT_LABELS.get(column, column)}", severity="warning")
            return
        if column == self.sort:
            self.descending = not self.descending
        else:
            self.sort, self.descending = column, column in BEST_FIRST_DESCENDING
        view = self.view
        if view is not None and view.inputs == self.gpucost.inputs:
            # same plans, new order: no need to rank again
            self._generation += 1
            self._show(resort(view, self.sort, self.descending), self._generation)
        else:
            self.request_ranking()

    def action_next_sort(self) -> None:
        keys = [k for k, _ in COLUMNS if k in SORTABLE]
        self.sort_by(keys[(keys.index(self.sort) + 1) % len(keys)] if self.sort in keys
                     else keys[0])

    def action_reverse_sort(self) -> None:
        self.sort_by(self.sort)

    def action_toggle_spot(self) -> None:
        self.query_one(JobForm).set_spot(not self.gpucost.inputs.spot)

    def action_focus_form(self) -> None:
        self.query_one("#job-epochs", Input).focus()

    def action_filter_gpu(self) -> None:
        self.query_one("#job-gpu", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one(OffersTable).focus()

    def selected(self) -> tuple[View, int] | None:
        index = self.query_one(OffersTable).selected_index
        if self.view is None or index is None:
            self.notify("no plan selected: relax the job's constraints", severity="warning")
            return None
        return self.view, index

    def action_open_detail(self) -> None:
        chosen = self.selected()
        if chosen is not None:
            self.app.push_screen(PlanDetailScreen(*chosen))

    def action_write_plan(self) -> None:
        chosen = self.selected()
        if chosen is not None:
            self.gpucost.ask_write_plan(*chosen)
