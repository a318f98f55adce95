"""Why a plan was picked, in English: the reasons `gpucost plan` prints and the plan file keeps."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from gpucost.format import usd
from gpucost.model.economics import JobParams
from gpucost.planning.plans import PlanRow
from gpucost.planning.ranking import Ranking

ESTIMATE_TERMS = (
    "compute_usd",
    "setup_usd",
    "storage_usd",
    "egress_usd",
    "ingress_usd",
    "checkpoint_usd",
    "spot_rework_usd",
)


def estimate_terms(row: PlanRow) -> dict[str, float]:
    """The terms of the plan's $/job, by name."""
    return {
        "compute_usd": row.compute_usd,
        "setup_usd": row.setup_usd,
        "storage_usd": row.storage_usd,
        "egress_usd": row.egress_usd,
        "ingress_usd": row.ingress_usd,
        "checkpoint_usd": row.checkpoint_usd,
        "spot_rework_usd": row.spot_rework_usd,
    }


def spot_restart_note(params: JobParams) -> str:
    """Why a spot plan is priced as restart-from-zero: an interruption at a fraction f of the
    work loses f and bills it again."""
    if params.checkpoint_gb <= 0 or not params.checkpoints:
        return ("priced as restart-from-zero: no checkpoints (give --checkpoint-gb and an "
                "s3:// --checkpoint-target to resume)")
    if not params.object_store_checkpoints:
        return ("priced as restart-from-zero: no object-store checkpoint target, and local "
                "checkpoints go with a reclaimed instance (--checkpoint-target "
                "s3://bucket/prefix resumes)")
    return "priced as restart-from-zero: the job is shorter than a checkpoint interval"


def breakdown(row: PlanRow) -> str:
    return ", ".join(
        f"{name.removesuffix('_usd').replace('_', ' ')} {usd(value, exact=True)}"
        for name, value in estimate_terms(row).items()
        if value >= 0.005
    )


def reasons(
    kind: str,
    row: PlanRow,
    ranking: Ranking,
    mask: npt.NDArray[np.bool_],
    alt: PlanRow | None,
    chosen: int,
) -> tuple[str, ...]:
    plans = ranking.plans
    constraints = ranking.request.constraints
    n = int(mask.sum())
    out: list[str] = []
    if kind == "cheapest":
        scope = (
            f"within the {constraints.deadline_hours:g} h deadline"
            if constraints.deadline_hours is not None
            else "with no deadline"
        )
        out.append(
            f"cheapest of {n:,} plans that finish {scope}: {usd(row.cost_usd, exact=True)} "
            f"expected over {row.total_hours:.1f} h"
        )
    else:
        budget = constraints.budget_usd
        if budget is None:
            scope = "with no budget limit"
        elif row.worst_usd <= budget:
            scope = f"within the {usd(budget, exact=True)} budget even at worst"
        else:
            # No plan within the budget stays within it at worst: the pick falls back to the
            # cheapest, and saying "even at worst" would be false.
            scope = (f"within the {usd(budget, exact=True)} budget expected (none stays within "
                     f"it at worst; this one may reach {usd(row.worst_usd, exact=True)})")
        out.append(
            f"fastest of {n:,} plans {scope}: {row.total_hours:.1f} h for "
            f"{usd(row.cost_usd, exact=True)} expected"
        )
    out.append(f"$/job = {breakdown(row)}")
    if row.cost_high_usd > row.cost_low_usd:
        out.append(f"cost band {usd(row.cost_low_usd, exact=True)}-"
                   f"{usd(row.cost_high_usd, exact=True)}: the throughput's spread over "
                   "held-out predictions like this one (about 8 in 10 within)")
    out.append(
        f"{row.throughput:,.0f} {ranking.profile.sample_unit}/s predicted at "
        f"{usd(row.usd_per_hour_total, exact=True)}/h; the cost is per job, not per "
        f"hour: a faster offer can be cheaper"
    )
    if row.memory_note:
        out.append(f"memory: {row.memory_note}")
    if row.nodes > 1:
        out.append(f"{row.nodes} nodes scale at {row.efficiency:.0%} of linear")
    if row.interruption_rate > 0:
        interval = row.checkpoint_interval_hours
        ckpt = (
            f"checkpoint every {interval * 60:.0f} min of work (Young/Daly)"
            if math.isfinite(interval)
            else spot_restart_note(ranking.request.economics)
            if row.market == "spot"
            else "no checkpoints"
        )
        out.append(
            f"{row.market}: {row.interruptions:.2f} interruptions expected "
            f"({row.risk:.0%} chance of at least one), {ckpt}; the expected "
            f"cost includes {usd(row.spot_rework_usd, exact=True)} of rework; worst case "
            f"{usd(row.worst_usd, exact=True)}"
        )
    if alt is not None:
        if kind == "cheapest":
            out.append(
                f"the fastest plan ({alt.label()}) takes {alt.total_hours:.1f} h "
                f"for {usd(alt.cost_usd, exact=True)}"
            )
        else:
            out.append(
                f"the cheapest plan ({alt.label()}) costs {usd(alt.cost_usd, exact=True)} "
                f"over {alt.total_hours:.1f} h"
            )
    others = np.flatnonzero(mask)
    others = others[others != chosen]
    if kind != "cheapest":
        # the pick gives a near-tie in time to the cheaper plan, so a plan faster by a hair
        # (and dearer) can exist: the next fastest is the quickest of those not faster
        others = others[plans.total_hours[others] >= row.total_hours]
    if len(others):
        key = plans.cost_usd if kind == "cheapest" else plans.total_hours
        r = plans.row(int(others[np.argmin(key[others])]))
        if kind == "cheapest":
            d = r.cost_usd - row.cost_usd
            out.append(
                f"next cheapest: {r.label()} at {usd(r.cost_usd, exact=True)} "
                f"({'+' if d >= 0 else '-'}{usd(abs(d), exact=True)}"
                + (f", {r.total_hours:.1f} h)" if d < 0 else ")")
            )
        else:
            d = r.total_hours - row.total_hours
            out.append(
                f"next fastest: {r.label()} at {r.total_hours:.2f} h ({d:+.2f} h) "
                f"for {usd(r.cost_usd, exact=True)}"
            )
    return tuple(out)
