"""What the TUI computes, without any Textual: the job form's inputs, the ranking they select,
one plan's scaling curve and break-even, and the plan file for a chosen row.

Kept apart from the widgets so that the screens stay thin and this logic is tested directly.
Everything here is numpy over :mod:`gpucost.planning` plans; it runs in worker threads.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucost.errors import InputError
from gpucost.model.economics import Breakeven, JobParams, breakeven
from gpucost.planfile import Plan
from gpucost.planning.advice import Advice, Choice, advise
from gpucost.planning.planbuild import to_plan
from gpucost.planning.plans import PlanRow, Plans
from gpucost.planning.request import EconomicsArgs, Request, RequestArgs
from gpucost.planning.scaling import SCALING_MAX_NODES, Scaling, scaling_curve
from gpucost.pricing.snapshot import Snapshot
from gpucost.profile import Profile

# Plan columns the offers table can be sorted by; the throughput sorts best (highest) first.
SORTABLE: tuple[str, ...] = ("cost_usd", "total_hours", "usd_per_hour_total", "gpu", "market",
                             "risk", "throughput", "provider", "region", "instance_type",
                             "price_date")
BEST_FIRST_DESCENDING = frozenset({"throughput"})
MAX_ROWS = 100  # rows handed to the table: it measures every cell on a refresh (~1 ms a row)
DEFAULT_COMMAND = "python train.py"


@dataclass(frozen=True)
class JobInputs:
    """The side form's values. ``None`` means "not given"."""

    epochs: float | None = None
    samples: float | None = None  # total samples; overrides epochs
    deadline_hours: float | None = None
    budget_usd: float | None = None
    spot: bool = True  # whether spot plans are allowed
    max_nodes: int = 1
    gpu: str = ""  # comma-separated GPU names, any spelling; empty = all
    provider: str = ""  # comma-separated providers; empty = all

    def request(self, profile: Profile, snapshots: Sequence[Snapshot], *,
                params: JobParams | None = None, now: dt.datetime | None = None) -> Request:
        """The planning request the form describes, with the app's economics (the command
        line's builder)."""
        return RequestArgs(
            profile, samples=self.samples,
            epochs=self.epochs if self.samples is None else None, gpu=_split(self.gpu),
            provider=_split(self.provider),
            market="any" if self.spot else "on-demand", max_nodes=self.max_nodes,
            deadline_hours=self.deadline_hours, budget_usd=self.budget_usd,
            snapshots=snapshots, now=now,
            **EconomicsArgs.keywords(params or JobParams())).build()


def _split(text: str) -> list[str] | None:
    items = [t.strip() for t in text.split(",") if t.strip()]
    return items or None


@dataclass
class View:
    """The rows the offers table shows: the plans meeting the deadline and budget, sorted."""

    advice: Advice  # every plan under the filters, with the advisor's picks and relax advice
    order: npt.NDArray[np.int64]  # indices into advice.ranking.plans of the shown rows
    plans: Plans  # the shown rows only (advice.ranking.plans[order])
    inputs: JobInputs
    sort: str
    descending: bool

    @property
    def request(self) -> Request:
        return self.advice.request

    @property
    def profile(self) -> Profile:
        return self.advice.request.profile

    @property
    def total_plans(self) -> int:
        return len(self.advice.ranking)

    @property
    def meeting(self) -> int:
        """Plans meeting the deadline and the budget."""
        return int(self.advice.feasible.sum())

    @property
    def too_small(self) -> int:
        """Plans left out because the profile's per-device batch fits their GPU no way."""
        return len(self.advice.ranking.unfit)

    @property
    def on_front(self) -> npt.NDArray[np.bool_]:
        """Per shown row: on the (time, cost) Pareto front, where no plan is both faster and
        cheaper."""
        return np.isin(self.order, self.advice.pareto)

    @property
    def message(self) -> str:
        """Empty, or which constraint to relax and by how much (the advisor's words)."""
        if self.advice.ok:
            return ""
        return "no plan meets " + self.advice.describe() + ": " + \
            "; ".join(self.advice.relax or ["relax the deadline or the budget"])

    def row(self, index: int) -> PlanRow:
        return self.plans.row(index)

    def choice(self, index: int) -> Choice:
        """Row ``index`` as the advisor's choice (its own, with reasons, when it is one)."""
        full = int(self.order[index])
        for pick in (self.advice.cheapest, self.advice.fastest):
            if pick is not None and pick.index == full:
                return pick
        by = SORT_NAMES.get(self.sort, self.sort)
        return Choice("chosen", full, self.row(index),
                      (f"chosen by hand in gpucost tui: row {index + 1} of {self.meeting:,} "
                       f"plans meeting the constraints, sorted by {by}",))


SORT_NAMES = {"cost_usd": "$/job", "total_hours": "time", "usd_per_hour_total": "$/h",
              "risk": "spot risk", "throughput": "throughput", "price_date": "price date"}


def _sort_column(plans: Plans, key: str) -> np.ndarray:
    columns: dict[str, np.ndarray] = {
        "cost_usd": plans.cost_usd, "total_hours": plans.total_hours,
        "usd_per_hour_total": plans.usd_per_hour_total, "gpu": plans.gpu,
        "market": plans.market, "risk": plans.risk, "throughput": plans.throughput,
        "provider": plans.provider, "region": plans.region,
        "instance_type": plans.instance_type, "price_date": plans.price_date,
    }
    return columns[key]


def sort_order(plans: Plans, key: str, descending: bool) -> npt.NDArray[np.int64]:
    """Stable order by ``key``, ties broken by $/job."""
    if key not in SORTABLE:
        raise InputError(f"cannot sort by {key!r}", hint="sort by one of " + ", ".join(SORTABLE))
    values = _sort_column(plans, key)
    if values.dtype.kind in "fi":
        primary = -values if descending else values
        primary = np.where(np.isnan(primary), np.inf, primary)
        return np.lexsort((plans.cost_usd, primary)).astype(np.int64)
    order = np.lexsort((plans.cost_usd, values.astype(str))).astype(np.int64)
    return order[::-1] if descending else order


def rank_view(
    profile: Profile,
    snapshots: Sequence[Snapshot],
    inputs: JobInputs,
    *,
    sort: str = "cost_usd",
    descending: bool | None = None,
    now: dt.datetime | None = None,
    params: JobParams | None = None,
    limit: int = MAX_ROWS,
) -> View:
    """Rank every plan for the form's job and filters (:func:`gpucost.planning.advice.advise`),
    keep those meeting the deadline and the budget, sort them for display. Bad form values
    raise InputError, filters that leave no offer NoOffersError (both shown in the status
    line)."""
    if descending is None:
        descending = sort in BEST_FIRST_DESCENDING
    advice = advise(inputs.request(profile, snapshots, params=params, now=now))
    return _sorted_view(advice, inputs, sort, descending, limit)


def resort(view: View, sort: str, descending: bool, *, limit: int = MAX_ROWS) -> View:
    """The same plans in another order, without ranking again (milliseconds)."""
    return _sorted_view(view.advice, view.inputs, sort, descending, limit)


def _sorted_view(advice: Advice, inputs: JobInputs, sort: str, descending: bool,
                 limit: int) -> View:
    feasible = np.flatnonzero(advice.feasible)
    kept = advice.ranking.plans.take(feasible)
    order = feasible[sort_order(kept, sort, descending)[:limit]]
    return View(advice, order, advice.ranking.plans.take(order), inputs, sort, descending)


# ---- one plan: its scaling curve over node counts, stop vs destroy ------------------------------

def plan_scaling(view: View, index: int, *, max_nodes: int = SCALING_MAX_NODES) -> Scaling:
    """Row ``index``'s offer at 1..max_nodes nodes, same market and economics."""
    return scaling_curve(view.request, view.row(index), max_nodes=max_nodes)


def plan_breakeven(row: PlanRow, params: JobParams | None = None) -> Breakeven:
    """Stop vs destroy after the job, for the plan's whole group (as the plan file has it)."""
    params = params or JobParams()
    return breakeven(row.usd_per_hour_total, row.disk_gb * row.nodes, row.storage_gb_month,
                     month_hours=row.month_hours, setup_minutes=row.setup_hours * 60.0,
                     ingress_gb=params.data_gb * row.nodes, ingress_usd_gb=row.ingress_gb)


# ---- the plan file ------------------------------------------------------------------------------

def build_plan(view: View, index: int, *, command: str = DEFAULT_COMMAND, profile_ref: str = "",
               now: dt.datetime | None = None) -> Plan:
    """The plan file for row ``index`` of the view (:func:`gpucost.planning.planbuild.to_plan`)."""
    try:
        argv = shlex.split(command)
    except ValueError as err:
        raise InputError(f"the command {command!r} cannot be parsed: {err}",
                         hint="quote it as in a shell, e.g. python train.py --epochs 3") from None
    return to_plan(view.choice(index), view.advice, profile_ref=profile_ref or view.profile.name,
                   command=argv, now=now)
