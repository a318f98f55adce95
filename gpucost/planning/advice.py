"""Advice: the (hours, cost) Pareto front of the plans meeting the constraints, and two picks:

- the cheapest plan that meets the deadline (and the budget),
- the fastest plan within the budget (and the deadline).

When nothing meets the constraints, :mod:`gpucost.planning.relax` says which one to relax and by
how much; :mod:`gpucost.planning.reasons` puts each pick's reasons in words, and
:mod:`gpucost.planning.planbuild` turns a pick into a plan file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpucost.errors import NoOffersError
from gpucost.planning.picks import meets, pick
from gpucost.planning.plans import PlanRow
from gpucost.planning.ranking import Ranking, rank
from gpucost.planning.reasons import reasons
from gpucost.planning.relax import relax, relax_filters
from gpucost.planning.request import Constraints, Request


@dataclass(frozen=True)
class Choice:
    """One recommended plan: its row of the ranking and why it was picked."""

    kind: str  # "cheapest" | "fastest" | "chosen"
    index: int  # row in the ranking's plans
    row: PlanRow
    reasons: tuple[str, ...]


@dataclass
class Advice:
    ranking: Ranking
    feasible: npt.NDArray[np.bool_]  # per plan: meets the deadline and the budget
    pareto: npt.NDArray[np.int64]  # row indices of the (hours, cost) front of feasible plans
    cheapest: Choice | None
    fastest: Choice | None
    relax: list[str] = field(default_factory=list)  # non-empty when nothing is feasible

    @property
    def ok(self) -> bool:
        return self.cheapest is not None

    @property
    def request(self) -> Request:
        return self.ranking.request

    @property
    def constraints(self) -> Constraints:
        return self.ranking.request.constraints

    def describe(self) -> str:
        return self.request.describe()


def pareto_front(hours: npt.ArrayLike, cost: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Indices of the plans no other plan beats on both time and cost, fastest first.

    A plan is dominated when another is no slower and no dearer and better on one; of identical
    plans the first is kept.
    """
    h = np.asarray(hours, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    order = np.lexsort((c, h))  # by hours, then cost
    best_cost = np.minimum.accumulate(c[order])
    # a plan stays when it is strictly cheaper than every faster (or equally fast) plan before it
    previous_best = np.concatenate(([np.inf], best_cost[:-1]))
    keep = c[order] < previous_best
    return order[keep].astype(np.int64)


def advise(request: Request) -> Advice:
    """Rank every plan of the request and pick the cheapest and the fastest meeting its
    constraints."""
    try:
        ranking = rank(request)
    except NoOffersError as err:
        hints = relax_filters(request)
        raise NoOffersError(
            err.message + ("; " + "; ".join(hints) if hints else ""), hint=err.hint
        ) from None
    plans = ranking.plans
    on_time, affordable = meets(plans, request.constraints)
    feasible = on_time & affordable
    idx = np.flatnonzero(feasible)
    pareto = idx[pareto_front(plans.total_hours[idx], plans.cost_usd[idx])]
    if not len(idx):
        return Advice(ranking, feasible, pareto, None, None,
                      relax(request, ranking, on_time, affordable))
    cheapest_i, fastest_i = pick(plans.total_hours, plans.cost_usd, idx)
    budget = request.constraints.budget_usd
    if budget is not None:
        # The fastest plan within the budget stays within it even at its worst (interrupted at
        # the worst moment, finished on-demand): the budget is the run's hard cap.
        safe = idx[plans.worst_usd[idx] <= budget]
        fastest_i = pick(plans.total_hours, plans.cost_usd, safe)[1] if len(safe) else cheapest_i
    cheap_row, fast_row = plans.row(cheapest_i), plans.row(fastest_i)
    same = cheapest_i == fastest_i
    cheapest = Choice("cheapest", cheapest_i, cheap_row,
                      reasons("cheapest", cheap_row, ranking, feasible,
                              None if same else fast_row, cheapest_i))
    fastest = Choice("fastest", fastest_i, fast_row,
                     reasons("fastest", fast_row, ranking, feasible,
                             None if same else cheap_row, fastest_i))
    return Advice(ranking, feasible, pareto, cheapest, fastest)
