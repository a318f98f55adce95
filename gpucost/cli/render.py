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
    per_node = f"{count:g}x {gpu}"
    return per_node if nodes == 1 else f"{nodes}x({per_node})"


def print_ranking(ranking: Ranking, total: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    profile = ranking.profile
    console.print(
        f"[bold]{profile.name}[/]: {profile.throughput:,.1f} {profile.sample_unit}/s on "
        f"{profile.device_count}x {profile.gpu} ({profile.precision}, batch {profile.batch_size}"
        f"/device)  job: {ranking.job.description}"
    )
    dates = ", ".join(f"{s['source']} {s['date']}" + (" [red](stale)[/]" if s["stale"] else "")
                      for s in ranking.sources)
    console.print(f"prices: {dates}", highlight=False)
    c = ranking.columns
    table = Table(show_lines=False, pad_edge=False, header_style="bold")
    table.add_column("#", justify="right")
    table.add_column("provider")
    table.add_column("region")
    table.add_column("instance")
    table.add_column("GPUs")
    table.add_column("market")
    table.add_column("$/h", justify="right")
    table.add_column(f"{profile.sample_unit}/s", justify="right")
    table.add_column("time", justify="right")
    table.add_column("$/job", justify="right", style="bold")
    for i in range(len(ranking)):
        table.add_row(
            str(i + 1), str(c["provider"][i]), str(c["region"][i]), str(c["instance_type"][i]),
            _gpus(str(c["gpu"][i]), float(c["gpu_count"][i]), int(c["nodes"][i])),
            str(c["market"][i]), fmt_usd(float(c["usd_per_hour_total"][i])),
            fmt_rate(float(c["throughput"][i])), fmt_hours(float(c["hours"][i])),
            fmt_usd(float(c["cost_usd"][i])),
        )
    console.print(table)
    key = "$/job" if ranking.sort == "cost" else "time"
    console.print(f"{len(ranking)} of {total:,} plans shown, ranked by {key}. "
                  "$/h covers all nodes; $/job is the expected total for the job.",
                  highlight=False)
    for note in ranking.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def write_csv(ranking: Ranking, out: TextIO) -> None:
    names = list(ranking.columns)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    for row in ranking.records():
        writer.writerow(["" if row[k] is None else row[k] for k in names])
