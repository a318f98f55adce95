"""The ranked plans as a DataTable: numbers first, so a narrow terminal cuts the text columns.

Clicking a header asks for a sort by that column (again: reversed) through
:class:`OffersTable.SortRequested`; the screen re-sorts in a worker and calls :meth:`show`.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual import on
from textual.message import Message
from textual.widgets import DataTable

from gpucost.format import hours as fmt_hours
from gpucost.format import usd as fmt_usd
from gpucost.tui.session import View

# column key (a ranking column, so also the sort key) -> header label
COLUMNS: tuple[tuple[str, str], ...] = (
    ("cost_usd", "$/job"),
    ("total_hours", "time"),
    ("usd_per_hour_total", "$/h"),
    ("gpu", "GPUs x nodes"),
    ("market", "market"),
    ("risk", "spot risk"),
    ("provider", "provider"),
    ("region", "region"),
    ("instance_type", "instance"),
    ("price_date", "price date"),
)
NUMERIC = frozenset({"cost_usd", "total_hours", "usd_per_hour_total", "risk"})


def gpus_label(gpu: str, count: float, nodes: int) -> str:
    per_node = f"{count:g}x{gpu}"
    return per_node if nodes == 1 else f"{per_node} x{nodes}"


def risk_label(market: str, risk: float) -> str:
    """Probability of at least one interruption over the job; on-demand has none."""
    if market != "spot" or math.isnan(risk):
        return "-"
    return f"{risk:.0%}" if risk >= 0.01 else "<1%"


def _trim(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class OffersTable(DataTable[Text]):
    """One row per plan of the current view; the row key is its index in the view. A star marks
    the plans on the (time, cost) Pareto front: none is both faster and cheaper than them."""

    class SortRequested(Message):
        def __init__(self, column: str) -> None:
            self.column = column
            super().__init__()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def show(self, view: View) -> None:
        """Replace the rows with the view's; the sorted column's header gets an arrow."""
        self.clear(columns=True)
        arrow = "▼" if view.descending else "▲"
        for key, label in COLUMNS:
            self.add_column(label + (arrow if key == view.sort else ""), key=key)
        front = view.on_front
        for i, row in enumerate(view.plans.rows()):
            cells = {
                "cost_usd": fmt_usd(row.cost_usd),
                "total_hours": fmt_hours(row.total_hours),
                "usd_per_hour_total": fmt_usd(row.usd_per_hour_total),
                "gpu": _trim(gpus_label(row.gpu, row.gpu_count, row.nodes), 24),
                "market": row.market,
                "risk": risk_label(row.market, row.risk),
                "provider": row.provider,
                "region": _trim(row.region, 18),
                "instance_type": _trim(row.instance_type, 24),
                "price_date": row.price_date + (" stale" if row.stale else ""),
            }
            self.add_row(*(Text(cells[k], justify="right" if k in NUMERIC else "left")
                           for k, _ in COLUMNS), key=str(i),
                         label=Text("★" if front[i] else " ", style="bold yellow"))

    @property
    def selected_index(self) -> int | None:
        """The view index of the row under the cursor, None when the table is empty."""
        if not self.row_count:
            return None
        return self.cursor_row

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        if event.column_key.value is not None:
            self.post_message(self.SortRequested(event.column_key.value))
