"""Ranked plans as typed columns (:class:`Plans`) and one plan as a typed row (:class:`PlanRow`).

A plan is an offer x a market x a node count. The columns stay numpy arrays (a ranking holds up
to a million plans), but each is a named field, so a misspelt column is a type error, not a
KeyError at run time. Text columns are object arrays: every row of one offer shares its
strings instead of holding a fixed-width copy. Both are :class:`PlanColumns`, the one
declaration of a plan's columns and units (:mod:`gpucost.planning.columns`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucost.planning.columns import PLAN_COLUMN_SPECS, PLAN_COLUMNS, PLAN_UNITS, PlanColumns

__all__ = ["PLAN_COLUMNS", "PLAN_UNITS", "PlanRow", "Plans"]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Texts = npt.NDArray[np.object_]

# (field name, JSON name) of each column, in output order
_NAMES = tuple((c.name, c.json_name) for c in PLAN_COLUMN_SPECS)


@dataclass(frozen=True, slots=True)
class PlanRow(PlanColumns[float, int, bool, str]):
    """One plan. Field names and units are those of :data:`PLAN_UNITS`."""

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
        for name, json_name in _NAMES:
            value = getattr(self, name)
            out[json_name] = (
                None if isinstance(value, float) and not math.isfinite(value) else value)
        return out


@dataclass(frozen=True, slots=True)
class Plans(PlanColumns[Floats, Ints, Bools, Texts]):
    """Plans as columns: field ``x`` holds every plan's ``PlanRow.x``."""

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
        return {json_name: getattr(self, name) for name, json_name in _NAMES}
