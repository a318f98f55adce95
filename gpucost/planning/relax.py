"""When no plan meets the constraints: which one to relax, and by how much (a later deadline, a
bigger budget, spot capacity, more nodes); when the filters leave no offer: which filter to drop.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from gpucost.errors import NoOffersError
from gpucost.format import usd
from gpucost.planning.picks import meets, pick
from gpucost.planning.ranking import Ranking, rank
from gpucost.planning.request import Filters, Request

MAX_NODES_TRIED = 16  # when a deadline needs more nodes, the most the advice suggests


def relax(
    request: Request,
    ranking: Ranking,
    on_time: npt.NDArray[np.bool_],
    affordable: npt.NDArray[np.bool_],
) -> list[str]:
    """Which constraint to relax, and by how much, when no plan meets them all."""
    c, filters = request.constraints, request.filters
    plans = ranking.plans
    hours, cost = plans.total_hours, plans.cost_usd
    out: list[str] = []
    if not len(plans):
        reasons = sorted(set(ranking.unfit.memory_note.tolist()))
        out.append(
            f"the per-device batch of {ranking.profile.batch_size} fits none of these GPUs "
            f"({reasons[0] if reasons else 'no memory estimate'}): use a smaller batch, or "
            "allow bigger GPUs"
        )
        return out  # spot or more nodes bring no other GPU: nothing would fit either
    if c.deadline_hours is not None:
        pool = affordable if affordable.any() else np.ones(len(hours), dtype=bool)
        need = float(hours[pool].min())
        if need > c.deadline_hours:
            within = " within the budget" if affordable.any() and c.budget_usd is not None else ""
            out.append(
                f"extend the deadline to {math.ceil(need * 10) / 10:g} h "
                f"(+{need - c.deadline_hours:.1f} h): the fastest plan{within} takes "
                f"{need:.1f} h"
            )
    if c.budget_usd is not None:
        pool = on_time if on_time.any() else np.ones(len(cost), dtype=bool)
        need = float(cost[pool].min())
        if need > c.budget_usd:
            meeting = (
                " that meets the deadline" if on_time.any() and c.deadline_hours is not None else ""
            )
            out.append(
                f"raise the budget to {usd(math.ceil(need * 100) / 100, exact=True)} "
                f"(+{usd(need - c.budget_usd, exact=True)}): the cheapest plan{meeting} costs "
                f"{usd(need, exact=True)}"
            )
    # Constraints that are not numbers: would spot capacity or more nodes meet everything?
    # The relaxed ranking holds every row of this one, none feasible, so only the rows it adds
    # can be picked: rank spot plans alone, and all the node limits tried at once (the most
    # nodes, then the rows within each limit). Rows keep their relative order, so the pick is
    # the one a full re-rank under the relaxed constraints would make.
    tries: list[tuple[str, Filters, tuple[int, ...]]] = []
    if filters.market == "on-demand":
        tries.append(("allow spot capacity (--spot)", replace(filters, market="spot"), ()))
    if c.deadline_hours is not None and filters.max_nodes < MAX_NODES_TRIED:
        limits = tuple(sorted({min(MAX_NODES_TRIED, filters.max_nodes * k) for k in (2, 4, 8)}))
        tries.append(("", replace(filters, max_nodes=limits[-1]), limits))
    for text, relaxed_filters, limits in tries:
        try:
            relaxed = rank(replace(request, filters=relaxed_filters))
        except NoOffersError:
            continue
        r_on_time, r_affordable = meets(relaxed.plans, c)
        feasible = r_on_time & r_affordable
        r_hours, r_cost = relaxed.plans.total_hours, relaxed.plans.cost_usd
        for limit in limits or (filters.max_nodes,):
            idx = np.flatnonzero(feasible & (relaxed.plans.nodes <= limit))
            if not len(idx):
                continue
            row = relaxed.plans.row(pick(r_hours, r_cost, idx)[0])
            if limits:  # name the node count the plan needs
                text = f"allow {row.nodes} nodes (--max-nodes {row.nodes})"
            out.append(
                f"or {text}: {row.label()} meets all constraints at "
                f"{usd(row.cost_usd, exact=True)} in {row.total_hours:.1f} h"
            )
            return out
    return out


def relax_filters(request: Request) -> list[str]:
    """When the filters leave no offer at all: which filter to drop."""
    f = request.filters
    out = []
    for text, relaxed in (
        ("lower the GPU memory minimum", replace(f, min_gpu_memory_gb=None)),
        ("drop the region filter", replace(f, regions=())),
        ("allow spot capacity", replace(f, market="any")),
        ("drop the GPU filter", replace(f, gpus=())),
        ("drop the provider filter", replace(f, providers=())),
    ):
        if relaxed == f:
            continue
        try:
            r = rank(replace(request, filters=relaxed))
        except NoOffersError:
            continue
        if text.startswith("lower the GPU memory"):
            most = float(np.nanmax(np.concatenate([r.plans.gpu_memory_gb,
                                                   r.unfit.gpu_memory_gb])))
            text += f" to {most:g} GB (the most any matching offer has)"
        out.append(f"{text}: {len(r):,} plans would match")
    return out
