"""Human and machine renderings of a ranking (rich table, CSV)."""

from __future__ import annotations

import csv
import math
from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from gpucost.format import hours, rate, usd
from gpucost.planning.plans import Plans
from gpucost.planning.ranking import Ranking
from gpucost.terminal import rich_text


def _gpus(gpu: str, count: float, nodes: int) -> str:
    per_node = f"{count:g}x{gpu}"
    return per_node if nodes == 1 else f"{nodes}x({per_node})"


def _market(market: str, risk: float) -> str:
    if market != "spot" or math.isnan(risk):
        return market
    return f"spot {risk:.0%}" if risk >= 0.01 else "spot <1%"


class _Console(Console):
    """rich's console, but a reader that stops early is no failure: rich exits 1 on a broken
    pipe, which gpucost documents as a violated policy; the command line ends with 0."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def print_ranking(ranking: Ranking, total: int, *, show_unfit: bool = False) -> None:
    console = _Console()
    profile = ranking.profile
    console.print(
        f"[bold]{rich_text(profile.name)}[/]: {profile.throughput:,.1f} "
        f"{rich_text(profile.sample_unit)}/s on {profile.device_count}x {rich_text(profile.gpu)} "
        f"({profile.precision}, batch {profile.batch_size}/device)  "
        f"job: {rich_text(ranking.job.description)}"
    )
    by_date: dict[str, list[str]] = {}
    for src in ranking.sources:
        label = rich_text(src.source) + (" [red](stale)[/]" if src.stale else "")
        by_date.setdefault(src.date, []).append(label)
    dates = "; ".join(f"{', '.join(names)} dated {date}" for date, names in sorted(by_date.items()))
    console.print(f"prices: {dates}", highlight=False)
    wide = console.width >= 110

    def table_of(plans: Plans, first: int = 1) -> Table:
        table = Table(pad_edge=False, header_style="bold", box=box.SIMPLE_HEAD,
                      padding=(0, 1, 0, 0))
        rows = list(plans.rows())
        costs = [usd(row.cost_usd) for row in rows]
        hourly = [usd(row.usd_per_hour_total) for row in rows]
        # Numbers first, never cut: on a narrow terminal the text columns at the right are
        # shortened (money under a dollar has three significant digits: "$0.0143").
        if wide:
            table.add_column("#", justify="right", no_wrap=True)
        table.add_column("$/job", justify="right", style="bold", no_wrap=True,
                         min_width=max([6, *map(len, costs)]))
        table.add_column("time", justify="right", no_wrap=True, min_width=6)
        table.add_column("$/h", justify="right", no_wrap=True,
                         min_width=max([6, *map(len, hourly)]))
        table.add_column("GPUs", no_wrap=True, overflow="ellipsis", min_width=8, max_width=22)
        table.add_column("market", no_wrap=True, overflow="ellipsis", min_width=8, max_width=9)
        if wide:
            table.add_column(f"{rich_text(profile.sample_unit)}/s", justify="right",
                             no_wrap=True)
        for name, width in (("provider", 9), ("region", 16), ("instance", 22)):
            table.add_column(name, no_wrap=True, overflow="ellipsis", min_width=3,
                             max_width=width)
        for i, row in enumerate(rows):
            number = [str(i + first)] if wide else []
            speed = [rate(row.throughput)] if wide else []
            table.add_row(
                *number,
                costs[i],
                hours(row.total_hours),
                hourly[i],
                _gpus(row.gpu, row.gpu_count, row.nodes),
                _market(row.market, row.risk),
                *speed,
                rich_text(row.provider),
                rich_text(row.region),
                rich_text(row.instance_type),
            )
        return table

    console.print(table_of(ranking.plans))
    key = "$/job" if ranking.sort == "cost" else "time"
    console.print(
        f"{len(ranking)} of {total:,} plans shown, ranked by {key}. "
        "$/h covers all nodes; time includes setup; $/job is the expected total "
        "(spot: with expected interruptions; % = chance of at least one).",
        highlight=False,
    )
    if show_unfit and len(ranking.unfit):
        console.print("[bold]left out[/]: the per-device batch fits these GPUs no way",
                      highlight=False)
        console.print(table_of(ranking.unfit))
        for note in sorted(set(ranking.unfit.memory_note.tolist())):
            console.print(f"  {rich_text(note)}", highlight=False)
    for note in ranking.notes:
        console.print(f"[yellow]note:[/] {rich_text(note)}", highlight=False)


def write_csv(plans: Plans, out: TextIO, *, header: bool = True) -> None:
    columns = plans.columns()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(list(columns))
    for record in plans.records():
        writer.writerow(["" if value is None else value for value in record.values()])
