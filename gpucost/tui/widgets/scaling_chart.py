"""The scaling curve over node counts as a text bar chart: one line per node count with its
throughput bar, efficiency, hours and $/job; the knee and the chosen node count are marked."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text
from textual.widgets import Static

from gpucost.format import hours as fmt_hours
from gpucost.format import rate as fmt_rate
from gpucost.format import usd as fmt_usd
from gpucost.planning.scaling import Scaling, curve_note

BLOCKS = " ▏▎▍▌▋▊▉█"  # eighths of a cell


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of ``fraction`` (0..1) of ``width`` cells, in eighths."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (BLOCKS[part] if part else "")).ljust(width)


def render_scaling(scaling: Scaling, chosen: int, unit: str, *, bar_width: int = 16) -> Group:
    top = max(p.throughput for p in scaling.points)
    lines: list[RenderableType] = [
        Text(f"{'nodes':>5} {'throughput':<{bar_width}} {unit + '/s':>8} {'eff':>4} "
             f"{'time':>7} {'$/job':>7}", style="bold")]
    for p in scaling.points:
        marks = []
        if p.nodes == scaling.knee:
            marks.append("◀ knee")
        if p.nodes == scaling.cheapest:
            marks.append("cheapest")
        if p.nodes == chosen:
            marks.append("chosen")
        line = Text(f"{p.nodes:>5} ")
        line.append(bar(p.throughput / top, bar_width),
                    style="green" if scaling.knee is None or p.nodes <= scaling.knee
                    else "yellow")
        line.append(f" {fmt_rate(p.throughput):>8} {p.efficiency:>4.0%} "
                    f"{fmt_hours(p.hours):>7} {fmt_usd(p.cost_usd):>7}")
        if marks:
            line.append(" " + ", ".join(marks), style="bold")
        lines.append(line)
    lines.append(Text(curve_note(scaling), style="dim"))
    return Group(*lines)


class ScalingChart(Static):
    """The plan's scaling curve; a placeholder line until :meth:`show` gets one."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("computing the scaling curve…", id=id)

    def show(self, scaling: Scaling, chosen: int, unit: str) -> None:
        self.update(render_scaling(scaling, chosen, unit))
