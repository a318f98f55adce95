"""Human and machine renderings of a ranking (rich table, CSV)."""

from __future__ import annotations

import csv
import math
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from gpucost.ranking import Ranking


def fmt_usd(value: float) -> str:
    if math.isnan(value):
        return "-"
    if value >= 100:
        return f"${value:,.0f}"
    return f"${value:,.2f}"


def fmt_hours(hours: float) -> str:
    if math.isnan(hours):
        return "-"
    if hours < 1:
        return f"{hours * 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:.1f} d"


def fmt_rate(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _gpus(gpu: str, count: float, nodes: int) -> str:
    per_node = f"{count:g}x{gpu}"
    return per_node if nodes == 1 else f"{nodes}x({per_node})"


def _market(market: str, risk: float) -> str:
    if market != "spot" or math.isnan(risk):
        return market
    return f"spot {risk:.0%}" if risk >= 0.01 else "spot <1%"


def print_ranking(ranking: Ranking, total: int) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    profile = ranking.profile
    console.print(
        f"[bold]{profile.name}[/]: {profile.throughput:,.1f} {profile.sample_unit}/s on "
        f"{profile.device_count}x {profile.gpu} ({profile.precision}, batch {profile.batch_size}"
        f"/device)  job: {ranking.job.description}"
    )
    by_date: dict[str, list[str]] = {}
    for src in ranking.sources:
        label = src["source"] + (" [red](stale)[/]" if src["stale"] else "")
        by_date.setdefault(src["date"], []).append(label)
    dates = "; ".join(f"{', '.join(names)} dated {date}" for date, names in sorted(by_date.items()))
    console.print(f"prices: {dates}", highlight=False)
    c = ranking.columns
    table = Table(pad_edge=False, header_style="bold", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0))
    # Numbers first: on a narrow terminal the text columns at the right are the ones shortened.
    wide = console.width >= 110
    if wide:
        table.add_column("#", justify="right", no_wrap=True)
    table.add_column("$/job", justify="right", style="bold", no_wrap=True, min_width=6)
    table.add_column("time", justify="right", no_wrap=True, min_width=6)
    table.add_column("$/h", justify="right", no_wrap=True, min_width=6)
    table.add_column("GPUs", no_wrap=True, overflow="ellipsis", min_width=8, max_width=22)
    table.add_column("market", no_wrap=True, overflow="ellipsis", min_width=8, max_width=9)
    if wide:
        table.add_column(f"{profile.sample_unit}/s", justify="right", no_wrap=True)
    for name, width in (("provider", 9), ("region", 16), ("instance", 22)):
        table.add_column(name, no_wrap=True, overflow="ellipsis", min_width=3, max_width=width)
    for i in range(len(ranking)):
        rank = [str(i + 1)] if wide else []
        rate = [fmt_rate(float(c["throughput"][i]))] if wide else []
        table.add_row(
            *rank,
            fmt_usd(float(c["cost_usd"][i])),
            fmt_hours(float(c["total_hours"][i])),
            fmt_usd(float(c["usd_per_hour_total"][i])),
            _gpus(str(c["gpu"][i]), float(c["gpu_count"][i]), int(c["nodes"][i])),
            _market(str(c["market"][i]), float(c["risk"][i])),
            *rate,
            str(c["provider"][i]),
            str(c["region"][i]),
            str(c["instance_type"][i]),
        )
    console.print(table)
    key = "$/job" if ranking.sort == "cost" else "time"
    console.print(
        f"{len(ranking)} of {total:,} plans shown, ranked by {key}. "
        "$/h covers all nodes; time includes setup; $/job is the expected total "
        "(spot: with expected interruptions; % = chance of at least one).",
        highlight=False,
    )
    for note in ranking.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def write_csv(ranking: Ranking, out: TextIO) -> None:
    names = list(ranking.columns)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    for row in ranking.records():
        writer.writerow(["" if row[k] is None else row[k] for k in names])
