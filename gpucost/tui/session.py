"""What the TUI computes, without any Textual: the job form's inputs, the ranking they select,
one plan's scaling curve and break-even, and the plan file for a chosen row.

Kept apart from the widgets so that the screens stay thin and this logic is tested directly.
Everything here is pure numpy over :mod:`gpucost.ranking` columns; it runs in worker threads.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpucost.advisor import Advice, Choice, Constraints, advise, to_plan
from gpucost.cli.scale import KNEE_TIME_CUT
from gpucost.errors import InputError
from gpucost.model.economics import Breakeven, JobParams, breakeven
from gpucost.plan import Plan
from gpucost.pricing.snapshot import Snapshot
from gpucost.profile import Profile
from gpucost.ranking import Job, Ranking, make_filters, rank

# Ranking columns the offers table can be sorted by; the throughput sorts best (highest) first.
SORTABLE: tuple[str, ...] = ("cost_usd", "total_hours", "usd_per_hour_total", "gpu", "market",
                             "risk", "throughput", "provider", "region", "instance_type",
                             "price_date")
BEST_FIRST_DESCENDING = frozenset({"throughput"})
MAX_ROWS = 100  # rows handed to the table: it measures every cell on a refresh (~1 ms a row)
SCALING_MAX_NODES = 16
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

    def job(self, profile: Profile) -> Job:
        if self.samples is not None:
            return Job.from_args(profile, samples=self.samples)
        return Job.from_args(profile, epochs=self.epochs)


def _split(text: str) -> list[str] | None:
    items = [t.strip() for t in text.split(",") if t.strip()]
    return items or None


@dataclass
class View:
    """The rows the offers table shows: the plans meeting the deadline and budget, sorted."""

    advice: Advice  # every plan under the filters, with the advisor's picks and relax advice
    order: np.ndarray  # indices into advice.ranking of the shown rows, in display order
    ranking: Ranking  # the shown rows only (advice.ranking[order])
    inputs: JobInputs
    sort: str
    descending: bool

    @property
    def total_plans(self) -> int:
        return len(self.advice.ranking)

    @property
    def meeting(self) -> int:
        """Plans meeting the deadline and the budget."""
        return int(self.advice.feasible.sum())

    @property
    def too_small(self) -> int:
        """Plans left out because the profile's per-device batch does not fit the GPU."""
        return int((~self.advice.fits).sum())

    @property
    def on_front(self) -> np.ndarray:
        """Per shown row: on the (time, cost) Pareto front, where no plan is both faster and
        cheaper."""
        return np.isin(self.order, self.advice.pareto)

    def peak_gb(self, index: int) -> float:
        """Predicted peak memory per GPU of row ``index``, GB (NaN: unknown)."""
        return float(self.advice.peak_gb[self.order[index]])

    @property
    def message(self) -> str:
        """Empty, or which constraint to relax and by how much (the advisor's words)."""
        if self.advice.ok:
            return ""
        return "no plan meets " + self.advice.constraints.describe() + ": " + \
            "; ".join(self.advice.relax or ["relax the deadline or the budget"])

    def row(self, index: int) -> dict[str, Any]:
        return {k: v[index].item() if hasattr(v[index], "item") else v[index]
                for k, v in self.ranking.columns.items()}

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


def _subset(ranking: Ranking, index: np.ndarray) -> Ranking:
    return Ranking(ranking.profile, ranking.job, {k: v[index] for k, v in ranking.columns.items()},
                   ranking.sources, ranking.sort, ranking.generated_at, ranking.notes)


def sort_order(columns: dict[str, np.ndarray], key: str, descending: bool) -> np.ndarray:
    """Stable order by ``key``, ties broken by $/job."""
    if key not in SORTABLE:
        raise InputError(f"cannot sort by {key!r}", hint="sort by one of " + ", ".join(SORTABLE))
    values = columns[key]
    if values.dtype.kind in "fi":
        primary = -values if descending else values
        primary = np.where(np.isnan(primary), np.inf, primary)
        return np.lexsort((columns["cost_usd"], primary))
    order = np.lexsort((columns["cost_usd"], values))
    return order[::-1] if descending else order


def constraints(inputs: JobInputs) -> Constraints:
    return Constraints(deadline_hours=inputs.deadline_hours, budget_usd=inputs.budget_usd,
                       spot_allowed=inputs.spot, max_nodes=inputs.max_nodes,
                       gpus=tuple(_split(inputs.gpu) or ()),
                       providers=tuple(_split(inputs.provider) or ()))


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
    """Rank every plan for the form's job and filters (:func:`gpucost.advisor.advise`), keep
    those meeting the deadline and the budget, sort them for display. Bad form values raise
    InputError, filters that leave no offer NoOffersError (both shown in the status line)."""
    if descending is None:
        descending = sort in BEST_FIRST_DESCENDING
    advice = advise(profile, inputs.job(profile), snapshots, constraints(inputs),
                    params or JobParams(), now=now)
    return _sorted_view(advice, inputs, sort, descending, limit)


def resort(view: View, sort: str, descending: bool, *, limit: int = MAX_ROWS) -> View:
    """The same plans in another order, without ranking again (milliseconds)."""
    return _sorted_view(view.advice, view.inputs, sort, descending, limit)


def _sorted_view(advice: Advice, inputs: JobInputs, sort: str, descending: bool,
                 limit: int) -> View:
    feasible = np.flatnonzero(advice.feasible)
    kept = {k: v[feasible] for k, v in advice.ranking.columns.items()}
    order = feasible[sort_order(kept, sort, descending)[:limit]]
    return View(advice, order, _subset(advice.ranking, order), inputs, sort, descending)


# ---- one plan: its scaling curve over node counts, stop vs destroy ------------------------------

@dataclass(frozen=True)
class ScalePoint:
    nodes: int
    throughput: float  # samples/s, whole group
    efficiency: float  # fraction of linear scaling
    hours: float  # expected wall clock
    cost_usd: float  # expected $/job


@dataclass(frozen=True)
class Scaling:
    points: tuple[ScalePoint, ...]  # 1..max_nodes
    knee: int | None  # as `gpucost scale` defines it; None: no knee up to max_nodes
    cheapest: int  # node count with the lowest $/job


def knee_nodes(compute_hours: Sequence[float], cut: float = KNEE_TIME_CUT) -> int | None:
    """The knee of `gpucost scale`: the first node count n from which doubling to 2n cuts the
    job's compute time by less than ``cut`` (the bill doubles, the job ends only a little
    sooner). ``compute_hours[i]`` is the time on i + 1 nodes; counts up to half its length are
    judged. None: every judged count still scales."""
    if not compute_hours:
        raise InputError("a scaling curve needs at least one point")
    for n in range(1, len(compute_hours) // 2 + 1):
        if compute_hours[2 * n - 1] > (1.0 - cut) * compute_hours[n - 1]:
            return n
    return None


def scaling_curve(profile: Profile, job: Job, snapshots: Sequence[Snapshot],
                  row: dict[str, Any], *, max_nodes: int = SCALING_MAX_NODES,
                  now: dt.datetime | None = None, params: JobParams | None = None) -> Scaling:
    """The plan's offer at 1..max_nodes nodes, same market: throughput, hours, $/job (ranked
    up to twice that, which judging the knee at max_nodes needs)."""
    mine = [s for s in snapshots if s.source == row["source"]]
    filters = make_filters(gpu=row["gpu"], provider=row["provider"], market=row["market"],
                           max_nodes=2 * max_nodes)
    full = rank(profile, job, mine, filters, now=now, job_params=params)
    c = full.columns
    mask = ((c["instance_type"] == row["instance_type"]) & (c["region"] == row["region"])
            & (c["zone"] == row["zone"]) & (c["market"] == row["market"]))
    idx = np.flatnonzero(mask)
    compute_hours: dict[int, float] = {}
    seen: dict[int, ScalePoint] = {}
    for i in idx[np.argsort(c["nodes"][idx], kind="stable")]:
        n = int(c["nodes"][i])
        compute_hours.setdefault(n, float(c["hours"][i]))
        seen.setdefault(n, ScalePoint(n, float(c["throughput"][i]), float(c["efficiency"][i]),
                                      float(c["total_hours"][i]), float(c["cost_usd"][i])))
    points = tuple(seen[n] for n in sorted(seen) if n <= max_nodes)
    knee = knee_nodes([compute_hours[n] for n in sorted(compute_hours)])
    cheapest = min(points, key=lambda p: p.cost_usd).nodes
    return Scaling(points, knee, cheapest)


def plan_breakeven(row: dict[str, Any], params: JobParams | None = None) -> Breakeven:
    """Stop vs destroy after the job, for the plan's whole group (as the plan file has it)."""
    params = params or JobParams()
    nodes = int(row["nodes"])
    return breakeven(float(row["usd_per_hour_total"]), float(row["disk_gb"]) * nodes,
                     float(row["storage_gb_month"]), month_hours=float(row["month_hours"]),
                     setup_minutes=float(row["setup_hours"]) * 60.0,
                     ingress_gb=params.data_gb * nodes, ingress_usd_gb=float(row["ingress_gb"]))


# ---- the plan file ------------------------------------------------------------------------------

def build_plan(view: View, index: int, *, command: str = DEFAULT_COMMAND, profile_ref: str = "",
               now: dt.datetime | None = None) -> Plan:
    """The plan file for row ``index`` of the view (:func:`gpucost.advisor.to_plan`)."""
    profile, inputs = view.ranking.profile, view.inputs
    epochs = dataset_size = None
    if inputs.samples is None:
        epochs = inputs.epochs if inputs.epochs is not None else profile.epochs
        dataset_size = profile.dataset_size
    try:
        argv = shlex.split(command)
    except ValueError as err:
        raise InputError(f"the command {command!r} cannot be parsed: {err}",
                         hint="quote it as in a shell, e.g. python train.py --epochs 3") from None
    return to_plan(view.choice(index), view.advice, profile_ref=profile_ref or profile.name,
                   command=argv, epochs=epochs, dataset_size=dataset_size, now=now)
