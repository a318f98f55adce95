"""The two rules that choose among ranked plans, shared by the advice and by the relaxation
that runs when nothing qualifies: which plans meet the constraints, and the cheapest and the
fastest of a set, near-ties going to the other criterion.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpucost.planning.plans import Plans
from gpucost.planning.request import Constraints

TIE_FRACTION = 0.01  # plans within 1 % on one criterion are ranked by the other


def pick(
    hours: npt.NDArray[np.float64], cost: npt.NDArray[np.float64], idx: npt.NDArray[np.int64]
) -> tuple[int, int]:
    """(cheapest, fastest) among the rows ``idx``. Near-ties go to the other criterion: a plan
    0.5 % faster is not worth four times the money."""
    near_cheapest = idx[cost[idx] <= cost[idx].min() * (1 + TIE_FRACTION)]
    cheapest = int(near_cheapest[np.lexsort((cost[near_cheapest], hours[near_cheapest]))[0]])
    near_fastest = idx[hours[idx] <= hours[idx].min() * (1 + TIE_FRACTION)]
    fastest = int(near_fastest[np.lexsort((hours[near_fastest], cost[near_fastest]))[0]])
    return cheapest, fastest


def meets(plans: Plans, c: Constraints) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per plan: (meets the deadline, within the budget)."""
    hours, cost = plans.total_hours, plans.cost_usd
    on_time = (
        np.ones(len(hours), dtype=bool) if c.deadline_hours is None else hours <= c.deadline_hours
    )
    affordable = np.ones(len(cost), dtype=bool) if c.budget_usd is None else cost <= c.budget_usd
    return on_time, affordable
