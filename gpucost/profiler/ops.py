"""The per-operator table: time from torch.profiler, FLOPs and bytes from the census.

torch.profiler runs for a few dedicated steps only. Each ATen operator's self time (device
time on CUDA, CPU time on CPU) is divided by the number of traced steps; FLOPs and bytes moved
per step come from the :class:`~gpucost.profiler.flops.OpCensus` step, joined by operator name.
The performance model translates each row to another GPU by its arithmetic intensity
(FLOPs / bytes) against that GPU's ridge point.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpucost.profile import OperatorStat

MAX_ROWS = 40  # the long tail of a step is dozens of sub-microsecond operators


def operator_table(averages: Iterable[Any], *, steps: int, on_device: bool,
                   flops: dict[str, float], bytes_moved: dict[str, float],
                   max_rows: int | None = MAX_ROWS) -> tuple[OperatorStat, ...]:
    """Rows for ``aten::`` operators of ``prof.key_averages()``, per step, slowest first.

    ``steps`` is the number of steps the trace covered; ``on_device`` picks device self time
    (CUDA kernels) over CPU self time.
    """
    rows: list[OperatorStat] = []
    for avg in averages:
        name = str(avg.key)
        if not name.startswith("aten::"):
            continue
        self_us = avg.self_device_time_total if on_device else avg.self_cpu_time_total
        time_s = float(self_us) * 1e-6 / steps
        if time_s <= 0.0:
            continue
        rows.append(OperatorStat(
            name=name,
            calls=max(1, round(int(avg.count) / steps)),
            time_s=time_s,
            flops=flops.get(name, 0.0),
            bytes_moved=bytes_moved.get(name, 0.0),
        ))
    rows.sort(key=lambda r: r.time_s, reverse=True)
    return tuple(rows[:max_rows])
