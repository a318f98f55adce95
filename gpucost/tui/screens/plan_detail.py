"""Plan detail: one plan's $/job breakdown, its scaling curve over node counts with the knee,
stop-vs-destroy break-even after the job, and what spot is expected to cost; `w` writes it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar, cast

from rich.table import Table
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from gpucost.errors import GpuCostError
from gpucost.format import hours as fmt_hours
from gpucost.format import rate as fmt_rate
from gpucost.format import usd as fmt_usd
from gpucost.model.economics import Breakeven
from gpucost.planning.plans import PlanRow
from gpucost.planning.reasons import estimate_terms
from gpucost.planning.scaling import Scaling
from gpucost.tui.session import View, plan_breakeven, plan_scaling
from gpucost.tui.widgets.offers_table import gpus_label
from gpucost.tui.widgets.scaling_chart import ScalingChart

if TYPE_CHECKING:
    from gpucost.tui.app import GpuCostApp

TERMS = (("compute_usd", "compute"), ("setup_usd", "setup (provisioning, data download)"),
         ("storage_usd", "disk"), ("ingress_usd", "data in"),
         ("egress_usd", "checkpoints and results out"), ("checkpoint_usd", "checkpoint writes"),
         ("spot_rework_usd", "spot rework (expected)"))


def summary(row: PlanRow, unit: str) -> str:
    memory = "" if math.isnan(row.peak_gb) else (
        f"; predicted peak memory {row.peak_gb:.1f} of {row.gpu_memory_gb:g} GB per GPU"
        + (f" ({row.memory_note})" if row.memory_note else ""))
    return (f"[b]{gpus_label(row.gpu, row.gpu_count, row.nodes)}[/] "
            f"{row.provider} {row.instance_type} · {row.region}"
            f"{' ' + row.zone if row.zone else ''} · {row.market} "
            f"{fmt_usd(row.price_hr)}/h per node ({row.source}, {row.price_date})\n"
            f"[b]{fmt_usd(row.cost_usd)}[/] expected for the job in "
            f"[b]{fmt_hours(row.total_hours)}[/] at {fmt_rate(row.throughput)} {unit}/s "
            f"({row.efficiency:.0%} of linear scaling){memory}")


def breakdown_table(row: PlanRow) -> Table:
    table = Table(show_header=False, box=None, padding=(0, 1), title="$/job breakdown",
                  title_justify="left", title_style="bold")
    table.add_column(justify="right")
    table.add_column()
    total = row.cost_usd
    terms = estimate_terms(row)
    for key, label in TERMS:
        value = terms[key]
        if value < 0.005 and key != "compute_usd":  # shows as $0.00: noise
            continue
        share = f"{value / total:.0%}" if total > 0 else ""
        table.add_row(fmt_usd(value), f"{label} {share}")
    table.add_row(f"[b]{fmt_usd(total)}[/]", "[b]total, expected[/]")
    return table


def breakeven_text(be: Breakeven) -> str:
    return (f"[b]After the job: stop or destroy?[/] {be.disk_gb:g} GB of disk at "
            f"${be.storage_usd_gb_month:g}/GB-month bills ${be.stopped_usd_hr:.4f}/h stopped; "
            f"a rebuild costs {fmt_usd(be.rebuild_usd)}.\n{be.advice()}")


def spot_text(row: PlanRow) -> str:
    if row.market != "spot":
        rate = row.interruption_rate
        return ("[b]Spot:[/] this plan is on-demand: not interrupted"
                + (f" (host reliability implies {rate:.3f} outages/h)" if rate > 0 else "")
                + ". Allow spot in the job form to compare.")
    interval = row.checkpoint_interval_hours
    ckpt = ("no checkpoints: an interruption restarts the job" if math.isnan(interval)
            else f"checkpoint every {fmt_hours(interval)} (Young/Daly)")
    return (f"[b]Spot:[/] {row.interruption_rate:.3f} interruptions per node-hour "
            f"({row.rate_source}); {row.interruptions:.2f} expected over the job, "
            f"{row.risk:.0%} chance of at least one; {ckpt}. Expected rework "
            f"{fmt_usd(row.spot_rework_usd)}; worst case {fmt_usd(row.worst_usd)} "
            "(interrupted just before a checkpoint, finished on-demand).")


class PlanDetailScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("w", "write_plan", "Write plan"),
        Binding("escape,backspace", "back", "Back"),
    ]

    def __init__(self, view: View, index: int) -> None:
        super().__init__()
        self.view = view
        self.index = index
        self.row = view.row(index)

    @property
    def gpucost(self) -> GpuCostApp:
        return cast("GpuCostApp", self.app)

    def compose(self) -> ComposeResult:
        unit = self.view.profile.sample_unit
        yield Header()
        with VerticalScroll(id="detail"):
            yield Static(summary(self.row, unit), id="detail-summary")
            yield Static(breakdown_table(self.row), id="detail-breakdown")
            yield Static("[b]Scaling over node counts[/]", classes="section")
            yield ScalingChart(id="detail-scaling")
            yield Static("", id="detail-breakeven")
            yield Static(spot_text(self.row), id="detail-spot")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"plan {self.index + 1} of {self.view.meeting:,}"
        self._compute()

    @work(thread=True, exclusive=True, group="detail")
    def _compute(self) -> None:
        app = self.gpucost
        try:
            be = plan_breakeven(self.row, app.params)
            scaling = plan_scaling(self.view, self.index)
        except GpuCostError as err:
            app.call_from_thread(self._failed, str(err))
            return
        app.call_from_thread(self._show, be, scaling)

    def _show(self, be: Breakeven, scaling: Scaling) -> None:
        unit = self.view.profile.sample_unit
        self.query_one(ScalingChart).show(scaling, self.row.nodes, unit)
        self.query_one("#detail-breakeven", Static).update(breakeven_text(be))

    def _failed(self, error: str) -> None:
        self.query_one(ScalingChart).update(f"[b red]error:[/] {error}")

    def action_write_plan(self) -> None:
        self.gpucost.ask_write_plan(self.view, self.index)

    def action_back(self) -> None:
        self.dismiss(None)
