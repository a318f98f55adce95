"""Ranked plans as typed columns (:class:`Plans`) and one plan as a typed row (:class:`PlanRow`).

A plan is an offer x a market x a node count. The columns stay numpy arrays (a ranking holds up
to a million plans), but each is a named field, so a misspelt column is a type error, not a
KeyError at run time. Text columns are object arrays: every row of one offer shares its
strings instead of holding a fixed-width copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucost.model.economics import COST_UNITS

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Texts = npt.NDArray[np.object_]


@dataclass(frozen=True, slots=True)
class PlanRow:
    """One plan. Field names and units are those of :data:`PLAN_UNITS`."""

    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str
    gpu_count: float
    nodes: int
    market: str
    price_hr: float
    throughput: float
    hours: float
    cost_usd: float
    cost_low_usd: float
    cost_high_usd: float
    total_hours: float
    setup_hours: float
    setup_minutes: float
    setup_source: str
    compute_usd: float
    setup_usd: float
    storage_usd: float
    egress_usd: float
    ingress_usd: float
    checkpoint_usd: float
    spot_rework_usd: float
    disk_gb: float
    interruption_rate: float
    rate_source: str
    checkpoint_interval_hours: float
    interruptions: float
    risk: float
    worst_usd: float
    on_demand_hr: float
    storage_gb_month: float
    month_hours: float
    egress_gb: float
    ingress_gb: float
    download_gbps: float
    storage_price_assumed: bool
    bandwidth_assumed: bool
    usd_per_hour_total: float
    efficiency: float
    inter_node_fabric: str
    gpu_memory_gb: float
    peak_gb: float
    micro_batch: int
    grad_accum_steps: int
    sharding: str
    memory_note: str
    price_date: str
    source: str
    stale: bool

    def label(self) -> str:
        """"2 x aws p3.8xlarge (us-east-1), 4x V100 per node, spot"."""
        where = f"{self.provider} {self.instance_type}" + (
            f" ({self.region})" if self.region else "")
        group = f"{self.nodes} x {where}" if self.nodes > 1 else where
        per_node = " per node" if self.nodes > 1 else ""
        return f"{group}, {self.gpu_count:g}x {self.gpu}{per_node}, {self.market}"

    def record(self) -> dict[str, Any]:
        """JSON-ready, keyed as :data:`PLAN_UNITS`: NaN and infinities become None."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[OUTPUT_NAMES.get(f.name, f.name)] = (
                None if isinstance(value, float) and not math.isfinite(value) else value)
        return out


@dataclass(frozen=True, slots=True)
class Plans:
    """Plans as columns: field ``x`` holds every plan's ``PlanRow.x``."""

    provider: Texts
    region: Texts
    zone: Texts
    instance_type: Texts
    gpu: Texts
    gpu_count: Floats
    nodes: Ints
    market: Texts
    price_hr: Floats
    throughput: Floats
    hours: Floats
    cost_usd: Floats
    cost_low_usd: Floats
    cost_high_usd: Floats
    total_hours: Floats
    setup_hours: Floats
    setup_minutes: Floats
    setup_source: Texts
    compute_usd: Floats
    setup_usd: Floats
    storage_usd: Floats
    egress_usd: Floats
    ingress_usd: Floats
    checkpoint_usd: Floats
    spot_rework_usd: Floats
    disk_gb: Floats
    interruption_rate: Floats
    rate_source: Texts
    checkpoint_interval_hours: Floats
    interruptions: Floats
    risk: Floats
    worst_usd: Floats
    on_demand_hr: Floats
    storage_gb_month: Floats
    month_hours: Floats
    egress_gb: Floats
    ingress_gb: Floats
    download_gbps: Floats
    storage_price_assumed: Bools
    bandwidth_assumed: Bools
    usd_per_hour_total: Floats
    efficiency: Floats
    inter_node_fabric: Texts
    gpu_memory_gb: Floats
    peak_gb: Floats
    micro_batch: Ints
    grad_accum_steps: Ints
    sharding: Texts
    memory_note: Texts
    price_date: Texts
    source: Texts
    stale: Bools

    def __len__(self) -> int:
        return len(self.cost_usd)

    def take(self, index: npt.ArrayLike) -> Plans:
        """The plans at ``index`` (integer indices or a boolean mask), in that order."""
        idx = np.asarray(index)
        return replace(self, **{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def row(self, i: int) -> PlanRow:
        values = {}
        for f in fields(self):
            value = getattr(self, f.name)[i]
            values[f.name] = value.item() if isinstance(value, np.generic) else value
        return PlanRow(**values)

    def rows(self) -> list[PlanRow]:
        return [self.row(i) for i in range(len(self))]

    def records(self) -> list[dict[str, Any]]:
        return [row.record() for row in self.rows()]

    @classmethod
    def concat(cls, parts: list[Plans]) -> Plans:
        return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts])
                      for f in fields(cls)})

    def columns(self) -> dict[str, np.ndarray]:
        """Name -> column, for the edges that want a table (a DataFrame, a CSV), named as
        :data:`PLAN_UNITS`."""
        return {OUTPUT_NAMES.get(f.name, f.name): getattr(self, f.name) for f in fields(self)}


# What a plan's outputs (JSON, CSV, DataFrame) call the fields whose own name hides their unit:
# egress_gb and ingress_gb are the offer's prices per GB (the price snapshots' column names), not
# the GB moved, which a reader of "egress_gb": 0.09 takes them for.
OUTPUT_NAMES: dict[str, str] = {"egress_gb": "egress_usd_per_gb",
                                "ingress_gb": "ingress_usd_per_gb"}

# The plan table's columns and their units, in output order (the fields of PlanRow, named as
# in OUTPUT_NAMES).
PLAN_UNITS: dict[str, str] = {OUTPUT_NAMES.get(name, name): unit for name, unit in {
    "provider": "",
    "region": "",
    "zone": "",
    "instance_type": "",
    "gpu": "",
    "gpu_count": "GPUs per node",
    "nodes": "nodes",
    "market": "on-demand|spot",
    "price_hr": "USD/h per node",
    "throughput": "samples/s (whole group)",
    "hours": "h (compute)",
    "cost_usd": "USD (expected, whole job)",
    "cost_low_usd": "USD (the throughput's error band, high end: about 1 in 10 lower)",
    "cost_high_usd": "USD (the throughput's error band, low end: about 1 in 10 higher)",
    **COST_UNITS,
    "usd_per_hour_total": "USD/h (all nodes)",
    "efficiency": "fraction of linear scaling",
    "inter_node_fabric": "what a multi-node plan's nodes talk over ('' on one node)",
    "gpu_memory_gb": "GB per GPU",
    "peak_gb": "GB predicted peak per GPU (null: unknown)",
    "micro_batch": "samples per device per micro-step",
    "grad_accum_steps": "micro-steps per optimizer step",
    "sharding": "'' (data parallel), ZeRO-2 or FSDP",
    "memory_note": "how the batch was made to fit ('' when it fits as is)",
    "price_date": "date of the price data",
    "source": "price snapshot source",
    "stale": "price data older than the threshold",
}.items()}
