"""A plan's columns, each declared once, with its unit.

:class:`PlanColumns` is the one declaration. :class:`gpucost.planning.plans.Plans` (the columns
as numpy arrays) and :class:`gpucost.planning.plans.PlanRow` (one plan, typed) are its two
specialisations; :data:`PLAN_UNITS` (the units table of ``compare --format json``), the JSON
and CSV column names (:data:`PLAN_COLUMNS`) and the JSON Schema of a plan (:func:`plan_schema`)
are read off its fields. Adding a column is one line here (and computing it in
:mod:`gpucost.planning.ranking`); a cost term is one line in
:class:`gpucost.model.economics.CostTerms`, which the plan takes in whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic

from gpucost.columns import (
    Bool,
    ColumnSpec,
    Float,
    Int,
    Text,
    column,
    columns_of,
    row_schema,
    units,
)
from gpucost.model.economics import CostTerms, ExpectedCost


@dataclass(frozen=True)
class _Offer(Generic[Float, Int, Text]):
    """What the plan is: an offer x a market x a node count, and how fast it runs the job."""

    __slots__ = ()
    provider: Text = column("")
    region: Text = column("")
    zone: Text = column("")
    instance_type: Text = column("")
    gpu: Text = column("")
    gpu_count: Float = column("GPUs per node")
    nodes: Int = column("nodes")
    market: Text = column("on-demand|spot")
    price_hr: Float = column("USD/h per node")
    throughput: Float = column("samples/s (whole group)")
    hours: Float = column("h (compute)")


@dataclass(frozen=True)
class _CostBand(Generic[Float]):
    """The expected cost's band, from the throughput's error band (gpucost.model.bands)."""

    __slots__ = ()
    cost_low_usd: Float = column(
        "USD (the throughput's error band, high end: about 1 in 10 lower)")
    cost_high_usd: Float = column(
        "USD (the throughput's error band, low end: about 1 in 10 higher)")


@dataclass(frozen=True)
class _Running(Generic[Float, Int, Bool, Text]):
    """How the group runs (fabric, memory plan) and where its prices come from."""

    __slots__ = ()
    usd_per_hour_total: Float = column("USD/h (all nodes)")
    efficiency: Float = column("fraction of linear scaling")
    inter_node_fabric: Text = column("what a multi-node plan's nodes talk over ('' on one node)")
    gpu_memory_gb: Float = column("GB per GPU")
    peak_gb: Float = column("GB predicted peak per GPU (null: unknown)")
    micro_batch: Int = column("samples per device per micro-step")
    grad_accum_steps: Int = column("micro-steps per optimizer step")
    sharding: Text = column("'' (data parallel), ZeRO-2 or FSDP")
    memory_note: Text = column("how the batch was made to fit ('' when it fits as is)")
    price_date: Text = column("date of the price data")
    source: Text = column("price snapshot source")
    stale: Bool = column("price data older than the threshold")


@dataclass(frozen=True)
class PlanColumns(
    _Running[Float, Int, Bool, Text],
    CostTerms[Float, Bool, Text],
    _CostBand[Float],
    ExpectedCost[Float],
    _Offer[Float, Int, Text],
    Generic[Float, Int, Bool, Text],
):
    """Every column of a plan, in output order: the dataclass fields of the bases from the last
    one listed to the first (the cost model's own columns sit in their place)."""

    __slots__ = ()


PLAN_COLUMN_SPECS: tuple[ColumnSpec, ...] = columns_of(PlanColumns)
# The names of a plan's columns in JSON, CSV and DataFrames, in order.
PLAN_COLUMNS: tuple[str, ...] = tuple(c.json_name for c in PLAN_COLUMN_SPECS)
# The plan table's columns and their units, in output order.
PLAN_UNITS: dict[str, str] = units(PlanColumns)


def plan_schema() -> dict[str, Any]:
    """The JSON Schema of one plan in ``gpucost compare --format json``."""
    return row_schema(PlanColumns, "One plan: an offer x a market x a node count, costed for "
                      "the job. Numbers that are not finite are null.")
